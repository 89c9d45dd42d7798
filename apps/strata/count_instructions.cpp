// `strata trace ... --count instructions`, the parent's side (Note [Instructions per row] in
// measure/instruction_count.h): strata runs itself again, with the same command line, under valgrind's
// callgrind, and passes on the child's output and exit code. The child counts; the parent only starts it,
// waits and removes callgrind's dumps.
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "apps/strata/commands.h"
#include "lib/child_process.h"
#include "lib/error.h"
#include "measure/instruction_count.h"

namespace strata::app {
namespace {

namespace fs = std::filesystem;

// The first executable `name` on PATH, or "" when there is none.
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path == nullptr ? "/usr/bin:/bin" : path;
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// This process's command line as it was typed (argv[1...]), read back from /proc.
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    const size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (!args.empty()) args.erase(args.begin());
  return args;
}

// The folder of callgrind's dumps, removed whatever happens to the run.
struct DumpFolder {
  std::string path;
  DumpFolder() {
    std::string templ = (fs::temp_directory_path() / "strata-callgrind-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr)
      throw Error("--count instructions: could not make a folder for callgrind's dumps: " + std::string(std::strerror(errno)));
    path = templ;
  }
  ~DumpFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  DumpFolder(const DumpFolder&) = delete;
  DumpFolder& operator=(const DumpFolder&) = delete;
};

}  // namespace

int run_trace_under_callgrind() {
  if (!measure::instruction_counting_built())
    throw UnavailableError(
        "--count instructions: this strata was built without valgrind's header <valgrind/callgrind.h>; install "
        "valgrind (scripts/install-deps, or apt install valgrind) and build strata again");
  const std::string valgrind = find_on_path("valgrind");
  if (valgrind.empty())
    throw UnavailableError(
        "--count instructions runs the calls under valgrind's callgrind, and there is no valgrind on PATH; install "
        "it with scripts/install-deps (Debian's valgrind package: apt install valgrind)");
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("--count instructions: could not find strata's own executable: " + ec.message());

  DumpFolder dumps;
  // --dump-instr and --dump-line off: only each dump's total is read, so its per-line detail is not needed.
  std::vector<std::string> args = {valgrind, "--tool=callgrind", "--quiet", "--dump-instr=no",
                                   "--callgrind-out-file=" + dumps.path + "/callgrind.out", self.string()};
  for (std::string& a : own_arguments()) args.push_back(std::move(a));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e)
    if (!std::string_view(*e).starts_with(std::string(measure::kCallgrindOutEnv) + "=")) env_text.emplace_back(*e);
  env_text.push_back(std::string(measure::kCallgrindOutEnv) + "=" + dumps.path + "/callgrind.out");
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);

  // A process group of its own (Note [Waiting for a child] in lib/child_process.h).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw UnavailableError("--count instructions: could not run " + valgrind + ": " + std::strerror(rc));
  bool timed_out = false;
  const int status = wait_for_child(pid, 0, "valgrind", timed_out);
  if (status < 0) throw Error("--count instructions: valgrind ended by signal " + std::to_string(-status));
  return status;
}

}  // namespace strata::app
