// strata's own cost per call, measured side by side with raw cblas_sgemm on the same data in one run
// (docs/performance.md records the results and the command). Variants run interleaved, round by round,
// so that machine noise hits them alike; each figure is the median over rounds of the mean call time.
//
//   bench/overhead_bench [--rounds R]
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
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(3, std::atoi(argv[i + 1]));
  host_clock::calibrate();
  const auto clock = host_clock::info();
  std::printf("strata overhead benchmark   clock: %s (read %.1f ns; steady_clock::now %.1f ns)   tracing compiled %s\n",
              std::string(clock.source).c_str(), clock.read_cost_ns, clock.steady_read_cost_ns,
              STRATA_TRACING ? "in" : "out");

  // --- n = 16: the per-call overhead regime ---------------------------------------------------
  {
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
  {
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

  // --- the machine's GEMM ceiling: the best raw sgemm rate over a few large sizes ------------------
  {
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
