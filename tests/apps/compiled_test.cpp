// The compiled path end to end (docs/compiled.md): `strata trace PROGRAM --mode eager|graph|compiled`,
// --emit cpp, `strata compare PROGRAM`'s three columns, no compiler (exit 4), and what is refused (exit 2).
// Each test has a kernel cache of its own (STRATA_CACHE_DIR), so that a cache hit is one this test made.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <set>
#include <string>

#include "tests/apps/e2e.h"

using namespace strata;
using nlohmann::json;

namespace {

test::RunOptions with_cache(const test::TempDir& dir, std::vector<std::string> env = {}) {
  test::RunOptions o;
  o.env = std::move(env);
  o.env.push_back("STRATA_CACHE_DIR=" + dir.file("kernels"));
  return o;
}

json run_json(const test::TempDir& dir, std::vector<std::string> args, const test::RunOptions& options,
              test::RunResult* result = nullptr) {
  const std::string path = dir.file("report.json");
  args.push_back("--json");
  args.push_back(path);
  test::RunResult r = test::run_strata(args, options);
  test::check_no_crash(r);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  if (result != nullptr) *result = r;
  return json::parse(test::read_file(path));
}

double cold_ns(const json& j, const std::string& phase) {
  for (const json& row : j["cold"])
    if (row["phase"] == phase) return row["ns"].get<double>();
  FAIL("no cold row " << phase);
  return -1;
}

}  // namespace

TEST_CASE("trace relu_matmul --mode compiled: one fused kernel, its bytes, cold phases, then a cache hit") {
  test::TempDir dir;
  const auto options = with_cache(dir);
  test::RunResult r;
  const json j =
      run_json(dir, test::cpu({"trace", "relu_matmul", "48", "--mode", "compiled", "--check"}), options, &r);
  CHECK(j["mode"] == "compiled");
  const json& c = j["compiled"];
  CHECK(c["ops_called"] == 2);
  CHECK(c["kernels_run"] == 1);
  CHECK(c["kernels"][0]["name"] == "fused_matmul_relu");
  CHECK(c["kernels"][0]["ops"] == json::array({"matmul", "relu"}));
  // Eager writes matmul's output and reads it back for relu: 5 N^2 floats; fused, 3 N^2 (a, b, out).
  CHECK(c["eager_bytes_moved"].get<double>() == 5.0 * 48 * 48 * 4);
  CHECK(c["bytes_moved"].get<double>() == 3.0 * 48 * 48 * 4);
  CHECK(c["cache"]["misses"] == 1);
  CHECK(c["cache"]["hits"] == 0);
  CHECK(cold_ns(j, "capture") > 0);
  CHECK(cold_ns(j, "compile") > 0);  // the compiler ran
  CHECK(j["check"]["passed"] == true);
  CHECK(j["figures"]["check.compiled_vs_eager_relative_error"]["value"].get<double>() <=
        j["check"]["tolerance"].get<double>());
  CHECK(j["figures"]["compiled.kernels_run"]["value"] == 1);
  // The steady rows: one dispatch per fused kernel, the kernel in the library row.
  bool library_named = false;
  for (const json& row : j["steady"]["rows"])
    if (row["layer"] == "library")
      for (const json& n : row["names"])
        library_named = library_named || test::contains(n.get<std::string>(), "fused_matmul_relu");
  CHECK(library_named);
  // The captured graph and the plan, as the report holds them, are printed whole.
  CHECK(test::contains(c["graph"].get<std::string>(), "\n  %2 = matmul(%0, %1) "));
  CHECK(c["plan"].get<std::string>().rfind("plan: 1 kernel for 2 ops\n  k0  fused_matmul_relu ", 0) == 0);
  CHECK(test::contains(r.out, c["graph"].get<std::string>()));
  CHECK(test::contains(r.out, c["plan"].get<std::string>()));
  CHECK_FALSE(c.contains("source"));  // no source without --emit cpp
  CHECK_FALSE(test::contains(r.out, "strata_kernel("));

  // Same kernel, same cache: loaded, not compiled.
  const json again = run_json(dir, test::cpu({"trace", "relu_matmul", "48", "--mode", "compiled"}), options);
  CHECK(again["compiled"]["cache"]["hits"] == 1);
  CHECK(again["compiled"]["cache"]["misses"] == 0);
  CHECK(again["compiled"]["kernels"][0]["cache_hit"] == true);
  CHECK(cold_ns(again, "compile") == 0);
}

