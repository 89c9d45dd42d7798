#include "apps/strata/ceiling.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/error.h"
#include "lib/host_clock.h"
#include "lib/tensor.h"

namespace strata::app {
namespace {

template <typename T>
void fill(Tensor& t) {
  T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = T(0.5) + T(i % 7) * T(0.125);  // no denormals, no NaN
}

// Runs `work` once untimed (thread start-up, first touch), then up to `passes` timed, stopping early once
// `budget_s` has passed; the fastest pass in ns.
template <typename F>
double best_ns(int passes, double budget_s, int& runs, F&& work) {
  work();
  runs = 0;
  const uint64_t start = host_clock::ticks();
  double best = 0;
  for (int i = 0; i < passes; ++i) {
    const uint64_t t0 = host_clock::ticks();
    work();
    const double ns = host_clock::elapsed_ns(t0);
    ++runs;
    if (best == 0 || ns < best) best = ns;
    if (host_clock::elapsed_ns(start) * 1e-9 > budget_s) break;
  }
  return best;
}

}  // namespace

reports::Ceiling measure_cpu_ceiling(bool memory_bound, DType dtype, const CeilingOptions& o) {
  reports::Ceiling c;
  c.measured = true;
  const uint64_t start = host_clock::ticks();
  char buf[400];
  int runs = 0;
  if (memory_bound) {
    // Touched before timing, so that no pass pays for page faults.
    std::unique_ptr<char[]> src(new char[o.copy_bytes]), dst(new char[o.copy_bytes]);
    std::memset(src.get(), 1, o.copy_bytes);
    std::memset(dst.get(), 0, o.copy_bytes);
    const double ns = best_ns(o.passes, o.budget_s, runs, [&] { std::memcpy(dst.get(), src.get(), o.copy_bytes); });
    c.rate = ns > 0 ? 2.0 * double(o.copy_bytes) / (ns * 1e-9) : 0;  // read once, written once
    std::snprintf(buf, sizeof buf,
                  "best of %d passes of a one-thread %s memcpy (bytes read + written) in this run", runs,
                  format_bytes(double(o.copy_bytes)).c_str());
  } else {
    // Note [Half types on the CPU]: bf16 and f16 compute in f32 here (widened copies, cblas_sgemm), so
    // their ceiling is the f32 GEMM's, and the label says so. What the sweep's half-precision calls lose
    // to widening and rounding is theirs to show against it.
    const DType computed = dtype == DType::kF64 ? DType::kF64 : DType::kF32;
    const int64_t n = o.gemm_n;
    Tensor a = Tensor::empty({n, n}, computed, kCPU), b = Tensor::empty({n, n}, computed, kCPU);
    if (computed == DType::kF32) fill<float>(a), fill<float>(b);
    else fill<double>(a), fill<double>(b);
    const double ns = best_ns(o.passes, o.budget_s, runs, [&] { (void)kernels::cpu::matmul(a, b); });
    c.rate = ns > 0 ? 2.0 * double(n) * double(n) * double(n) / (ns * 1e-9) : 0;
    const int threads = kernels::cpu::blas_threads();
    const std::string widened = computed == dtype ? "" : "; " + std::string(dtype_name(dtype)) +
                                                             " computes in f32 on the CPU (widened copies), so this is its ceiling";
    std::snprintf(buf, sizeof buf,
                  "best of %d %s %lldx%lldx%lld calls through kernels::cpu::matmul in this run "
                  "(OpenBLAS, %d thread%s)%s",
                  runs, computed == DType::kF32 ? "cblas_sgemm" : "cblas_dgemm", static_cast<long long>(n),
                  static_cast<long long>(n), static_cast<long long>(n), threads, threads == 1 ? "" : "s",
                  widened.c_str());
  }
  c.spent_ns = host_clock::elapsed_ns(start);
  char took[48];
  std::snprintf(took, sizeof took, ", %.2f s in all", c.spent_ns * 1e-9);
  c.how = std::string(buf) + took;
  return c;
}

}  // namespace strata::app
