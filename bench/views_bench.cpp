// Views (docs/views.md), side by side in one run (docs/performance.md records the results and the
// command). Variants run interleaved, round by round, so that machine noise hits them alike; each figure is
// the median over rounds of the mean call time.
//
//   bench/views_bench [--rounds R] [--n N] [--shapes RxC,RxC,...]
//
// 1. What a view costs: transpose through the binding layer (boxed values), through the dispatcher's
//    entry (ops::transpose), and the header alone (views::transpose, no dispatch).
// 2. x @ w.t() against x @ w with w already laid out transposed: one GEMM each, NT against NN.
// 3. contiguous() of a transposed [N,N] f32 view and of a stepped one, against memcpy of the same bytes:
//    each copy both with its allocation (contiguous(): a block from strata's CPU allocator) and into an
//    already-touched destination (kernels::cpu::strided_copy), beside memcpy into that same touched
//    destination, into a fresh Tensor::empty (the allocator contiguous() uses) and into a fresh malloc'd
//    buffer; then the ratios issue 31 asks about (the copy within 1.5x of memcpy of the same bytes).
// 4. The transposed copy alone at several shapes (--shapes; power-of-two row strides, where lines alias in
//    the caches, and others): x.t() into an already-touched tensor with the instruction set the CPU
//    allows and with SSE2 only (copy_transpose.h), a plain two-loop transpose written as simply as
//    possible, and memcpy of the same bytes, with their ratios to memcpy, timed in the thread's CPU time
//    (thread_cpu_ns says why). Every variant reads the same x
//    and writes the same destination (memcpy too), so that none pays for evicting another's dirty lines:
//    with memcpy writing a buffer of its own, at 4 MiB the variant after it ran up to twice as long.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "layers/binding/binding.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/cpu/copy_transpose.h"
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

// Each variant's median over rounds of its mean call time, in the variants' order. In each round a
// variant's timed calls follow one untimed call of its own: every variant starts warm from its own data,
// not from what the variant before it left in the caches. (Without it, at 4 MiB, whichever copy came
// right after memcpy took up to twice as long as the same copy placed later.)
std::vector<double> measure(std::vector<Variant>& variants, int rounds, int64_t (*clock)() = host_clock::now_ns) {
  for (int r = 0; r < rounds; ++r) {
    for (auto& v : variants) {
      v.call();
      const int64_t t0 = clock();
      for (int i = 0; i < v.calls_per_round; ++i) v.call();
      v.round_ns.push_back(double(clock() - t0) / v.calls_per_round);
    }
  }
  std::vector<double> medians;
  for (const auto& v : variants) medians.push_back(median(v.round_ns));
  return medians;
}

// Prints each variant's median over rounds and returns them, in the variants' order.
std::vector<double> run_and_print(const char* title, std::vector<Variant> variants, int rounds) {
  const std::vector<double> medians = measure(variants, rounds);
  std::printf("%s\n", title);
  for (size_t k = 0; k < variants.size(); ++k) {
    const double ns = medians[k];
    if (ns < 1e4)
      std::printf("  %-48s %10.1f ns\n", variants[k].name.c_str(), ns);
    else
      std::printf("  %-48s %10.1f us\n", variants[k].name.c_str(), ns / 1e3);
  }
  return medians;
}

// This thread's CPU time: on a loaded machine the wall clock also counts the time the thread waited for a
// core, and with rounds of a fixed length the scheduler's slices can fall on the same variant round after
// round (a 4 MiB copy's median at ~3.5 ms where its minimum was ~0.3 ms). Memory stalls still count.
int64_t thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// Keeps the compiler from dropping a copy whose destination is never read.
void sink_bytes(void* written) { asm volatile("" : : "r"(written) : "memory"); }