TEST_CASE("trace linear_gelu --mode compiled --emit cpp prints the generated source") {
  test::TempDir dir;
  test::RunResult r;
  const json j = run_json(dir,
                          test::cpu({"trace", "linear_gelu", "8x16x32", "--mode", "compiled", "--emit", "cpp",
                                     "--dtype", "f64", "--check"}),
                          with_cache(dir), &r);
  CHECK(j["compiled"]["kernels_run"] == 1);
  CHECK(j["compiled"]["kernels"][0]["name"] == "fused_linear_gelu");
  CHECK(test::contains(j["compiled"]["source"].get<std::string>(), "strata_kernel"));
  CHECK(test::contains(r.out, j["compiled"]["source"].get<std::string>()));  // printed whole
  CHECK(j["check"]["passed"] == true);
}

TEST_CASE("trace gelu_tanh --mode compiled: eight pointwise calls, one loop that reads x once") {
  test::TempDir dir;
  const json j = run_json(dir, test::cpu({"trace", "gelu_tanh", "1000", "--mode", "compiled", "--check"}),
                          with_cache(dir));
  const json& c = j["compiled"];
  CHECK(c["ops_called"] == 8);
  CHECK(c["kernels_run"] == 1);
  CHECK(c["kernels"][0]["kind"] == "pointwise (generated loop)");
  // Eager: pow, four scalar ops and tanh read one tensor and write one, add and mul read two: 18 passes of
  // 1000 floats. Fused: x read once, y written once.
  CHECK(c["eager_bytes_moved"].get<double>() == 18.0 * 1000 * 4);
  CHECK(c["bytes_moved"].get<double>() == 2.0 * 1000 * 4);
  CHECK(j["check"]["passed"] == true);
  // The one call's library zone, named by the compiled graph's step (Note [A zone's name outlives the
  // zone]), whole in the file; nothing was replaced (Note [JSON text is valid UTF-8]).
  // (", N threads)" follows: the threads the call used, Note [Intra-op threads].)
  CHECK(j["sequence"]["op_log"][0]["backend"].get<std::string>().rfind(
            "fused_pow_mul_add_mul_tanh_add_mul_mul (generated loop, ", 0) == 0);
  CHECK_FALSE(j.contains("invalid_utf8_replaced"));
  const json eager = run_json(dir, test::cpu({"trace", "gelu_tanh", "1000", "--check"}), with_cache(dir));
  CHECK(eager["sequence"]["steps"].size() == 8);
  CHECK(eager["check"]["passed"] == true);
}

TEST_CASE("trace PROGRAM --mode eager and --mode graph") {
  test::TempDir dir;
  for (const char* program : {"relu_matmul", "linear_gelu"}) {
    CAPTURE(std::string(program));
    const std::string spec = std::string(program) == "relu_matmul" ? "24x16x8" : "6x10x12";
    const json eager = run_json(dir, test::cpu({"trace", program, spec, "--check"}), with_cache(dir));
    CHECK(eager["sequence"]["steps"].size() == 2);
    CHECK(eager["check"]["passed"] == true);
    const json graph =
        run_json(dir, test::cpu({"trace", program, spec, "--mode", "graph", "--check"}), with_cache(dir));
    CHECK(graph["mode"] == "graph");
    CHECK(graph["check"]["passed"] == true);
    CHECK(graph["figures"]["graph.kernel_calls"]["value"] == 2);  // the plan holds both ops' kernels
    CHECK(cold_ns(graph, "capture") > 0);
  }
}

