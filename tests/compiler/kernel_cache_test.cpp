// The kernel cache and the compiler when things go wrong: a cached object cut short, edited, or replaced by
// a FIFO or a link to /dev/zero (refused and compiled over, never mapped: Note [A sealed kernel object]
// in layers/compiler/jit.cpp); a compiler that never ends (killed past STRATA_COMPILE_TIMEOUT: Note
// [Waiting for a child] in lib/child_process.h); a compiler that writes nothing (CXX=/bin/true); a chain
// of 60 fused ops (its kernel's name bounded).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "layers/compiler/compiler.h"
#include "layers/compiler/internal.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "tests/support/error_text.h"
#include "tests/support/scoped_env.h"
#include "tests/support/subprocess.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

using test::ScopedEnv;

// The names in a directory (none when it does not exist).
std::vector<std::string> entries_of(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  return names;
}

struct ProbeResult {
  int status = -1;
  int hits = -1, misses = -1, refused = -1;
};

// compiler_cache_probe compiles relu(add(x, y)) in a process of its own: the process that first mapped a
// cached object never sees that file damaged under it (which would be a SIGBUS of the test itself).
ProbeResult run_probe(const std::string& cache) {
  const std::string cmd = "STRATA_CACHE_DIR='" + cache + "' '" COMPILER_CACHE_PROBE "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  ProbeResult r;
  double error = 1;
  const int fields = std::fscanf(p, "hits %d misses %d error %lf refused %d", &r.hits, &r.misses, &error, &r.refused);
  r.status = ::pclose(p);
  CHECK(fields == 4);
  CHECK(error < reference::tolerance(DType::kF32));
  return r;
}

std::string the_object(const std::string& cache) {
  for (const auto& e : fs::directory_iterator(cache))
    if (e.path().extension() == ".so") return e.path().string();
  return "";
}

TEST_CASE("a damaged cached kernel is refused and compiled over, in a process that never mapped it") {
  const test::TempDir dir;
  const std::string cache = dir.file("kernels");
  const ProbeResult first = run_probe(cache);
  CHECK(first.status == 0);
  CHECK(first.misses == 1);
  const std::string so = the_object(cache);
  REQUIRE_FALSE(so.empty());
  const uintmax_t size = fs::file_size(so);

  using Damage = std::pair<const char*, void (*)(const std::string&, uintmax_t)>;
  const Damage damages[] = {
      {"cut to half", [](const std::string& p, uintmax_t n) { fs::resize_file(p, n / 2); }},
      {"cut by one byte", [](const std::string& p, uintmax_t n) { fs::resize_file(p, n - 1); }},
      {"one byte edited",
       [](const std::string& p, uintmax_t n) {
         std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(std::streamoff(n / 3));
         f.put('\x5a');
       }},
      {"empty", [](const std::string& p, uintmax_t) { fs::resize_file(p, 0); }},
      {"a FIFO", [](const std::string& p, uintmax_t) {
         fs::remove(p);
         REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
       }},
      {"a link to /dev/zero", [](const std::string& p, uintmax_t) {
         fs::remove(p);
         fs::create_symlink("/dev/zero", p);
       }},
  };
  for (const auto& entry : damages) {  // not a structured binding: clang 14 cannot capture one in CAPTURE
    const auto& what = entry.first;
    const auto& damage = entry.second;
    CAPTURE(what);
    damage(so, size);
    const ProbeResult r = run_probe(cache);
    CHECK(r.status == 0);  // not a SIGBUS, not a hang
    CHECK(r.hits == 0);
    CHECK(r.misses == 1);
    CHECK(r.refused == 1);  // said so in the compile's cache note
    CHECK(fs::is_regular_file(fs::symlink_status(so)));
    CHECK(fs::file_size(so) == size);  // restored whole
    const ProbeResult again = run_probe(cache);
    CHECK(again.hits == 1);
    CHECK(again.refused == 0);
  }
  for (const auto& e : fs::directory_iterator(cache)) CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

// The read both caches go through (the kernel objects above, and the PTX cache of --emit ptx, whose
// cached_ptx needs a CUDA build): a cached .ptx that is no regular file is refused at once, unread, with
// the reason, and compiled over; a dangling link is a miss.
TEST_CASE("a cached .ptx that is a FIFO, a link to /dev/zero, a directory or too large: refused at once, unread") {
  const test::TempDir dir;
  struct Entry {
    const char* what;
    void (*make)(const std::string& path);
    const char* refused;  // "" for a miss
  };
  const Entry entries[] = {
      {"a FIFO", [](const std::string& p) { REQUIRE(::mkfifo(p.c_str(), 0600) == 0); }, "is a named pipe (FIFO)"},
      {"a link to /dev/zero", [](const std::string& p) { fs::create_symlink("/dev/zero", p); },
       "is a character device"},
      {"a link to a FIFO",
       [](const std::string& p) {
         REQUIRE(::mkfifo((p + ".fifo").c_str(), 0600) == 0);
         fs::create_symlink(p + ".fifo", p);
       },
       "is a named pipe (FIFO)"},
      {"a directory", [](const std::string& p) { fs::create_directory(p); }, "is a directory"},
      {"over the size bound", [](const std::string& p) {
         std::ofstream(p).close();
         fs::resize_file(p, compiler::detail::kMaxCacheFileBytes + 1);  // sparse: no disk used
       }, "larger than"},
      {"a dangling link", [](const std::string& p) { fs::create_symlink(p + ".gone", p); }, ""},
  };
  int n = 0;
  for (const Entry& e : entries) {
    const std::string what = e.what;
    CAPTURE(what);
    const std::string path = dir.file("k" + std::to_string(n++) + ".ptx");
    e.make(path);
    std::string refused;
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(compiler::detail::read_cache_entry(path, refused).has_value());
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));  // never blocked, never read whole
    CHECK(test::contains(refused, e.refused));
    CHECK(refused.empty() == (*e.refused == '\0'));
  }
}

