// strata's own cost per call, measured side by side with raw cblas_sgemm on the same data in one run
// (docs/performance.md records the results and the command). Variants run interleaved, round by round,
// so that machine noise hits them alike; each figure is the median over rounds of the mean call time.
//
//   bench/overhead_bench [--rounds R] [--rows-only]
//   valgrind --tool=callgrind bench/overhead_bench --calls-only N   (instructions per call, by function)
//
// The last section gives the binding and dispatch rows as `strata trace` computes them (self time of the
// spans, median per call) with the caches warm and with them evicted between calls, and in units of the
// zone probe's cost, a figure that moves with strata's code and not with the machine's speed (Note [Rows
// in probe costs]).
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "layers/binding/binding.h"
#include "layers/frontend/frontend.h"
#include "lib/host_clock.h"
#include "lib/zone.h"

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
  for (auto& v : variants)
    for (int i = 0; i < 2; ++i) v.call();  // warm caches and lazy state
  for (int r = 0; r < rounds; ++r) {
    for (auto& v : variants) {
      const int64_t t0 = host_clock::now_ns();
      for (int i = 0; i < calls_per_round; ++i) v.call();
      v.round_ns.push_back(double(host_clock::now_ns() - t0) / calls_per_round);
    }
  }
}

// One eager matmul through the whole stack (binding -> dispatch -> CPU kernel), like the CLI issues it.
struct StrataMatmul {
  frontend::PreparedCall call;
  explicit StrataMatmul(int64_t n) {
    auto spec = frontend::parse_op_spec("matmul", std::to_string(n));
    call = frontend::prepare_call(spec, DType::kF32, kCPU, 1, false, SIZE_MAX);
  }
  void operator()() const {
    binding::IValue out = call.op->call(call.args);
    asm volatile("" : : "r"(&out) : "memory");
  }
};

// Note [Rows in probe costs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A binding or dispatch row is a few hundred nanoseconds, and a slower host moves it as much as a code
// change does: on one GPU machine the zone probe (two clock reads and a span) went from 34 to 44 ns
// between two runs of the same zone code. Divided by the probe cost measured in the same process, the
// rows become a count that a slower machine leaves roughly alone and that a code change moves. The
// evicted variant writes a buffer larger than L2 between calls, outside the spans, as a GPU call's
// driver, library and CUPTI work does to the host's caches between two calls: a row that touches more
// cache lines than it needs shows it there first (docs/performance.md, "Binding and dispatch per call").
struct RowMeans {
  double binding_ns = 0, dispatch_ns = 0;
};

// The mean of the middle 80%: a row is a few clock ticks, and on a machine whose TSC steps in 10 ns a
// median moves only in whole steps; the mean of the calls that were not preempted resolves less.
double trimmed_mean(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t cut = v.size() / 10;
  double sum = 0;
  for (size_t i = cut; i < v.size() - cut; ++i) sum += v[i];
  return sum / double(v.size() - 2 * cut);
}

// Self time per layer of the spans recorded since `first` (each span minus its children), ns.
void add_self_times(const Timeline& timeline, size_t first, double& binding_ns, double& dispatch_ns) {
  const auto& spans = timeline.spans();
  binding_ns = dispatch_ns = 0;
  auto self_of = [&](Layer layer) -> double* {
    if (layer == Layer::kBinding) return &binding_ns;
    if (layer == Layer::kDispatch) return &dispatch_ns;
    return nullptr;
  };
  for (size_t i = first; i < spans.size(); ++i) {
    const double length = double(timeline.end_ns(spans[i]) - timeline.begin_ns(spans[i]));
    if (double* own = self_of(spans[i].layer)) *own += length;
    const int32_t parent = spans[i].parent;
    if (parent >= 0 && static_cast<size_t>(parent) >= first)
      if (double* of_parent = self_of(spans[static_cast<size_t>(parent)].layer)) *of_parent -= length;
  }
}