TEST_CASE("no C++ compiler: --mode compiled exits 4 saying so, and eager, graph and compare still work") {
  test::TempDir dir;
  const auto options = with_cache(dir, {"CXX=/nonexistent/c++"});
  const auto r = test::run_strata(test::cpu({"trace", "relu_matmul", "16", "--mode", "compiled"}), options);
  test::check_refused(r, 4, "CXX='/nonexistent/c++'");
  for (const char* mode : {"eager", "graph"}) {
    const auto ok = test::run_strata(test::cpu({"trace", "relu_matmul", "16", "--mode", mode}), options);
    test::check_no_crash(ok);
    CHECK(ok.exit_code == 0);
  }
  const json c = run_json(dir, test::cpu({"compare", "relu_matmul", "16"}), options);
  CHECK(c["three_way"]["compiled"].is_null());
  CHECK(test::contains(c["three_way"]["compiled_unavailable"].get<std::string>(), "/nonexistent/c++"));
  CHECK(c["three_way"]["graph"]["ops_called"] == 2);
}

TEST_CASE("compare PROGRAM: eager, graph and compiled side by side") {
  test::TempDir dir;
  test::RunResult r;
  const json j = run_json(dir, test::cpu({"compare", "relu_matmul", "32", "--check"}), with_cache(dir), &r);
  const json& t = j["three_way"];
  CHECK(t["eager"]["ops_called"] == 2);
  CHECK(t["eager"]["kernels_run"] == 2);
  CHECK(t["graph"]["kernels_run"] == 2);
  CHECK(t["compiled"]["ops_called"] == 2);
  CHECK(t["compiled"]["kernels_run"] == 1);
  CHECK(t["eager"]["bytes_moved"].get<double>() == 5.0 * 32 * 32 * 4);
  CHECK(t["compiled"]["bytes_moved"].get<double>() == 3.0 * 32 * 32 * 4);
  CHECK(t["compiled"]["one_time_ns"].get<double>() > 0);
  CHECK(t["compiled"]["wall_ns"].get<double>() > 0);
  // Repaid after a whole number of calls, or never when compiled saved nothing per call here.
  const json& n = t["compiled"]["break_even_calls"];
  CHECK((n.is_null() || n.get<double>() >= 1));
  CHECK(j["figures"]["check.compiled_relative_error"]["value"].get<double>() <=
        j["figures"]["check.tolerance"]["value"].get<double>());
  CHECK(test::contains(r.out, "break-even (calls)"));
}

TEST_CASE("compiled mode's Chrome trace holds the compile phases and the fused kernel, and is valid") {
  test::TempDir dir;
  const std::string trace = dir.file("t.json");
  const auto r = test::run_strata(
      test::cpu({"trace", "relu_matmul", "16", "--mode", "compiled", "--chrome-trace", trace}),
      with_cache(dir));
  test::check_no_crash(r);
  REQUIRE(r.exit_code == 0);
  std::set<std::string> names;
  const json events = json::parse(test::read_file(trace))["traceEvents"];
  for (const json& e : events)
    if (e.value("ph", "") == "X") names.insert(e.value("name", ""));
  for (const char* name : {"capture (one eager forward, recorded)", "fusion", "codegen",
                           "compile (system C++ compiler)", "load (dlopen)"}) {
    CHECK_MESSAGE(names.count(name) == 1, std::string(name));
  }
  // The fused kernel's zone ends with the threads its call used (Note [Intra-op threads]).
  CHECK(std::count_if(names.begin(), names.end(), [](const std::string& n) {
          return n.rfind("fused_matmul_relu (cblas_sgemm + generated epilogue, ", 0) == 0;
        }) == 1);
  const auto check = test::run_strata({"check-trace", trace});
  CHECK(check.exit_code == 0);
}

