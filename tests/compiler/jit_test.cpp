// layers/compiler's code generation and JIT with the real system compiler: compiled results against eager
// and the float64 reference, the kernel cache (in this process and in a second one), and the failures
// (no compiler, a source that does not compile, a cache directory that cannot be written).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "layers/compiler/compiler.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/timeline.h"
#include "lib/zone.h"
#include "tests/kernels/fresh_seed.h"
#include "tests/support/error_text.h"
#include "tests/support/scoped_env.h"
#include "tests/support/subprocess.h"

namespace strata {
namespace {

Tensor rand(const Shape& s, DType dtype, uint64_t seed) { return frontend::random_tensor(s, dtype, kCPU, seed); }

compiler::CompileOptions options_in(const test::TempDir& dir) {
  compiler::CompileOptions o;
  o.cache_dir = dir.path() + "/kernels";
  return o;
}

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

using test::ScopedEnv;

// linear -> relu, and matmul -> add -> gelu: each one GEMM kernel with an epilogue, and (x + y) -> gelu ->
// relu as one loop, at random sizes; compiled, eager and float64 agree.
void check_programs(DType dtype, uint64_t seed, const compiler::CompileOptions& options, int64_t row_block) {
  std::mt19937_64 rng(seed);
  auto size = [&] { return int64_t(1 + rng() % 48); };
  const int64_t m = size(), k = size(), n = size();
  CAPTURE(dtype_name(dtype));
  CAPTURE(m);
  CAPTURE(k);
  CAPTURE(n);
  const Tensor x = rand({m, k}, dtype, seed + 1), w = rand({n, k}, dtype, seed + 2), bias = rand({n}, dtype, seed + 3);
  const Tensor b = rand({k, n}, dtype, seed + 4), c = rand({m, n}, dtype, seed + 5);
  auto fn = [&](const std::vector<Tensor>& in) {
    const Tensor y = ops::relu(ops::linear(in[0], w, bias));
    const Tensor z = ops::gelu(ops::add(ops::matmul(in[0], b), in[1], -0.5));
    return std::vector<Tensor>{y, z, ops::relu(ops::gelu(ops::add(y, z, 1.0)))};
  };
  const compiler::Captured captured = compiler::capture(fn, {x, c});
  compiler::CompileOptions o = options;
  o.gemm_row_block = row_block;
  const compiler::CompiledGraph g = compiler::compile(captured, o);
  REQUIRE(g.plan().kernels.size() == 3);
  CHECK(g.plan().kernels[0].name == "fused_linear_relu");
  CHECK(g.plan().kernels[1].name == "fused_matmul_add_gelu");
  CHECK(g.plan().kernels[2].name == "fused_add_gelu_relu");
  const std::vector<Tensor> out = g.run({x, c});
  REQUIRE(out.size() == 3);

  std::vector<double> y = reference::linear(x, w, bias), z = reference::matmul(x, b), last(y.size());
  const std::vector<double> cd = reference::to_double(c);
  for (double& v : y) v = std::max(v, 0.0);
  for (size_t i = 0; i < z.size(); ++i) z[i] = gelu(z[i] - 0.5 * cd[i]);
  for (size_t i = 0; i < y.size(); ++i) last[i] = std::max(gelu(y[i] + z[i]), 0.0);
  const std::vector<std::vector<double>> refs = {y, z, last};
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(reference::relative_error(out[i], refs[i]) < reference::tolerance(dtype));
    CHECK(reference::relative_error(captured.eager_outputs[i], refs[i]) < reference::tolerance(dtype));
    // Compiled against eager: both rounded from the same math, each within the dtype's tolerance of it.
    CHECK(reference::relative_error(out[i], reference::to_double(captured.eager_outputs[i])) <
          2 * reference::tolerance(dtype));
  }
}

}  // namespace

