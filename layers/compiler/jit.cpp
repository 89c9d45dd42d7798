// The JIT: find the system C++ compiler, compile a kernel's source into a shared object through an
// on-disk cache, load it.
//
// Note [The kernel cache]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A kernel's shared object is <cache>/<key>.so, where key = a 64-bit FNV-1a hash (16 hex digits) of the
// kernel ABI, the source, the dtype, the compiler's identity, the flags and the CPU model (the flags say
// -march=native, so an object built on one CPU must not be picked up on another through a shared home).
// The key is also compiled into the object (strata_kernel_key) and checked at load, with the ABI, so
// that a file of another layout or a foreign file under that name is recompiled, never called.
// Concurrent processes: the compiler writes a temporary name in the cache directory itself, which is then
// renamed onto <key>.so (rename is atomic within a directory): a reader sees the old file, the new one or
// none, never half of one; two processes compiling the same kernel both rename a complete file. The source
// is written in a private work directory outside the cache; when the compiler refuses it, the temporary
// object is removed and the work directory is kept, its path in the error, so nothing half-written is left
// in the cache and the user can read what failed. The source of every cached kernel is kept beside it as
// <key>.cpp (written the same way) for reading. A cache directory that cannot be written (or created) is
// replaced by a private temporary one, and the compile's timings say so.
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "layers/compiler/internal.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/child_process.h"
#include "lib/host_clock.h"
#include "lib/input_file.h"
#include "lib/machine.h"
#include "lib/zone.h"

extern char** environ;

namespace strata::compiler::detail {
namespace {

namespace fs = std::filesystem;

// -fopenmp-simd, -ffp-contract=off and SLEEF: Note [Vector math] in codegen.cpp.
constexpr const char* kFlags[] = {"-O3", "-march=native", "-std=c++17", "-fPIC", "-shared", "-fopenmp-simd", "-ffp-contract=off"};

// The vector width the loop is compiled for: the eager loops' (GCC prefers 256-bit vectors on AVX-512
// CPUs, and each 8-lane call would then fill half of a 16-lane SLEEF call).
std::vector<std::string> compile_flags() {
  std::vector<std::string> flags(std::begin(kFlags), std::end(kFlags));
  if (kernels::cpu::cpu_vector_bytes() == 64) flags.emplace_back("-mprefer-vector-width=512");
  return flags;
}
constexpr const char* kLibs[] = {"-lsleef", "-lm"};

std::string getenv_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

std::string temp_root() { return getenv_or("TMPDIR", "/tmp"); }

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string search_path(const std::string& name) {
  std::stringstream dirs(getenv_or("PATH", "/usr/bin:/bin"));
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  return "";
}

std::string make_temp_dir(const std::string& in, const char* prefix) {
  std::string pattern = in + "/" + prefix + "XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

}  // namespace

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) throw Error("compiler: could not write " + path + ": " + std::strerror(errno));
}

std::string read_file(const std::string& path) { return read_regular_file(path, kMaxCacheFileBytes).bytes; }