const char* arg_text(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

int arg(int argc, char** argv, const char* name, int fallback) {
  const char* text = arg_text(argc, argv, name, nullptr);
  return text == nullptr ? fallback : std::atoi(text);
}

// "512x512,1000x1000" as {rows, cols} pairs; exits naming the bad entry.
std::vector<std::pair<int64_t, int64_t>> parse_shapes(const char* text) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (const char* at = text; *at != '\0';) {
    char* end = nullptr;
    const long long rows = std::strtoll(at, &end, 10);
    const long long cols = *end == 'x' ? std::strtoll(end + 1, &end, 10) : 0;
    if (rows <= 0 || cols <= 0 || (*end != ',' && *end != '\0')) {
      std::fprintf(stderr, "views_bench: --shapes takes ROWSxCOLS[,ROWSxCOLS...] with positive sizes, got '%s'\n", text);
      std::exit(2);
    }
    shapes.emplace_back(rows, cols);
    at = *end == ',' ? end + 1 : end;
  }
  return shapes;
}

// The transpose a reader would write first: one element at a time, the destination in order.
__attribute__((noinline)) void plain_transpose(int64_t rows, int64_t cols, float* d, const float* s) {
  for (int64_t c = 0; c < rows; ++c)
    for (int64_t i = 0; i < cols; ++i) d[c * cols + i] = s[c + i * rows];
}

// Section 4: x.t() of an [cols, rows] f32 x into a touched [rows, cols], per shape, as the header says.
void transposed_copy_shapes(const std::vector<std::pair<int64_t, int64_t>>& shapes, int rounds) {
  using kernels::cpu::CopySimd;
  const CopySimd best = kernels::cpu::best_copy_simd();
  std::printf("4. the transposed copy: x.t() of an f32 [C,R] x into a touched [R,C], against memcpy, thread CPU time (best: %s)\n",
              best == CopySimd::kAvx2 ? "AVX2" : best == CopySimd::kSse2 ? "SSE2" : "scalar");
  std::printf("  %-11s %9s %10s %10s %10s %10s %8s %8s %8s\n", "R x C", "KiB", "memcpy", "copy", "copy SSE2",
              "plain", "copy/mc", "SSE2/mc", "plain/mc");
  for (const auto& shape_pair : shapes) {
    const int64_t rows = shape_pair.first, cols = shape_pair.second;  // named, for the lambdas to capture
    const Tensor x = frontend::random_tensor(Shape{cols, rows}, DType::kF32, kCPU, 4);
    const Tensor view = ops::t(x);
    const Tensor touched = Tensor::empty(view.sizes(), DType::kF32, kCPU);
    std::memset(touched.data_ptr(), 0, touched.nbytes());
    const size_t bytes = x.nbytes();
    const int calls = int(std::max<size_t>(1, (size_t{8} << 20) / bytes));
    std::vector<Variant> variants = {
        {"memcpy",
         [&] {
           std::memcpy(touched.data_ptr(), x.data_ptr(), bytes);
           sink_bytes(touched.data_ptr());
         },
         calls,
         {}},
        {"copy", [&] { kernels::cpu::use_copy_simd(best); kernels::cpu::strided_copy(touched, view); }, calls, {}},
        {"copy SSE2",
         [&] { kernels::cpu::use_copy_simd(CopySimd::kSse2); kernels::cpu::strided_copy(touched, view); },
         calls,
         {}},
        {"plain",
         [&] {
           plain_transpose(rows, cols, touched.data<float>(), x.data<float>());
           sink_bytes(touched.data_ptr());
         },
         std::max(1, calls / 8),
         {}}};
    const std::vector<double> ns = measure(variants, rounds, thread_cpu_ns);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    std::printf("  %-11s %9zu %7.1f us %7.1f us %7.1f us %7.1f us %7.2fx %7.2fx %7.2fx\n", shape.c_str(), bytes >> 10,
                ns[0] / 1e3, ns[1] / 1e3, ns[2] / 1e3, ns[3] / 1e3, ns[1] / ns[0], ns[2] / ns[0], ns[3] / ns[0]);
  }
  kernels::cpu::use_copy_simd(best);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = arg(argc, argv, "--rounds", 15), n = arg(argc, argv, "--n", 512);
  const auto shapes =
      parse_shapes(arg_text(argc, argv, "--shapes", "256x256,512x512,1000x1000,1024x1024,2048x2048,512x2048,2048x512,4096x256"));
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
       {"memcpy into an already-touched buffer (the copies' own)",
        [&] {
          std::memcpy(touched.data_ptr(), x.data_ptr(), bytes);
          sink_bytes(touched.data_ptr());
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

  transposed_copy_shapes(shapes, rounds);
  return 0;
}
