// The compiled path against eager and the raw library, side by side in one run (docs/performance.md
// records the results and the command). Variants run interleaved, round by round, so that machine noise
// hits them alike; each figure is the median over rounds of the mean call time.
//
//   bench/compiled_bench [--rounds R] [--n N] [--elements E] [--cache-dir DIR]
//
// relu_matmul N (f32): raw cblas_sgemm into a preallocated C; compiled with the GEMM called once and the
// relu in one pass after it; compiled with the GEMM in blocks of rows and the relu on each block while it
// is in cache; eager relu(matmul(a, b)) through binding and dispatch.
// Two pointwise chains of existing ops over E elements (f32), relu(add(relu(add(x, y)), z)) and the same
// with gelu last: eager (four calls, three intermediates written and read back) against the one fused loop.
// Each compile's cold phases are printed, and the number of calls that repays the compile.
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "layers/compiler/compiler.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/host_clock.h"

using namespace strata;

namespace {

struct Variant {
  std::string name;
  std::function<void()> call;
  std::vector<double> round_ns;  // mean ns per call in each round
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void run(std::vector<Variant>& variants, int rounds, int calls_per_round) {
  for (auto& v : variants) v.call();  // warm caches and lazy state
  for (int r = 0; r < rounds; ++r) {
    for (auto& v : variants) {
      const int64_t t0 = host_clock::now_ns();
      for (int i = 0; i < calls_per_round; ++i) v.call();
      v.round_ns.push_back(double(host_clock::now_ns() - t0) / calls_per_round);
    }
  }
}

void keep(const std::vector<Tensor>& out) { asm volatile("" : : "r"(out.data()) : "memory"); }

void print_cold(const compiler::CompiledGraph& g) {
  const compiler::CompileTimings& t = g.timings();
  std::printf("  cold: capture %.2f ms, fusion %.3f ms, codegen %.3f ms, compile %.1f ms (%s), load %.3f ms; total %.1f ms\n",
              t.capture_ns / 1e6, t.fusion_ns / 1e6, t.codegen_ns / 1e6, t.compile_ns / 1e6,
              t.cache_misses == 0 ? "cache hit" : "cache miss: the compiler ran", t.load_ns / 1e6, t.total_ns() / 1e6);
  if (!t.cache_note.empty()) std::printf("  note: %s\n", t.cache_note.c_str());
}

// The calls after which compiling has paid for itself: one-time cost / saving per call.
void print_break_even(const compiler::CompiledGraph& g, double eager_ns, double compiled_ns) {
  const double cold = g.timings().total_ns();
  if (compiled_ns >= eager_ns) {
    std::printf("  break-even: never at these figures (compiled is not faster per call)\n");
  } else {
    std::printf("  break-even: %.0f calls repay the cold compile (%.1f ms) at %.3f ms saved per call; with a cache hit, %.0f\n",
                cold / (eager_ns - compiled_ns), cold / 1e6, (eager_ns - compiled_ns) / 1e6,
                (cold - g.timings().compile_ns) / (eager_ns - compiled_ns));
  }
}

void relu_matmul(int64_t n, int rounds, const compiler::CompileOptions& options) {
  const Tensor a = frontend::random_tensor({n, n}, DType::kF32, kCPU, 1);
  const Tensor b = frontend::random_tensor({n, n}, DType::kF32, kCPU, 2);
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::matmul(in[0], in[1]))}; };
  const compiler::Captured captured = compiler::capture(fn, {a, b});
  const compiler::CompiledGraph once = compiler::compile(captured, options);
  std::printf("\nrelu_matmul %lld (f32), %d rounds x 1 call, interleaved\n%s%s", static_cast<long long>(n), rounds,
              captured.graph.str().c_str(), once.plan().str(captured.graph).c_str());
  print_cold(once);
  std::vector<Variant> v;
  Tensor c = Tensor::empty({n, n}, DType::kF32, kCPU);
  v.push_back({"raw cblas_sgemm (preallocated C, no relu)", [&] {
                 cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.0f, a.data<float>(), int(n),
                             b.data<float>(), int(n), 0.0f, c.data<float>(), int(n));
               }, {}});
  v.push_back({"compiled: one gemm, then the fused relu pass", [&] { keep(once.run({a, b})); }, {}});
  std::vector<compiler::CompiledGraph> blocked;
  for (int64_t rows : {64, 256}) {
    compiler::CompileOptions o = options;
    o.gemm_row_block = rows;
    blocked.push_back(compiler::compile(captured, o));  // same kernel source: a cache hit
  }
  v.push_back({"compiled: gemm per 64 rows, relu per block", [&] { keep(blocked[0].run({a, b})); }, {}});
  v.push_back({"compiled: gemm per 256 rows, relu per block", [&] { keep(blocked[1].run({a, b})); }, {}});
  v.push_back({"eager relu(matmul(a, b))", [&] { keep(fn({a, b})); }, {}});
  run(v, rounds, 1);
  const double raw = median(v[0].round_ns), flops = 2.0 * double(n) * double(n) * double(n);
  for (const Variant& x : v) {
    const double ns = median(x.round_ns);
    std::printf("  %-46s %9.3f ms/call  %6.1f GFLOP/s  %.3fx raw\n", x.name.c_str(), ns / 1e6, flops / ns, ns / raw);
  }
  std::vector<double> ref = reference::matmul(a, b);
  for (double& x : ref) x = std::max(x, 0.0);
  std::printf("  check: relative error vs float64: compiled %.2e, eager %.2e\n",
              reference::relative_error(once.run({a, b})[0], ref), reference::relative_error(fn({a, b})[0], ref));
  print_break_even(once, median(v[4].round_ns), median(v[1].round_ns));
}

