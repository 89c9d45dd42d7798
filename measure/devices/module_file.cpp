#include "measure/devices/module_file.h"

#include <unistd.h>

#include <cstdlib>

namespace strata::measure {

std::string executable_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, size_t(n));
  return path.substr(0, path.rfind('/'));
}

std::string find_module_file(const char* file_name, const char* env_var, const char* build_path, std::string& why) {
  if (const char* env = std::getenv(env_var); env != nullptr && *env != '\0') return env;
  const std::string next_to_exe = executable_dir() + "/" + file_name;
  for (const std::string& path : {next_to_exe, std::string(build_path)}) {
    if (access(path.c_str(), F_OK) == 0) return path;
  }
  why = std::string(file_name) + " is neither next to the executable (" + next_to_exe + ") nor where this build wrote it (" +
        build_path + "); set " + env_var + " to its path";
  return "";
}

}  // namespace strata::measure