TEST_CASE("compiled results match eager and the float64 reference, f32 and f64, at random sizes") {
  const test::TempDir dir;
  const compiler::CompileOptions options = options_in(dir);
  const uint64_t seed = strata::testing::run_seed();  // STRATA_TEST_SEED replays it
  CAPTURE(seed);
  check_programs(DType::kF32, seed, options, 0);
  check_programs(DType::kF64, seed + 100, options, 0);
  // The same kernels with the GEMM in blocks of 7 rows (the epilogue per block): same source, cache hits.
  check_programs(DType::kF32, seed + 200, options, 7);
}

TEST_CASE("the tanh GELU, written with mul, add, tanh and pow as eagerly, fuses into one kernel") {
  // 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))) as a user writes it with Python numbers: every op of it
  // has a lowering, each intermediate has one user, so the whole chain is one generated loop that reads x
  // once (x itself has three users: it is an input, read by the kernel, not an intermediate).
  const test::TempDir dir;
  const uint64_t seed = strata::testing::run_seed();  // STRATA_TEST_SEED replays it
  CAPTURE(seed);
  const double k = std::sqrt(2.0 / M_PI);
  auto fn = [k](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    const Tensor inner = ops::mul(ops::add(x, ops::mul(ops::pow(x, 3.0), 0.044715), 1.0), k);
    return std::vector<Tensor>{ops::mul(ops::mul(x, 0.5), ops::add(ops::tanh(inner), 1.0, 1.0))};
  };
  for (DType dtype : {DType::kF32, DType::kF64}) {
    CAPTURE(dtype_name(dtype));
    std::mt19937_64 rng(seed + uint64_t(dtype));
    const int64_t rows = int64_t(1 + rng() % 40), cols = int64_t(1 + rng() % 70);
    CAPTURE(rows);
    CAPTURE(cols);
    // Scaled to [-4, 4): both tails of tanh, not only its linear middle.
    const Tensor x = ops::mul(rand({rows, cols}, dtype, seed + 1), 4.0);
    const compiler::Captured captured = compiler::capture(fn, {x});
    CHECK(captured.graph.calls() == 8);  // pow, mul.Scalar, add, mul.Scalar, tanh, add.Scalar, mul.Scalar, mul
    const compiler::CompiledGraph g = compiler::compile(captured, options_in(dir));
    REQUIRE(g.plan().kernels.size() == 1);
    CHECK(g.plan().kernels[0].kind == compiler::KernelKind::kPointwise);
    CHECK(g.plan().kernels[0].name == "fused_pow_mul_add_mul_tanh_add_mul_mul");  // overloads by base name
    CHECK(g.plan().kernels[0].inputs.size() == 1);
    // tanh as the eager loops compute it (Note [Vector math]): for f32 math_f32.h's text, for f64 SLEEF's at
    // its width, or libm's where the loops are the portable ones.
    const int bytes = kernels::cpu::cpu_vector_bytes();
    const std::string lanes = std::to_string(bytes / (dtype == DType::kF32 ? 4 : 8));
    const std::string want_tanh = bytes == 0 ? (dtype == DType::kF32 ? "#define m_tanh tanhf" : "#define m_tanh tanh")
                                  : dtype == DType::kF32 ? "return strata_tanh_f32(x);"
                                                         : "Sleef_tanhd" + lanes + "_u35" + (bytes == 64 ? "avx512f" : "avx2");
    CHECK(test::contains(g.emit_cpp(), want_tanh));
    const std::vector<Tensor> out = g.run({x});
    REQUIRE(out.size() == 1);
    std::vector<double> ref = reference::to_double(x);
    for (double& v : ref) v = 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
    CHECK(reference::relative_error(out[0], ref) < reference::tolerance(dtype));
    CHECK(reference::relative_error(captured.eager_outputs[0], ref) < reference::tolerance(dtype));
    CHECK(reference::relative_error(out[0], reference::to_double(captured.eager_outputs[0])) <
          2 * reference::tolerance(dtype));
    // A run on fresh values of the same shape: the kernel computes, it does not replay the capture.
    const Tensor x2 = ops::mul(rand({rows, cols}, dtype, seed + 2), 4.0);
    std::vector<double> ref2 = reference::to_double(x2);
    for (double& v : ref2) v = 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
    CHECK(reference::relative_error(g.run({x2})[0], ref2) < reference::tolerance(dtype));
  }
}