TEST_CASE("programs: what is refused, with exit 2 and what is allowed") {
  test::TempDir dir;
  const auto options = with_cache(dir);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"trace", "relu_matmul", "16", "--mode", "compield"}, "allowed: eager"},
      {{"trace", "relu_matmul", "16", "--emit", "cpp"}, "needs --mode compiled"},
      {{"trace", "relu_matmul", "16", "--mode", "compiled", "--emit", "asm"}, "allowed: cpp"},
      {{"trace", "relu_matmul", "0", "--mode", "compiled"}, "relu_matmul takes N or MxKxN"},
      {{"trace", "linear_gelu", "8x16", "--mode", "compiled"}, "linear_gelu takes BxINxOUT"},
      {{"trace", "matmul", "16", "--mode", "compiled"},
       "runs a program: mlp, relu_matmul, linear_gelu, gelu_tanh"},
      {{"trace", "relu_matmul", "16", "--mode", "compiled", "--requires-grad"}, "forward only"},
      {{"trace", "mlp", "4x8x4", "--mode", "graph", "--requires-grad", "--backward"}, "--mode eager"},
      {{"trace", "linear_gelu", "4x8x4", "--autocast", "bf16"}, "leave --autocast out"},
      {{"trace", "gelu_tanh", "64", "--requires-grad"}, "gelu_tanh has none"},
      {{"trace", "gelu_tanh", "0x4", "--mode", "compiled"}, "gelu_tanh takes N (or a shape)"},
  };
  for (const auto& refusal : cases) {  // no structured binding: clang 14 cannot CAPTURE one
    const auto& args = refusal.first;
    CAPTURE(args[1] + " " + args[2] + " " + args.back());
    test::check_refused(test::run_strata(args, options), 2, refusal.second);
  }
  // --mode and --emit belong to trace: compare runs all three modes.
  const auto c = test::run_strata({"compare", "relu_matmul", "16", "--mode", "compiled"}, options);
  test::check_no_crash(c);
  CHECK(c.exit_code == 2);
}

TEST_CASE("--mode compiled --device cuda: exit 4 with the reason where there is no GPU, a GPU run where there is") {
  test::TempDir dir;
  const std::string path = dir.file("report.json");
  const auto r = test::run_strata(
      {"trace", "relu_matmul", "16", "--mode", "compiled", "--device", "cuda", "--json", path}, with_cache(dir));
  test::check_no_crash(r);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  if (r.exit_code == 4) {  // no driver, no device, or a build without the CUDA layers: said, not crashed
    CHECK(test::contains(r.err, "CUDA"));
    CHECK(r.out.empty());  // refused before any output
    return;
  }
  // A GPU (the gpu-labelled tests check the results): the run is compiled, on the device.
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(test::read_file(path));
  CHECK(j["mode"] == "compiled");
  CHECK(j["compiled"]["kernels"][0]["gpu"]["path"] == "cublasLtMatmul + CUBLASLT_EPILOGUE_RELU");
}

TEST_CASE("compare PROGRAM --device cuda: exit 4 with the reason where there is no GPU, a compiled column where there is") {
  test::TempDir dir;
  const std::string path = dir.file("compare.json");
  const auto r = test::run_strata({"compare", "gelu_tanh", "4096", "--device", "cuda", "--repeat", "3", "--warmup", "1",
                                   "--json", path},
                                  with_cache(dir));
  test::check_no_crash(r);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  if (r.exit_code == 4) {  // no driver, no device, or a build without the CUDA layers: said, not crashed
    CHECK(test::contains(r.err, "CUDA"));
    CHECK(r.out.empty());  // refused before any output
    CHECK_FALSE(test::exists(path));
    return;
  }
  // A GPU (compiled_gpu_test checks the attribution): the compiled column is there, replayed from a graph.
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(test::read_file(path));
  CHECK(j["three_way"]["compiled"]["label"] == "compiled+graph");
  CHECK(j["three_way"]["compiled_replay"]["kind"] == "CUDA Graph");
}