// The binding and dispatch rows (trimmed means) over `calls` traced calls of `call`, the caches evicted before each when
// `evict` is not empty.
RowMeans traced_rows(const frontend::PreparedCall& call, int calls, std::vector<char>& evict) {
  Timeline timeline(size_t(calls) * 8 + 64);
  std::vector<double> binding, dispatch;
  for (int i = 0; i < calls + 2; ++i) {
    for (size_t b = 0; b < evict.size(); b += 64) evict[b] = static_cast<char>(evict[b] + 1);
    const size_t first = timeline.spans().size();
    {
      tracing::ActiveScope scope(&timeline);
      binding::IValue out = call.op->call(call.args);
      asm volatile("" : : "r"(&out) : "memory");
    }
    double b = 0, d = 0;
    add_self_times(timeline, first, b, d);
    if (i >= 2) binding.push_back(b), dispatch.push_back(d);  // the first two warm lazy state
  }
  return {trimmed_mean(binding), trimmed_mean(dispatch)};
}

void print_rows(const char* op, const char* spec, double probe_ns, int rounds) {
  const frontend::PreparedCall call =
      frontend::prepare_call(frontend::parse_op_spec(op, spec), DType::kF32, kCPU, 1, false, SIZE_MAX);
  std::vector<char> none, evict(size_t{8} << 20);
  std::vector<double> warm_sum, cold_sum, warm_binding, warm_dispatch, cold_binding, cold_dispatch;
  RowMeans warm, cold;
  // Alternating warm and evicted rounds, so that machine noise hits both alike.
  for (int r = 0; r < rounds; ++r) {
    warm = traced_rows(call, 2000, none);
    cold = traced_rows(call, 200, evict);
    warm_sum.push_back(warm.binding_ns + warm.dispatch_ns);
    warm_binding.push_back(warm.binding_ns);
    warm_dispatch.push_back(warm.dispatch_ns);
    cold_binding.push_back(cold.binding_ns);
    cold_dispatch.push_back(cold.dispatch_ns);
    cold_sum.push_back(cold.binding_ns + cold.dispatch_ns);
  }
  const double warm_ns = median(warm_sum), cold_ns = median(cold_sum);
  std::printf("  %-6s %-8s warm %6.1f ns (%5.1f + %5.1f) = %4.1f probes   evicted %6.1f ns (%5.1f + %5.1f) = %4.1f "
              "probes   evicted/warm %.2fx\n",
              op, spec, warm_ns, median(warm_binding), median(warm_dispatch), warm_ns / probe_ns, cold_ns,
              median(cold_binding), median(cold_dispatch), cold_ns / probe_ns, cold_ns / warm_ns);
}

struct RawSgemm {
  int n;
  std::vector<float> a, b, c;
  explicit RawSgemm(const StrataMatmul& s)
      : n(static_cast<int>(s.call.args[0].tensor().size(0))),
        a(s.call.args[0].tensor().data<float>(), s.call.args[0].tensor().data<float>() + size_t(n) * n),
        b(s.call.args[1].tensor().data<float>(), s.call.args[1].tensor().data<float>() + size_t(n) * n),
        c(size_t(n) * n) {}
  void operator()() {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    asm volatile("" : : "r"(c.data()) : "memory");
  }
};

}  // namespace

