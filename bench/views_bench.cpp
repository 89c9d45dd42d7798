// Views (docs/views.md), side by side in one run (docs/performance.md records the results and the
// command). Variants run interleaved, round by round, so that machine noise hits them alike; each figure is
// the median over rounds of the mean call time.
//
//   bench/views_bench [--rounds R] [--n N]
//
// 1. What a view costs: transpose through the binding layer (boxed values), through the dispatcher's
//    entry (ops::transpose), and the header alone (views::transpose, no dispatch).
// 2. x @ w.t() against x @ w with w already laid out transposed: one GEMM each, NT against NN.
// 3. contiguous() of a transposed [N,N] f32 view and of a stepped one, against memcpy of the same bytes:
//    each copy both with its allocation (contiguous(): a block from strata's CPU allocator) and into an
//    already-touched destination (kernels::cpu::strided_copy), beside memcpy into a touched buffer, into a
//    fresh Tensor::empty (the allocator contiguous() uses) and into a fresh malloc'd buffer; then the
//    ratios issue 31 asks about (the copy within 1.5x of memcpy of the same bytes).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "layers/binding/binding.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/ops/operators.h"
#include "lib/host_clock.h"
#include "lib/views.h"

using namespace strata;

namespace {

struct Variant {
  std::string name;
  std::function<void()> call;
  int calls_per_round;
  std::vector<double> round_ns;  // mean ns per call in each round
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Prints each variant's median over rounds and returns them, in the variants' order.
std::vector<double> run_and_print(const char* title, std::vector<Variant> variants, int rounds) {
  for (auto& v : variants) v.call();  // warm caches and lazy state
  for (int r = 0; r < rounds; ++r) {
    for (auto& v : variants) {
      const int64_t t0 = host_clock::now_ns();
      for (int i = 0; i < v.calls_per_round; ++i) v.call();
      v.round_ns.push_back(double(host_clock::now_ns() - t0) / v.calls_per_round);
    }
  }
  std::printf("%s\n", title);
  std::vector<double> medians;
  for (const auto& v : variants) {
    const double ns = median(v.round_ns);
    medians.push_back(ns);
    if (ns < 1e4)
      std::printf("  %-48s %10.1f ns\n", v.name.c_str(), ns);
    else
      std::printf("  %-48s %10.1f us\n", v.name.c_str(), ns / 1e3);
  }
  return medians;
}

// Keeps the compiler from dropping a copy whose destination is never read.
void sink_bytes(void* written) { asm volatile("" : : "r"(written) : "memory"); }

int arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = arg(argc, argv, "--rounds", 15), n = arg(argc, argv, "--n", 512);
  const Tensor x = frontend::random_tensor(Shape{n, n}, DType::kF32, kCPU, 1);
  const Tensor w = frontend::random_tensor(Shape{n, n}, DType::kF32, kCPU, 2);
  const Tensor w_t_laid_out = ops::contiguous(ops::t(w));  // the same values as w.t(), row-major
  const binding::BoundOperator& transpose = binding::find_operator("transpose");
  const std::vector<binding::IValue> boxed = {binding::IValue(x), binding::IValue(int64_t{0}),
                                              binding::IValue(int64_t{1})};
  Tensor sink;

  run_and_print(
      "1. a view: transpose of an [N,N] f32 tensor",
      {{"through the binding (BoundOperator::call)",
        [&] { sink = transpose.call(boxed).tensor(); },
        20000,
        {}},
       {"through the dispatcher (ops::transpose)", [&] { sink = ops::transpose(x, 0, 1); }, 20000, {}},
       {"the header alone (views::transpose)", [&] { sink = views::transpose(x, 0, 1); }, 20000, {}}},
      rounds);

  run_and_print(("2. GEMM " + std::to_string(n) + "^3 f32: x @ w.t() (NT, no copy) vs x @ w (NN)").c_str(),
                {{"x @ w.t()  (cblas_sgemm NT)", [&] { sink = ops::matmul(x, ops::t(w)); }, 2, {}},
                 {"x @ w_t    (cblas_sgemm, w_t laid out row-major)",
                  [&] { sink = ops::matmul(x, w_t_laid_out); },
                  2,
                  {}}},
                rounds);

  const Tensor stepped_base = frontend::random_tensor(Shape{n, 2 * n}, DType::kF32, kCPU, 3);
  const Tensor stepped = views::slice(stepped_base, 1, 0, 2 * n, 2);
  const Tensor transposed = ops::t(x);
  Tensor touched = Tensor::empty(x.sizes(), x.dtype(), kCPU);
  std::memset(touched.data_ptr(), 0, touched.nbytes());
  std::vector<char> dst(x.nbytes(), 0);
  const size_t bytes = x.nbytes();
  const std::vector<double> ns = run_and_print(
      ("3. copies of " + std::to_string(bytes >> 10) + " KiB (an [N,N] f32 tensor)").c_str(),
      {{"contiguous() of x.t() (allocation + copy)", [&] { sink = ops::contiguous(transposed); }, 20, {}},
       {"x.t() copied into an already-touched [N,N]",
        [&] { kernels::cpu::strided_copy(touched, transposed); },
        20,
        {}},
       {"contiguous() of a stepped view (stride 2)", [&] { sink = ops::contiguous(stepped); }, 20, {}},
       {"the stepped view into an already-touched [N,N]",
        [&] { kernels::cpu::strided_copy(touched, stepped); },
        20,
        {}},
       {"memcpy into an already-touched buffer",
        [&] {
          std::memcpy(dst.data(), x.data_ptr(), bytes);
          sink_bytes(dst.data());
        },
        20,
        {}},
       {"memcpy into a fresh Tensor::empty (contiguous()'s allocator)",
        [&] {
          sink = Tensor::empty(x.sizes(), x.dtype(), kCPU);
          std::memcpy(sink.data_ptr(), x.data_ptr(), bytes);
          sink_bytes(sink.data_ptr());
        },
        20,
        {}},
       {"memcpy into a fresh malloc'd buffer (malloc + memcpy + free)",
        [&] {
          void* fresh = std::malloc(bytes);
          std::memcpy(fresh, x.data_ptr(), bytes);
          sink_bytes(fresh);
          std::free(fresh);
        },
        20,
        {}},
       {"Tensor::empty of the same bytes (the copy's allocation alone)",
        [&] { sink = Tensor::empty(x.sizes(), x.dtype(), kCPU); },
        20,
        {}},
       {"contiguous() of x (no copy)", [&] { sink = ops::contiguous(x); }, 20000, {}}},
      rounds);
  // The ratios issue 31 asks about, each copy against memcpy with the same kind of destination.
  const double to_fresh = ns[5], to_touched = ns[4];
  std::printf("  ratios to memcpy of the same bytes (issue 31 asks for at most 1.5x):\n");
  std::printf("  %-60s %6.2fx\n", "contiguous() of x.t() / memcpy into a fresh Tensor::empty", ns[0] / to_fresh);
  std::printf("  %-60s %6.2fx\n", "x.t() into a touched buffer / memcpy into a touched buffer", ns[1] / to_touched);
  std::printf("  %-60s %6.2fx\n", "contiguous() of the stepped view / memcpy into Tensor::empty", ns[2] / to_fresh);
  std::printf("  %-60s %6.2fx\n", "stepped view into a touched buffer / memcpy into a touched one", ns[3] / to_touched);
  return 0;
}
