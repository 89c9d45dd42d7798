// `strata sass`: what machine code libstrata_cuda.so carries (docs/compiled.md, "SASS"): the toolkit's
// cuobjdump lists it, layers/compiler/sass.h reads the listing, and this prints the embedded architectures
// and each kernel's instruction mix. Runs on any machine with cuobjdump: it reads a file, not a GPU.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/strata/commands.h"
#include "apps/strata/module_file.h"
#include "layers/compiler/sass.h"
#include "lib/error.h"

extern char** environ;

namespace strata::app {
namespace {

constexpr const char* kDefaultCuobjdump = "/usr/local/cuda/bin/cuobjdump";
constexpr const char* kHowToGet =
    "it comes with the CUDA toolkit (bin/cuobjdump), or `pip install nvidia-cuda-cuobjdump`; set CUOBJDUMP "
    "to its path";

// $CUOBJDUMP when set (taken as given, so that a wrong path is reported rather than passed over), else
// cuobjdump on PATH, else the toolkit's usual place. "" with `why` when there is none.
std::string find_cuobjdump(std::string& why) {
  if (const char* env = std::getenv("CUOBJDUMP"); env != nullptr && *env != '\0') {
    if (::access(env, X_OK) == 0) return env;
    why = std::string("CUOBJDUMP is ") + env + ", which is not an executable file (" + std::strerror(errno) +
          "); " + kHowToGet;
    return "";
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      const std::string candidate = (dir.empty() ? "." : dir) + "/cuobjdump";
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  if (::access(kDefaultCuobjdump, X_OK) == 0) return kDefaultCuobjdump;
  why = std::string("no cuobjdump: not in CUOBJDUMP, on PATH or at ") + kDefaultCuobjdump + "; " + kHowToGet;
  return "";
}

// Runs `args` without a shell and returns its stdout and stderr together (cuobjdump says "No PTX file
// found" on stderr, and that is part of the answer). Throws Error when it cannot start or fails.
std::string capture(std::vector<std::string> args) {
  int fds[2];
  if (::pipe(fds) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw UnavailableError(args[0] + " could not be started: " + std::strerror(rc) + "; " + kHowToGet);
  }
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string command;
    for (const std::string& a : args) command += (command.empty() ? "" : " ") + a;
    throw Error(command + " failed (" +
                (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                   : "signal " + std::to_string(WTERMSIG(status))) +
                "):\n" + out);
  }
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : " ") + i;
  return s.empty() ? "none" : s;
}

// "add_kernel<__half>" out of "void strata::kernels::cuda::(anonymous namespace)::add_kernel<__half>(...)":
// the table's last column, where a reader looks for the kernel; the full name is one --module away.
std::string short_name(const std::string& demangled) {
  std::string s = demangled;
  // The parameter list is the balanced group at the end; "(anonymous namespace)" is another one.
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      depth += s[i] == ')' ? 1 : s[i] == '(' ? -1 : 0;
      if (depth == 0) {
        s.resize(i);
        break;
      }
    }
  }
  int depth = 0;
  size_t cut = 0;  // just after the last "::" or space outside template arguments: drops scopes and "void "
  for (size_t i = 0; i < s.size(); ++i) {
    depth += s[i] == '<' ? 1 : s[i] == '>' ? -1 : 0;
    if (depth == 0 && s[i] == ':' && i + 1 < s.size() && s[i + 1] == ':') cut = i + 2;
    if (depth == 0 && s[i] == ' ' && s.compare(i + 1, 10, "namespace)") != 0) cut = i + 1;
  }
  return s.substr(cut);
}

}  // namespace

int run_sass(const std::string& module_option) {
  std::string why;
  const std::string cuobjdump = find_cuobjdump(why);
  if (cuobjdump.empty()) throw UnavailableError("strata sass needs cuobjdump: " + why);
  std::string module = module_option;
  if (module.empty()) {
#ifdef STRATA_CUDA_MODULE_BUILD_PATH
    module = find_module_file("libstrata_cuda.so", "STRATA_CUDA_MODULE", STRATA_CUDA_MODULE_BUILD_PATH, why);
#else
    why = "this build has no CUDA layers, so no libstrata_cuda.so; name a module with --module";
#endif
    if (module.empty()) throw UnavailableError("strata sass: " + why);
  } else if (::access(module.c_str(), R_OK) != 0) {
    throw UsageError("--module " + quote_typed(module) + ": " + std::strerror(errno));
  }
  const compiler::EmbeddedCode code =
      compiler::parse_cuobjdump_list(capture({cuobjdump, "--list-elf", "--list-ptx", module}));
  const std::vector<compiler::SassFunction> functions =
      compiler::parse_sass(capture({cuobjdump, "-sass", module}));

  std::cout << "module: " << module << "\ncuobjdump: " << cuobjdump
            << "\nembedded SASS: " << joined(code.sass_archs) << "\nembedded PTX: " << joined(code.ptx_archs)
            << "\nkernels: " << functions.size() << "\n\n";
  std::cout << std::left << std::setw(6) << "arch" << std::right << std::setw(7) << "instrs";
  for (int c = 0; c < compiler::kSassClassCount; ++c) {
    std::cout << std::setw(10) << compiler::sass_class_name(static_cast<compiler::SassClass>(c));
  }
  std::cout << "  kernel\n";
  for (const compiler::SassFunction& f : functions) {
    const compiler::SassMix mix = compiler::instruction_mix(f);
    std::cout << std::left << std::setw(6) << f.arch << std::right << std::setw(7) << mix.total;
    for (const int64_t n : mix.counts) std::cout << std::setw(10) << n;
    std::cout << "  " << short_name(f.demangled) << "\n";
  }
  return 0;
}

}  // namespace strata::app