void pointwise_chain(const char* label, const compiler::Function& fn, int64_t elements, int rounds,
                     const compiler::CompileOptions& options) {
  const Tensor x = frontend::random_tensor({elements}, DType::kF32, kCPU, 1);
  const Tensor y = frontend::random_tensor({elements}, DType::kF32, kCPU, 2);
  const Tensor z = frontend::random_tensor({elements}, DType::kF32, kCPU, 3);
  const compiler::Captured captured = compiler::capture(fn, {x, y, z});
  const compiler::CompiledGraph g = compiler::compile(captured, options);
  const int calls = std::max<int>(1, int(4'000'000 / std::max<int64_t>(elements, 1)));
  std::printf("\n%s over %lld elements (f32), %d rounds x %d calls, interleaved\n%s%s", label,
              static_cast<long long>(elements), rounds, calls, captured.graph.str().c_str(), g.plan().str(captured.graph).c_str());
  print_cold(g);
  std::vector<Variant> v;
  v.push_back({"eager: 4 calls, 3 intermediates", [&] { keep(fn({x, y, z})); }, {}});
  v.push_back({"compiled: 1 fused loop", [&] { keep(g.run({x, y, z})); }, {}});
  run(v, rounds, calls);
  const double eager = median(v[0].round_ns), compiled = median(v[1].round_ns);
  std::printf("  %-46s %9.3f ms/call  %6.2f GB/s moved\n", v[0].name.c_str(), eager / 1e6,
              compiler::eager_bytes_moved(captured.graph) / eager);
  std::printf("  %-46s %9.3f ms/call  %6.2f GB/s moved   %.2fx faster than eager\n", v[1].name.c_str(), compiled / 1e6,
              g.bytes_moved() / compiled, eager / compiled);
  std::printf("  bytes through memory per call: eager %.1f MiB, compiled %.1f MiB\n",
              compiler::eager_bytes_moved(captured.graph) / 1048576.0, g.bytes_moved() / 1048576.0);
  const Tensor out = g.run({x, y, z})[0];
  std::printf("  check: relative error compiled vs eager %.2e\n",
              reference::relative_error(out, reference::to_double(captured.eager_outputs[0])));
  print_break_even(g, eager, compiled);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15;
  int64_t n = 1024, elements = 1 << 20;
  compiler::CompileOptions options;
  for (int i = 1; i < argc; ++i) {
    const bool more = i + 1 < argc;
    if (std::strcmp(argv[i], "--rounds") == 0 && more) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--n") == 0 && more) {
      n = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--elements") == 0 && more) {
      elements = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--cache-dir") == 0 && more) {
      options.cache_dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: compiled_bench [--rounds R] [--n N] [--elements E] [--cache-dir DIR]\n");
      return 2;
    }
  }
  try {
    host_clock::calibrate();
    const host_clock::Info clock = host_clock::info();
    std::printf("strata compiled-path benchmark   clock: %.*s   OpenBLAS threads: see OPENBLAS_NUM_THREADS\n",
                int(clock.source.size()), clock.source.data());
    relu_matmul(n, rounds, options);
    // Memory-bound: four cheap ops, so eager's cost is its passes over memory.
    pointwise_chain("pointwise chain relu(add(relu(add(x, y)), z, alpha=-0.5))",
                    [](const std::vector<Tensor>& in) {
                      return std::vector<Tensor>{ops::relu(ops::add(ops::relu(ops::add(in[0], in[1], 1.0)), in[2], -0.5))};
                    },
                    elements, rounds, options);
    // The same with gelu last: erf per element (vectorised through libmvec in the fused loop only).
    pointwise_chain("pointwise chain gelu(add(relu(add(x, y)), z, alpha=-0.5))",
                    [](const std::vector<Tensor>& in) {
                      return std::vector<Tensor>{ops::gelu(ops::add(ops::relu(ops::add(in[0], in[1], 1.0)), in[2], -0.5))};
                    },
                    elements, rounds, options);
  } catch (const Error& e) {
    std::fprintf(stderr, "compiled_bench: %s\n", e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
