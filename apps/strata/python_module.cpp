// The loader of libstrata_python.so and the search for the strata package, on the executable's side
// (Note [The Python module] in apps/python/python_module_abi.h).
#include "apps/strata/python_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "lib/error.h"
#include "lib/host_clock.h"
#include "measure/devices/module_file.h"

namespace strata::app {
namespace {

constexpr const char* kModuleName = "libstrata_python.so";

struct Loaded {
  const StrataPythonModule* module = nullptr;
  std::string why;
  double load_ns = 0;
};

Loaded load() {
  Loaded r;
  const int64_t t0 = host_clock::now_ns();
  const std::string path =
      measure::find_module_file(kModuleName, "STRATA_PYTHON_MODULE", STRATA_PYTHON_MODULE_BUILD_PATH, r.why);
  if (path.empty()) return r;
  // RTLD_GLOBAL: numpy's and torch's extension modules look libpython's symbols up in the global scope.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    r.why = err != nullptr ? err : path + ": dlopen failed";
    return r;
  }
  using Entry = const StrataPythonModule* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, "strata_python_module_v1"));
  const StrataPythonModule* module = entry != nullptr ? entry() : nullptr;
  if (module == nullptr || module->version != kStrataPythonModuleVersion) {
    r.why = path + " is not a strata Python module of this version; rebuild it";
    return r;
  }
  r.module = module;
  r.load_ns = double(host_clock::now_ns() - t0);
  return r;
}

const Loaded& loaded() {
  static const Loaded kResult = load();
  return kResult;
}

}  // namespace

const StrataPythonModule* python_module(std::string& why) {
  const Loaded& l = loaded();
  if (l.module == nullptr) why = "the Python module could not be loaded: " + l.why;
  return l.module;
}

const StrataPythonModule& require_python_module() {
  std::string why;
  const StrataPythonModule* m = python_module(why);
  if (m == nullptr) throw UnavailableError(why);
  return *m;
}

double python_load_ns() { return loaded().module != nullptr ? loaded().load_ns : 0.0; }

std::string python_package_dir() {
  auto has_package = [](const std::string& dir) { return access((dir + "/strata/__init__.py").c_str(), F_OK) == 0; };
  if (const char* env = std::getenv("STRATA_PYTHONPATH"); env != nullptr && *env != '\0') {
    if (!has_package(env)) {
      throw UnavailableError(std::string("STRATA_PYTHONPATH=") + env +
                             " holds no strata package (no strata/__init__.py there)");
    }
    return env;
  }
  const std::string exe = measure::executable_dir();
  const std::string beside_build = exe.substr(0, exe.rfind('/'));  // build/apps/strata -> build/apps
  const std::string candidates[] = {beside_build.substr(0, beside_build.rfind('/')) + "/python",
                                    std::string(STRATA_PYTHON_PACKAGE_BUILD_PATH)};
  for (const std::string& dir : candidates) {
    if (has_package(dir)) return dir;
  }
  throw UnavailableError("the strata Python package was not found in " + candidates[0] + " nor in " + candidates[1] +
                         " (build it with -DSTRATA_PYTHON=ON, or set STRATA_PYTHONPATH to the directory holding strata/)");
}

}  // namespace strata::app