int main(int argc, char** argv) {
  int rounds = 31;
  bool rows_only = false;  // --rows-only: the last section alone (a quick check of the binding and dispatch rows)
  long calls_only = 0;     // --calls-only N: N untraced n=16 calls and nothing else, for callgrind
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::max(3, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--rows-only") == 0) rows_only = true;
    if (std::strcmp(argv[i], "--calls-only") == 0 && i + 1 < argc) calls_only = std::max(1L, std::atol(argv[i + 1]));
  }
  if (calls_only > 0) {
    StrataMatmul strata_mm(16);
    for (long i = 0; i < calls_only; ++i) strata_mm();
    return 0;
  }
  host_clock::calibrate();
  const auto clock = host_clock::info();
  std::printf("strata overhead benchmark   clock: %s (read %.1f ns; steady_clock::now %.1f ns)   tracing compiled %s\n",
              std::string(clock.source).c_str(), clock.read_cost_ns, clock.steady_read_cost_ns,
              STRATA_TRACING ? "in" : "out");

  // --- n = 16: the per-call overhead regime ---------------------------------------------------
  if (!rows_only) {
    StrataMatmul strata_mm(16);
    RawSgemm raw(strata_mm);
    Timeline timeline(1 << 22);
    std::vector<Variant> v;
    v.push_back({"raw cblas_sgemm (preallocated C)", [&] { raw(); }, {}});
    v.push_back({"strata eager, tracing off", [&] { strata_mm(); }, {}});
    v.push_back({"strata eager, tracing on", [&] {
                   tracing::ActiveScope scope(&timeline);
                   strata_mm();
                   if (timeline.spans().size() > (1u << 21)) timeline = Timeline(1 << 22);
                 }, {}});
    run(v, rounds, 20000);
    const double raw_ns = median(v[0].round_ns), off = median(v[1].round_ns), on = median(v[2].round_ns);
    std::printf("\nmatmul n=16, %d rounds x 20000 calls, median of round means\n", rounds);
    for (auto& x : v) std::printf("  %-36s %8.1f ns/call\n", x.name.c_str(), median(x.round_ns));
    std::printf("  strata overhead above raw (binding + dispatch + output alloc): %+.1f ns   [target <= 150 ns]\n", off - raw_ns);
    std::printf("  added by the spans when tracing is on:                          %+.1f ns   [target <= 200 ns]\n", on - off);
  }

  // --- n = 1024: the compute regime ---------------------------------------------------------------
  if (!rows_only) {
    StrataMatmul strata_mm(1024);
    RawSgemm raw(strata_mm);
    std::vector<Variant> v;
    v.push_back({"raw cblas_sgemm", [&] { raw(); }, {}});
    v.push_back({"strata eager, tracing off", [&] { strata_mm(); }, {}});
    // One call per round, alternating: at ~40 ms a call, machine noise moves on the scale of seconds,
    // and only call-by-call alternation lets both variants see the same machine.
    const int big_rounds = std::max(10, rounds);
    run(v, big_rounds, 1);
    const double raw_ns = median(v[0].round_ns), off = median(v[1].round_ns);
    std::printf("\nmatmul n=1024, %d rounds x 1 call, alternating\n", big_rounds);
    for (auto& x : v)
      std::printf("  %-36s %8.3f ms/call  %6.1f GFLOP/s\n", x.name.c_str(), median(x.round_ns) / 1e6,
                  2.0 * 1024 * 1024 * 1024 / median(x.round_ns));
    std::printf("  strata / raw: %.3fx   [target <= 1.02x]\n", off / raw_ns);
  }

  // --- binding + dispatch rows, warm and with the caches evicted (Note [Rows in probe costs]) ---------
  {
    const double probe_ns = measure_zone_cost_ns();
    const int row_rounds = std::max(3, rounds / 4);
    std::printf("\nbinding + dispatch rows per call (self time of the spans, trimmed mean; binding + dispatch), median of %d "
                "rounds; zone probe %.1f ns\n",
                row_rounds, probe_ns);
    print_rows("matmul", "16", probe_ns, row_rounds);
    print_rows("relu", "4096", probe_ns, row_rounds);
    print_rows("linear", "4x64x64", probe_ns, row_rounds);
    print_rows("conv2d", "2x8x16x16", probe_ns, row_rounds);  // five arguments, two int[2] lists
  }

  // --- the machine's GEMM ceiling: the best raw sgemm rate over a few large sizes ------------------
  if (!rows_only) {
    double best = 0;
    int best_n = 0;
    for (int n : {1024, 2048, 3072}) {
      StrataMatmul s(n);
      RawSgemm raw(s);
      std::vector<Variant> v;
      v.push_back({"raw", [&] { raw(); }, {}});
      run(v, 9, 1);
      // A ceiling is what the machine can do: the fastest call, with the median beside it for honesty.
      const double fastest = *std::min_element(v[0].round_ns.begin(), v[0].round_ns.end());
      const double flop = 2.0 * n * double(n) * n;
      const double gflops = flop / fastest;
      std::printf("  raw cblas_sgemm n=%d: best %.1f GFLOP/s, median %.1f GFLOP/s\n", n, gflops,
                  flop / median(v[0].round_ns));
      if (gflops > best) best = gflops, best_n = n;
    }
    std::printf("GEMM ceiling measured here: %.1f GFLOP/s (fastest raw cblas_sgemm call, n=%d)\n", best, best_n);
  }
  return 0;
}