TEST_CASE("strata ops lists the programs") {
  const auto r = test::run_strata({"ops"});
  REQUIRE(r.exit_code == 0);
  for (const char* p : {"mlp BxIN", "relu_matmul N or MxKxN", "linear_gelu BxINxOUT", "gelu_tanh N"})
    CHECK_MESSAGE(test::contains(r.out, p), std::string(p));
}

namespace {

// A stand-in C++ compiler that writes its pid and sleeps (exec: the pid is the sleep's), so that a test
// can see whether strata left it running.
std::string sleeping_compiler(const test::TempDir& dir) {
  const std::string path = dir.file("slow-c++");
  {
    std::ofstream f(path);
    f << "#!/bin/sh\necho $$ > '" << dir.file("compiler.pid") << ".tmp'\nmv '" << dir.file("compiler.pid")
      << ".tmp' '" << dir.file("compiler.pid") << "'\nexec sleep 60\n";
  }
  ::chmod(path.c_str(), 0700);
  return path;
}

pid_t wait_for_pid_file(const std::string& path) {
  for (int i = 0; i < 3000 && !test::exists(path); ++i) usleep(10000);
  pid_t pid = 0;
  std::ifstream(path) >> pid;
  return pid;
}

bool no_temporaries(const std::string& cache) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(cache, ec))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return false;
  return true;
}

}  // namespace

TEST_CASE("a compiler that hangs: killed past STRATA_COMPILE_TIMEOUT, exit 1, nothing left in the cache") {
  const test::TempDir dir;
  const auto options = with_cache(dir, {"CXX=" + sleeping_compiler(dir), "STRATA_COMPILE_TIMEOUT=0.5"});
  const test::RunResult r = test::run_strata(test::cpu({"trace", "relu_matmul", "16", "--mode", "compiled"}), options);
  test::check_refused(r, 1, "did not compile within 0.5 s");
  const pid_t pid = wait_for_pid_file(dir.file("compiler.pid"));
  REQUIRE(pid > 0);
  CHECK(::kill(pid, 0) != 0);  // not left running
  CHECK(no_temporaries(dir.file("kernels")));
  test::check_refused(test::run_strata(test::cpu({"trace", "relu_matmul", "16", "--mode", "compiled"}),
                                       with_cache(dir, {"STRATA_COMPILE_TIMEOUT=soon"})),
                      2, "STRATA_COMPILE_TIMEOUT='soon'");
}

TEST_CASE("SIGTERM, or SIGINT twice, while the compiler runs: exit 130, the compiler killed, no temporary") {
  for (const std::vector<int> signals : {std::vector<int>{SIGTERM}, std::vector<int>{SIGINT, SIGINT}}) {
    CAPTURE(signals.size());
    const test::TempDir dir;
    test::Subprocess p(test::cpu({"trace", "relu_matmul", "16", "--mode", "compiled"}),
                       with_cache(dir, {"CXX=" + sleeping_compiler(dir)}));
    const pid_t compiler = wait_for_pid_file(dir.file("compiler.pid"));  // strata is waiting for it now
    REQUIRE(compiler > 0);
    for (int sig : signals) ::kill(p.pid(), sig);
    const test::RunResult r = p.wait(60);
    CHECK(r.exit_code == 130);
    CHECK(r.out.empty());
    usleep(100000);  // a SIGKILLed group is gone at once; the reaping of the orphan may take a moment
    CHECK(::kill(compiler, 0) != 0);
    CHECK(no_temporaries(dir.file("kernels")));
  }
}

TEST_CASE("CXX=/bin/true (exits 0, writes nothing): exit 4, saying the compiler produced no object") {
  const test::TempDir dir;
  const test::RunResult r = test::run_strata(test::cpu({"trace", "relu_matmul", "16", "--mode", "compiled"}),
                                             with_cache(dir, {"CXX=/bin/true"}));
  test::check_refused(r, 4, "wrote no shared object");
  CHECK(no_temporaries(dir.file("kernels")));
}