TEST_CASE("sub, sub.Scalar and tanh_backward fuse too, and agree with eager") {
  const test::TempDir dir;
  const uint64_t seed = strata::testing::run_seed();  // STRATA_TEST_SEED replays it
  CAPTURE(seed);
  const Tensor a = rand({9, 13}, DType::kF64, seed), b = rand({9, 13}, DType::kF64, seed + 1);
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor t = ops::tanh(ops::sub(in[0], in[1], 0.75));
    return std::vector<Tensor>{ops::tanh_backward(ops::sub(t, 0.25, 2.0), in[1])};
  };
  const compiler::Captured captured = compiler::capture(fn, {a, b});
  const compiler::CompiledGraph g = compiler::compile(captured, options_in(dir));
  REQUIRE(g.plan().kernels.size() == 1);
  CHECK(g.plan().kernels[0].name == "fused_sub_tanh_sub_tanh_backward");
  std::vector<double> ref = reference::to_double(a);
  const std::vector<double> bd = reference::to_double(b);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = (std::tanh(ref[i] - 0.75 * bd[i]) - 0.5) * (1 - bd[i] * bd[i]);
  CHECK(reference::relative_error(g.run({a, b})[0], ref) < reference::tolerance(DType::kF64));
  CHECK(reference::relative_error(captured.eager_outputs[0], ref) < reference::tolerance(DType::kF64));
}

namespace {

// What a run told its observer, in order: "b<kernel>" and "e".
struct RecordingObserver : compiler::StepObserver {
  std::vector<std::string> events;
  void begin(size_t kernel) override { events.push_back("b" + std::to_string(kernel)); }
  void end() override { events.push_back("e"); }
};

}  // namespace

TEST_CASE("a run tells its observer each fused kernel's index around its call, extern kernels included") {
  const test::TempDir dir;
  const Tensor x = rand({32}, DType::kF32, 1), y = rand({32}, DType::kF32, 2);
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor a = ops::relu(ops::add(in[0], in[1], 1.0));
    const Tensor b = ops::to_copy(a, DType::kF32);  // no lowering: an extern kernel between two generated
    return std::vector<Tensor>{ops::add(ops::gelu(b), in[0], 1.0)};
  };
  const compiler::CompiledGraph g = compiler::compile(compiler::capture(fn, {x, y}), options_in(dir));
  REQUIRE(g.plan().kernels.size() == 3);
  RecordingObserver observer;
  g.run({x, y}, &observer);
  CHECK(observer.events == std::vector<std::string>{"b0", "e", "b1", "e", "b2", "e"});
  // A guard that refuses runs no step: the observer hears nothing, so no tag is left pushed.
  RecordingObserver refused;
  CHECK_THROWS_AS(g.run({x}, &refused), UsageError);
  CHECK(refused.events.empty());
}

TEST_CASE("a compiled run's span names outlive the compiled graph (Note [Zone names made at run time])") {
  // strata.profile() reads its spans whenever p.table() is called: a compiled function dropped inside the
  // with-block left the library spans' names pointing into the freed graph (ASan: heap-use-after-free).
  const test::TempDir dir;
  const Tensor x = rand({32}, DType::kF32, 1), y = rand({32}, DType::kF32, 2);
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::add(in[0], in[1], 1.0))}; };
  Timeline timeline(1 << 12);
  {
    const compiler::CompiledGraph g = compiler::compile(compiler::capture(fn, {x, y}), options_in(dir));
    REQUIRE(g.plan().kernels.size() == 1);
    const tracing::ActiveScope scope(&timeline);
    g.run({x, y});
  }  // the graph, its steps and their strings are gone here
  std::vector<std::string> library;
  for (const Span& span : timeline.spans())
    if (span.layer == Layer::kLibrary) library.emplace_back(span.name);
  CHECK(library == std::vector<std::string>{"fused_add_relu (generated loop, 1 thread)"});  // 32 elements
}

