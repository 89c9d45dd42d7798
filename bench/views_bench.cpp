// Views (docs/views.md), side by side in one run (docs/performance.md records the results and the
// command). Variants run interleaved, round by round, so that machine noise hits them alike; each figure is
// the median over rounds of the mean call time.
//
//   bench/views_bench [--rounds R] [--n N]
//
// 1. What a view costs: transpose through the binding layer (boxed values), through the dispatcher's
//    entry (ops::transpose), and the header alone (views::transpose, no dispatch).
// 2. x @ w.t() against x @ w with w already laid out transposed: one GEMM each, NT against NN.
// 3. contiguous() of a transposed [N,N] f32 view and of a stepped one, against memcpy of the same bytes and
//    the output's allocation alone.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "layers/binding/binding.h"
#include "layers/frontend/frontend.h"
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

void run_and_print(const char* title, std::vector<Variant> variants, int rounds) {
  for (auto& v : variants) v.call();  // warm caches and lazy state
  for (int r = 0; r < rounds; ++r) {
    for (auto& v : variants) {
      const int64_t t0 = host_clock::now_ns();
      for (int i = 0; i < v.calls_per_round; ++i) v.call();
      v.round_ns.push_back(double(host_clock::now_ns() - t0) / v.calls_per_round);
    }
  }
  std::printf("%s\n", title);
  for (const auto& v : variants) {
    const double ns = median(v.round_ns);
    if (ns < 1e4)
      std::printf("  %-48s %10.1f ns\n", v.name.c_str(), ns);
    else
      std::printf("  %-48s %10.1f us\n", v.name.c_str(), ns / 1e3);
  }
}

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
  std::vector<char> dst(x.nbytes());
  run_and_print(
      ("3. copies of " + std::to_string(x.nbytes() >> 10) + " KiB (an [N,N] f32 tensor)").c_str(),
      {{"contiguous() of x.t()", [&] { sink = ops::contiguous(ops::t(x)); }, 20, {}},
       {"contiguous() of a stepped view (stride 2)", [&] { sink = ops::contiguous(stepped); }, 20, {}},
       {"Tensor::empty of the same bytes (the copy's allocation alone)",
        [&] { sink = Tensor::empty(x.sizes(), x.dtype(), kCPU); },
        20,
        {}},
       {"contiguous() of x (no copy)", [&] { sink = ops::contiguous(x); }, 20000, {}},
       {"memcpy of the same bytes",
        [&] {
          std::memcpy(dst.data(), x.data_ptr(), x.nbytes());
          asm volatile("" : : "r"(dst.data()) : "memory");
        },
        20,
        {}}},
      rounds);
  return 0;
}