std::optional<std::string> read_cache_entry(const std::string& path, std::string& refused) {
  refused.clear();
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;  // a miss
  InputFile f = read_regular_file(path, kMaxCacheFileBytes);
  if (f.ok()) return std::move(f.bytes);
  // A dangling symlink is a miss too: compiling renames a file over it.
  if (f.failure == InputFile::Failure::kCannotOpen && ::stat(path.c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;
  refused = "the cached file " + f.why;
  return std::nullopt;
}

// A name in the cache directory no other process or thread uses: the temporary the compiler writes.
std::string temp_name_in(const std::string& dir, const std::string& key, const char* ext) {
  static std::atomic<uint64_t> counter{0};
  return dir + "/." + key + ext + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

std::string write_into_cache(const std::string& dir, const std::string& key, const char* ext, const std::string& text) {
  const std::string tmp = temp_name_in(dir, key, ext);
  const std::string path = dir + "/" + key + ext;
  try {
    write_file(tmp, text);
  } catch (const Error&) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error("compiler: could not move " + tmp + " onto " + path + " in the cache: " + why);
  }
  return path;
}

int run_logged(std::vector<std::string> args, const std::string& log, int* spawn_error, double timeout_s) {
  if (timeout_s < 0) timeout_s = compile_timeout_from_env();
  const std::string what = fs::path(args[0]).filename().string() + " (" + args[0] + ")";
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // A process group of its own, so that a timeout or a signal ends the driver and what it started
  // (Note [Waiting for a child] in lib/child_process.h).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    if (spawn_error != nullptr) *spawn_error = rc;
    return kCouldNotStart;
  }
  bool timed_out = false;
  const int status = wait_for_child(pid, timeout_s, what, timed_out);
  return timed_out ? kTimedOut : status;
}

namespace {

// Runs the compiler without a shell, its output into `log`; returns the exit status (or -signal).
int run_compiler(const Toolchain& tc, const std::string& source, const std::string& output, const std::string& log) {
  const std::string& cxx = tc.path;
  std::vector<std::string> args = {cxx};
  for (const std::string& f : compile_flags()) args.emplace_back(f);
  args.insert(args.end(), {"-o", output, source});
  for (const char* l : kLibs) args.emplace_back(l);
  int spawn_error = 0;
  const int status = run_logged(std::move(args), log, &spawn_error, tc.timeout_s);
  if (status == kCouldNotStart) throw CompilerUnavailableError("compiler: could not run " + cxx + ": " + std::strerror(spawn_error));
  return status;
}

struct Loaded {
  KernelEntry entry = nullptr;
  std::string why_not;  // when entry is null
};

// Note [A sealed kernel object]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// dlopen maps a file and trusts it: a truncated or damaged object under a key's name killed the process
// with SIGBUS when a page past the end was touched, and a FIFO there hung it. So an object is sealed
// before it is renamed into the cache: a fixed-length trailer (ELF loaders ignore bytes past what the
// headers describe) holds the object's size and its FNV-1a hash. Before dlopen, the file is read as a
// regular file of bounded size (lib/input_file.h) and both are checked; anything else under the name
// (cut short, an edited byte, no trailer, not a regular file) is refused with the reason, compiled over
// and reported (KernelBuild::cache_refused). The file is checked, then mapped by name: the cache is
// only ever changed by renames, so what was checked is what is mapped.
constexpr char kSealFormat[] = "\nstrata-kernel-object v1 bytes=%016llx fnv1a=%016llx\n";
constexpr size_t kSealBytes = sizeof("\nstrata-kernel-object v1 bytes=") - 1 + 16 + sizeof(" fnv1a=") - 1 + 16 + 1;

std::string seal_text(unsigned long long size, unsigned long long hash) {
  char buf[kSealBytes + 1];
  std::snprintf(buf, sizeof buf, kSealFormat, size, hash);
  return std::string(buf, kSealBytes);
}
std::string seal_of(const std::string& object) { return seal_text(object.size(), fnv1a(object)); }

// "" when `bytes` (a whole file) is a sealed object whose size and hash hold, else why not.
std::string check_seal(const std::string& bytes) {
  if (bytes.size() < kSealBytes) return "it is " + std::to_string(bytes.size()) + " bytes, too short for a kernel";
  const std::string object = bytes.substr(0, bytes.size() - kSealBytes);
  unsigned long long size = 0, hash = 0;
  const std::string seal = bytes.substr(object.size());
  if (std::sscanf(seal.c_str(), kSealFormat, &size, &hash) != 2 || seal != seal_text(size, hash)) {
    return "it has no strata seal (cut short, or not written by this strata)";
  }
  if (size != object.size())
    return "its seal records " + std::to_string(size) + " bytes and it holds " + std::to_string(object.size());
  if (hash != fnv1a(object)) return "its content does not match the hash in its seal (damaged)";
  return "";
}

// Appends the seal to the compiler's output (still a temporary, not yet renamed into the cache).
void seal_object(const std::string& path) {
  const InputFile f = read_regular_file(path, kMaxCacheFileBytes);
  if (!f.ok()) throw Error("compiler: the compiled kernel " + path + " " + f.why);
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << seal_of(f.bytes);
  out.close();
  if (!out) throw Error("compiler: could not write " + path + ": " + std::strerror(errno));
}

// The seal's check, then dlopen + the ABI and key checks. Handles stay open for the process's life: a
// kernel may be called by any CompiledGraph at any time, and the objects are small.
Loaded load(const std::string& path, const std::string& key) {
  std::string refused;
  const std::optional<std::string> bytes = read_cache_entry(path, refused);
  if (!bytes) return {nullptr, refused.empty() ? "the file is gone" : refused};
  if (std::string why = check_seal(*bytes); !why.empty()) return {nullptr, "the cached file " + why};
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return {nullptr, std::string("dlopen failed: ") + ::dlerror()};
  auto abi = reinterpret_cast<int (*)()>(::dlsym(handle, "strata_kernel_abi"));
  auto stored = static_cast<const char*>(::dlsym(handle, "strata_kernel_key"));
  auto entry = reinterpret_cast<KernelEntry>(::dlsym(handle, "strata_kernel"));
  std::string why;
  if (abi == nullptr || stored == nullptr || entry == nullptr) {
    why = "not a strata kernel";
  } else if (abi() != kKernelAbi) {
    why = "kernel ABI " + std::to_string(abi()) + ", expected " + std::to_string(kKernelAbi);
  } else if (key != stored) {
    why = std::string("compiled under key ") + stored;
  } else {
    return {entry, ""};
  }
  // Closed, so that loading the recompiled file under the same name maps the new one, not this one.
  ::dlclose(handle);
  return {nullptr, why};
}

// Compiles into the cache (Note [The kernel cache]); throws KernelCompileError when the compiler refuses.
void compile_into_cache(const KernelBuild& build, const std::string& text, const Toolchain& tc, const CacheDir& cache,
                        const std::string& so_path) {
  const std::string work = make_temp_dir(temp_root(), "strata-jit-");
  if (work.empty()) throw Error("compiler: could not create a work directory in " + temp_root() + ": " + std::strerror(errno));
  const std::string source = work + "/" + build.name + "_" + std::string(dtype_name(build.dtype)) + ".cpp";
  const std::string log = work + "/compiler.log";
  write_file(source, text);
  const std::string tmp = temp_name_in(cache.path, build.key, ".so");
  const std::string what = "the generated kernel " + build.name + " (" + std::string(dtype_name(build.dtype)) + ")";
  int status = 0;
  {
    const PendingTemporary pending(tmp);  // removed if a signal ends the compile
    try {
      status = run_compiler(tc, source, tmp, log);
    } catch (const Error& e) {
      if (e.code() == ExitCode::kInterrupted) {
        std::error_code ec;
        fs::remove_all(work, ec);
      }
      throw;
    }
  }
  if (status == kTimedOut) {
    std::error_code ec;
    fs::remove(tmp, ec);
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", tc.timeout_s);
    throw KernelCompileError("compiler: " + what + " did not compile within " + limit + " s: " + tc.path +
                                 " was still running and was killed. The limit is STRATA_COMPILE_TIMEOUT (seconds, "
                                 "default 300, 0 for none) or the compile_timeout option; the source is kept at " + source,
                             source);
  }
  if (status != 0) {
    std::error_code ec;
    fs::remove(tmp, ec);
    std::string out = read_file(log);
    if (out.size() > 4000) out = "...\n" + out.substr(out.size() - 4000);
    throw KernelCompileError("compiler: " + what + " did not compile: " + tc.path + " exited with " + std::to_string(status) +
                                 "; the source is kept at " + source + "; the compiler said:\n" + out,
                             source);
  }
  struct stat st {};
  if (::lstat(tmp.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    std::error_code ec;
    fs::remove(tmp, ec);
    fs::remove_all(work, ec);
    throw CompilerUnavailableError("no working C++ compiler: " + tc.path + " exited with 0 but wrote no shared object for " +
                                   what + " (it was asked for one with -o). The compiled path needs a C++ compiler "
                                   "that builds shared objects (g++ or clang++): set CXX to one. Eager and graph "
                                   "replay do not need it.");
  }
  try {
    seal_object(tmp);
  } catch (const Error&) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  if (::rename(tmp.c_str(), so_path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error("compiler: could not move the compiled kernel into the cache (" + so_path + "): " + why);
  }
  try {
    write_into_cache(cache.path, build.key, ".cpp", text);
  } catch (const Error&) {  // the source copy is for reading only; the kernel is in place
  }
  std::error_code ec;
  fs::remove_all(work, ec);
}

}  // namespace

// Note [Finding the compiler]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CompileOptions::cxx, else $CXX, else the first of c++, g++, clang++ on PATH; a name without a slash is
// looked up on PATH. Its identity in the cache key is its resolved path, size and modification time: an
// upgraded compiler is a different file, and reading those costs a stat, where asking it for its version
// would cost a process start on every compile, cache hits included.
Toolchain resolve_compiler(const std::string& requested, double timeout_s) {
  const bool from_env = requested.empty() && std::getenv("CXX") != nullptr && *std::getenv("CXX") != '\0';
  const std::string name = requested.empty() ? getenv_or("CXX", "") : requested;
  std::string path;
  if (name.empty()) {
    for (const char* candidate : {"c++", "g++", "clang++"}) {
      path = search_path(candidate);
      if (!path.empty()) break;
    }
    if (path.empty()) {
      throw CompilerUnavailableError(
          "no C++ compiler: CXX is not set and none of c++, g++, clang++ is on PATH. The compiled path generates C++ "
          "for its fused kernels and needs one: install a compiler (Debian: apt-get install g++) or set CXX to one. "
          "Eager and graph replay do not need it.");
    }
  } else {
    path = name.find('/') != std::string::npos ? (is_executable_file(name) ? name : "") : search_path(name);
    if (path.empty()) {
      throw CompilerUnavailableError(
          std::string("no C++ compiler: ") + (from_env ? "CXX=" : "the compiler ") + quote_typed(name) +
          " is not an executable file" + (name.find('/') == std::string::npos ? " on PATH" : "") +
          ". The compiled path generates C++ for its fused kernels and needs one: set CXX to a C++ compiler "
          "(one executable, e.g. g++ or /usr/bin/clang++). Eager and graph replay do not need it.");
    }
  }
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  struct stat st {};
  ::stat(path.c_str(), &st);
  Toolchain tc;
  tc.path = path;
  tc.timeout_s = timeout_s > 0 ? timeout_s : compile_timeout_from_env();
  tc.identity = (ec ? path : real.string()) + " size=" + std::to_string(st.st_size) +
                " mtime=" + std::to_string(int64_t(st.st_mtim.tv_sec)) + "." + std::to_string(int64_t(st.st_mtim.tv_nsec));
  return tc;
}

CacheDir resolve_cache_dir(const std::string& requested) {
  const std::string home = getenv_or("HOME", temp_root());
  const std::string want =
      !requested.empty() ? requested : getenv_or("STRATA_CACHE_DIR", home + "/.cache/strata/kernels");
  std::error_code ec;
  fs::create_directories(want, ec);
  std::string why;
  if (ec) {
    why = ec.message();
  } else {
    // Writable means a file can be created there (access() would say yes to root on a read-only mount).
    std::string probe = want + "/.probe-XXXXXX";
    const int fd = ::mkstemp(probe.data());
    if (fd < 0) {
      why = std::strerror(errno);
    } else {
      ::close(fd);
      ::unlink(probe.c_str());
      return {want, ""};
    }
  }
  // One private directory per unwritable cache for the whole process: the CPU kernels and the PTX of one
  // run (each resolving the cache for itself) share it, rather than leave one temporary directory each.
  static std::mutex mutex;
  static std::map<std::string, std::string> private_dirs;  // the cache asked for -> its private stand-in
  std::lock_guard<std::mutex> lock(mutex);
  std::string& priv = private_dirs[want];
  if (priv.empty() || !fs::is_directory(priv, ec)) priv = make_temp_dir(temp_root(), "strata-kernels-");
  if (priv.empty()) {
    throw Error("compiler: the kernel cache " + want + " is not writable (" + why + ") and no private directory could be created in " +
                temp_root() + ": " + std::strerror(errno));
  }
  return {priv, "the kernel cache " + want + " is not writable (" + why + "): kernels were compiled into the private temporary directory " +
                    priv + ", which no other process will reuse"};
}

KernelEntry build_kernel(KernelBuild& build, const Toolchain& tc, const CacheDir& cache) {
  static std::mutex mutex;  // one compile at a time per process; other processes are safe by rename
  std::lock_guard<std::mutex> lock(mutex);
  std::string key_text = "abi=" + std::to_string(kKernelAbi) + "\ndtype=" + std::string(dtype_name(build.dtype)) + "\ncxx=" + tc.identity +
                         "\ncpu=" + cpu_model() + "\nflags=";
  for (const std::string& f : compile_flags()) key_text += f + " ";
  for (const char* l : kLibs) key_text += std::string(l) + " ";
  build.key = hex16(fnv1a(key_text + "\n" + build.source));
  const std::string text = build.source + "\nextern \"C\" const char strata_kernel_key[] = \"" + build.key + "\";\n";
  build.library_path = cache.path + "/" + build.key + ".so";

  // Each phase in a Frontend-layer zone of its own (setup, not a call's work): the Chrome trace of
  // `strata trace PROGRAM --mode compiled` shows them beside the timed calls.
  int64_t t0 = host_clock::now_ns();
  struct stat st {};
  if (::lstat(build.library_path.c_str(), &st) == 0) {
    STRATA_ZONE(zone, Layer::kFrontend, "load (kernel cache hit)");
    Loaded hit = load(build.library_path, build.key);
    build.load_ns = double(host_clock::now_ns() - t0);
    if (hit.entry != nullptr) {
      build.cache_hit = true;
      return hit.entry;
    }
    zone.rename("load (cache file refused)");
    build.cache_refused = hit.why_not;
    // A file of another ABI or a foreign one under this name: compiled again below, atomically replaced.
  }
  t0 = host_clock::now_ns();
  {
    STRATA_ZONE(zone, Layer::kFrontend, "compile (system C++ compiler)");
    compile_into_cache(build, text, tc, cache, build.library_path);
  }
  const int64_t t1 = host_clock::now_ns();
  Loaded fresh;
  {
    STRATA_ZONE(zone, Layer::kFrontend, "load (dlopen)");
    fresh = load(build.library_path, build.key);
  }
  build.compile_ns = double(t1 - t0);
  build.load_ns = double(host_clock::now_ns() - t1);
  if (fresh.entry == nullptr) throw Error("compiler: the kernel just compiled into " + build.library_path + " does not load: " + fresh.why_not);
  return fresh.entry;
}

}  // namespace strata::compiler::detail

namespace strata::compiler {

KernelBuild jit_compile(const std::string& name, DType dtype, const std::string& source, const CompileOptions& options) {
  KernelBuild build;
  build.name = name;
  build.dtype = dtype;
  build.source = source;
  detail::build_kernel(build, detail::resolve_compiler(options.cxx, options.compile_timeout_s),
                       detail::resolve_cache_dir(options.cache_dir));
  return build;
}

}  // namespace strata::compiler