TEST_CASE("intern_zone_name: one stable copy per text") {
  const char* first = intern_zone_name(std::string("k0 (generated loop)"));
  CHECK(std::string(first) == "k0 (generated loop)");
  CHECK(intern_zone_name("k0 (generated loop)") == first);  // the same text, the same pointer
  CHECK(intern_zone_name("k1 (generated loop)") != first);
  for (int i = 0; i < 1000; ++i) intern_zone_name("name " + std::to_string(i));  // the pool grows
  CHECK(intern_zone_name("k0 (generated loop)") == first);  // and nothing moved
  CHECK(std::string(first) == "k0 (generated loop)");
}

TEST_CASE("the cold phases are timed, the cache hits on a second compile, and guards refuse other shapes") {
  const test::TempDir dir;
  const Tensor x = rand({100}, DType::kF32, 1), y = rand({100}, DType::kF32, 2);
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::add(in[0], in[1], 1.0))}; };
  const compiler::Captured captured = compiler::capture(fn, {x, y});
  const compiler::CompiledGraph cold = compiler::compile(captured, options_in(dir));
  CHECK(cold.timings().cache_misses == 1);
  CHECK(cold.timings().cache_hits == 0);
  CHECK(cold.timings().capture_ns > 0);
  CHECK(cold.timings().codegen_ns > 0);
  CHECK(cold.timings().compile_ns > 0);
  CHECK(cold.timings().load_ns > 0);
  CHECK(cold.timings().cache_note.empty());
  REQUIRE(cold.builds().size() == 1);
  CHECK(test::contains(cold.emit_cpp(), "extern \"C\" void strata_kernel("));
  const compiler::CompiledGraph warm = compiler::compile(captured, options_in(dir));
  CHECK(warm.timings().cache_hits == 1);
  CHECK(warm.timings().compile_ns == 0);
  // Three arrays of 100 floats: eager writes the sum and reads it back, the fused loop does not.
  CHECK(warm.bytes_moved() == 3 * 400.0);
  CHECK(compiler::eager_bytes_moved(captured.graph) == 5 * 400.0);

  const std::string message =
      test::message_of([&] { warm.run({rand({99}, DType::kF32, 1), rand({99}, DType::kF32, 2)}); });
  CHECK(test::contains(message, "guard failed on input 0"));
  CHECK(test::contains(message, "f32[99]"));
  CHECK(test::contains(message, "f32[100]"));

  // Captured with one tensor as both inputs: the graph reads it once, so a run must alias them too.
  const compiler::Captured twice = compiler::capture(fn, {x, x});
  CHECK(twice.graph.same_as == std::vector<size_t>{0, 0});
  CHECK(test::contains(twice.graph.str(), "add(%0, %0, alpha=1)"));
  const compiler::CompiledGraph aliased = compiler::compile(twice, options_in(dir));
  CHECK(reference::relative_error(aliased.run({y, y})[0], reference::relu(ops::add(y, y, 1.0))) < 1e-6);
  CHECK(test::contains(test::message_of([&] { aliased.run({x, y}); }), "same tensor as input 0"));
}

TEST_CASE("a second process reuses the cached kernel") {
  const test::TempDir dir;
  const std::string cache = dir.path() + "/kernels";
  auto run_probe = [&] {
    const std::string cmd = "STRATA_CACHE_DIR='" + cache + "' '" COMPILER_CACHE_PROBE "'";
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    int hits = -1, misses = -1;
    double error = 1;
    const int fields = std::fscanf(p, "hits %d misses %d error %lf", &hits, &misses, &error);
    const int status = ::pclose(p);
    CHECK(fields == 3);
    CHECK(status == 0);
    CHECK(error < reference::tolerance(DType::kF32));
    return std::pair{hits, misses};
  };
  CHECK(run_probe() == std::pair{0, 1});
  CHECK(run_probe() == std::pair{1, 0});
}