compiler::Captured relu_add() {
  return compiler::capture(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::add(in[0], in[1], 1.0))}; },
      {frontend::random_tensor({64}, DType::kF32, kCPU, 1), frontend::random_tensor({64}, DType::kF32, kCPU, 2)});
}

// A stand-in compiler: a script that writes its pid and then sleeps (exec: the pid is the sleep's).
std::string sleeping_compiler(const test::TempDir& dir) {
  const std::string path = dir.file("slow-c++");
  std::ofstream(path) << "#!/bin/sh\necho $$ > '" << dir.file("compiler.pid") << "'\nexec sleep 60\n";
  fs::permissions(path, fs::perms::owner_all);
  return path;
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

TEST_CASE("a compiler that never ends is killed past the timeout: a KernelCompileError, nothing left behind") {
  const test::TempDir dir;
  compiler::CompileOptions options;
  options.cache_dir = dir.file("kernels");
  options.cxx = sleeping_compiler(dir);
  options.compile_timeout_s = 0.5;
  const auto t0 = std::chrono::steady_clock::now();
  std::string message;
  try {
    compiler::compile(relu_add(), options);
  } catch (const compiler::KernelCompileError& e) {
    message = e.what();
    CHECK(e.code() == ExitCode::kFailure);
    fs::remove_all(fs::path(e.source_path()).parent_path());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(test::contains(message, "did not compile within 0.5 s"));
  CHECK(seconds < 20);
  pid_t pid = 0;
  std::ifstream(dir.file("compiler.pid")) >> pid;
  REQUIRE(pid > 0);
  CHECK_FALSE(alive(pid));  // killed and reaped
  CHECK(entries_of(options.cache_dir).empty());
}

TEST_CASE("STRATA_COMPILE_TIMEOUT sets the limit, and a value that is not a number of seconds is refused") {
  const test::TempDir dir;
  compiler::CompileOptions options;
  options.cache_dir = dir.file("kernels");
  options.cxx = sleeping_compiler(dir);
  {
    const ScopedEnv timeout("STRATA_COMPILE_TIMEOUT", "0.3");
    CHECK_THROWS_AS(compiler::compile(relu_add(), options), compiler::KernelCompileError);
  }
  for (const char* bad : {"abc", "-1", "1e9", "nan", "5s"}) {
    CAPTURE(bad);
    const ScopedEnv timeout("STRATA_COMPILE_TIMEOUT", bad);
    try {
      compiler::compile(relu_add(), options);
      FAIL("compile should have refused");
    } catch (const UsageError& e) {
      CHECK(test::contains(e.what(), "STRATA_COMPILE_TIMEOUT"));
    }
  }
}

TEST_CASE("a compiler that exits 0 and writes nothing (CXX=/bin/true) is an UnavailableError, not a rename failure") {
  const test::TempDir dir;
  compiler::CompileOptions options;
  options.cache_dir = dir.file("kernels");
  options.cxx = "/bin/true";
  try {
    compiler::compile(relu_add(), options);
    FAIL("compile should have refused");
  } catch (const compiler::CompilerUnavailableError& e) {
    CHECK(e.code() == ExitCode::kUnavailable);
    CHECK(test::contains(e.what(), "wrote no shared object"));
  }
  CHECK(entries_of(options.cache_dir).empty());
}

TEST_CASE("a chain of 60 fused ops compiles: its kernel's name is bounded, and it computes what eager does") {
  const test::TempDir dir;
  compiler::CompileOptions options;
  options.cache_dir = dir.file("kernels");
  const Tensor x = frontend::random_tensor({5, 7}, DType::kF64, kCPU, 3);
  auto chain = [](const std::vector<Tensor>& in) {
    Tensor t = in[0];
    for (int i = 0; i < 30; ++i) t = ops::relu(ops::mul(t, 1.5));
    return std::vector<Tensor>{t};
  };
  const compiler::Captured captured = compiler::capture(chain, {x});
  const compiler::CompiledGraph g = compiler::compile(captured, options);
  REQUIRE(g.plan().kernels.size() == 1);
  const std::string& name = g.plan().kernels[0].name;
  CHECK(name.size() <= 96);
  CHECK(name.rfind("fused_mul_relu_mul_relu", 0) == 0);
  CHECK(test::contains(name, "_60ops_"));
  const Tensor out = g.run({x})[0];
  CHECK(reference::relative_error(out, reference::to_double(captured.eager_outputs[0])) == 0);
}

}  // namespace
}  // namespace strata