TEST_CASE("generated code that does not compile: the compiler's message and the source's path, and a clean cache") {
  const test::TempDir dir;
  const compiler::CompileOptions options = options_in(dir);
  std::string source_path;
  std::string message;
  try {
    compiler::jit_compile("broken_kernel", DType::kF32, "this is not C++ at all;\n", options);
  } catch (const compiler::KernelCompileError& e) {
    message = e.what();
    source_path = e.source_path();
  }
  REQUIRE_FALSE(message.empty());
  CHECK(test::contains(message, "did not compile"));
  CHECK(test::contains(message, source_path));
  CHECK(test::contains(message, "error"));  // the compiler's own words
  std::ifstream kept(source_path);
  CHECK(kept.good());
  std::string first;
  std::getline(kept, first);
  CHECK(first == "this is not C++ at all;");
  // Nothing of it in the cache: no object, no temporary, no source copy.
  const std::vector<std::string> entries = [&] {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(options.cache_dir)) names.push_back(e.path().filename());
    return names;
  }();
  CHECK(entries.empty());
  std::filesystem::remove_all(std::filesystem::path(source_path).parent_path());
}

TEST_CASE("no C++ compiler is a clear UnavailableError (the CLI's exit 4)") {
  const test::TempDir dir;
  const ScopedEnv cxx("CXX", "/nonexistent/c++");
  const compiler::Captured captured = compiler::capture(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::add(in[0], in[1], 1.0))}; },
      {rand({4}, DType::kF32, 1), rand({4}, DType::kF32, 2)});
  try {
    compiler::compile(captured, options_in(dir));
    FAIL("compile should have refused");
  } catch (const compiler::CompilerUnavailableError& e) {
    CHECK(e.code() == ExitCode::kUnavailable);
    CHECK(test::contains(e.what(), "CXX='/nonexistent/c++'"));
    CHECK(test::contains(e.what(), "not an executable file"));
  }
}

TEST_CASE("an unwritable cache directory: the kernel is compiled into a private one, and the timings say so") {
  const test::TempDir dir;
  std::ofstream(dir.path() + "/a-file") << "not a directory";
  compiler::CompileOptions options;
  options.cache_dir = dir.path() + "/a-file/kernels";  // cannot be created, whoever runs the test
  const compiler::Captured captured = compiler::capture(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(in[0])}; }, {rand({10}, DType::kF64, 1)});
  const compiler::CompiledGraph g = compiler::compile(captured, options);
  CHECK(test::contains(g.timings().cache_note, "is not writable"));
  CHECK(test::contains(g.timings().cache_note, g.timings().cache_dir));
  CHECK(g.timings().cache_dir != options.cache_dir);
  const std::vector<Tensor> out = g.run({rand({10}, DType::kF64, 1)});
  CHECK(reference::relative_error(out[0], reference::relu(rand({10}, DType::kF64, 1))) < reference::tolerance(DType::kF64));
  std::filesystem::remove_all(g.timings().cache_dir);
}

}  // namespace strata

namespace strata {

TEST_CASE("linear without a bias: captured as None, fused with its epilogue, and right") {
  const test::TempDir dir;
  const Tensor x = rand({9, 13}, DType::kF32, 1), w = rand({6, 13}, DType::kF32, 2);
  const compiler::Captured captured = compiler::capture(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::linear(in[0], w, Tensor()))}; }, {x});
  CHECK(test::contains(captured.graph.str(), "linear(%0, %1, None)"));
  const compiler::CompiledGraph g = compiler::compile(captured, options_in(dir));
  REQUIRE(g.plan().kernels.size() == 1);
  CHECK(g.plan().kernels[0].name == "fused_linear_relu");
  CHECK(g.plan().kernels[0].inputs == std::vector<size_t>{0, 1});
  std::vector<double> ref = reference::linear(x, w, Tensor());
  for (double& v : ref) v = std::max(v, 0.0);
  CHECK(reference::relative_error(g.run({x})[0], ref) < reference::tolerance(DType::kF32));
}

}  // namespace strata
