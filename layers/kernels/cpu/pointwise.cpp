// add, the tanh GELU's ops (mul, sub, pow, scalar forms), the unary ops of pointwise_math.h and the
// gradient loops over contiguous memory: the inner loops are vectorized/loops.cpp's, built for the widest
// instruction set this CPU runs (SLEEF's vector math for erf, exp, tanh and pow), and every call is split
// across the intra-op threads (Note [Intra-op threads] in lib/parallel.h), as ATen's cpu_kernel_vec runs
// under at::parallel_for. The library row says which loop ran and on how many threads.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "layers/kernels/cpu/cpu_common.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/cpu/sum_rows.h"
#include "layers/kernels/cpu/vectorized/loops.h"
#include "layers/kernels/pointwise_math.h"
#include "lib/op_shapes.h"
#include "lib/parallel.h"
#include "lib/views.h"
#include "lib/zone.h"

namespace strata::kernels::cpu {
namespace {

// The zone's name: the loop, and for half types that it ran on f32 copies (Note [Half types on the CPU]).
const char* loop_name(DType dtype, const char* native, const char* bf16, const char* f16) {
  return dtype == DType::kBF16 ? bf16 : dtype == DType::kF16 ? f16 : native;
}

}  // namespace

const char* ran_name(const char* base, const char* math, int threads) {
  // This process's instruction set ("AVX-512"), and per math label ("SLEEF") the two joined, made once per
  // label: "SLEEF AVX-512". The portable loops call libm, whatever the label.
  static const std::string kIsa = vectorized::isa_name(vectorized::loops().isa);
  if (math == nullptr || vectorized::loops().isa == vectorized::Isa::kPortable) {
    return zone_name_with_threads(base, kIsa.c_str(), threads);
  }
  thread_local std::vector<std::pair<const char*, const char*>> seen;  // label -> interned "label ISA"
  for (const auto& [label, joined] : seen)
    if (label == math) return zone_name_with_threads(base, joined, threads);
  static std::mutex mutex;
  static std::map<const char*, std::string> joined;  // node-based: the strings never move
  const char* text = nullptr;
  {
    std::lock_guard lock(mutex);
    auto it = joined.try_emplace(math, std::string(math) + " " + kIsa).first;
    text = it->second.c_str();
  }
  seen.emplace_back(math, text);
  return zone_name_with_threads(base, text, threads);
}

// ---- Gradient ops (the backward formulas' calls, layers/ops/operators.h) ------------------------------

namespace {

// Sums every dimension but 1 ([B,C] -> [C], [N,C,H,W] -> [C]), accumulating in double: a bias gradient
// over a large batch is a long sum, and f32 accumulation would lose digits the reference keeps.
template <typename T>
void bias_backward_loop(const T* __restrict g, const Shape& s, T* __restrict out) {
  const int64_t outer = s[0], channels = s[1], inner = s.ndim == 4 ? s[2] * s[3] : 1;
  for (int64_t c = 0; c < channels; ++c) {
    double acc = 0;
    for (int64_t o = 0; o < outer; ++o) {
      const T* p = g + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) acc += double(p[i]);
    }
    out[c] = T(acc);
  }
}

template <typename T>
T sum_loop(const T* x, int64_t n, int& threads) {
  double acc = 0;
  threads = sum_rows(x, 1, n, &acc);  // Note [Sums that do not depend on the thread count]
  return T(acc);
}

template <typename T>
void fill_loop(T* out, T value, int64_t n) {
  const auto& loops = vectorized::loops().of<T>();
  parallel::parallel_for(0, n, parallel::kGrainSize, [&](int64_t b, int64_t e) { loops.fill(out + b, value, e - b); });
}

// The value of a one-element tensor, as the element type.
template <typename T>
T scalar_of(const Tensor& t) {
  return t.data<T>()[0];
}

}  // namespace

Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, double threshold) {
  // Half types: computed on f32 copies and rounded back (Note [Half types on the CPU]); the widen and
  // round zones name that in the library row.
  if (is_half(self.dtype()))
    return round_from_f32(threshold_backward(widen_to_f32(grad_output), widen_to_f32(self), threshold), self.dtype());
  STRATA_ZONE(zone, Layer::kLibrary, "threshold_backward (cpu loop)");
  op_shapes::check_operands("threshold_backward", check_cpu_input, grad_output, self);
  op_shapes::same_shape("threshold_backward", grad_output.sizes(), self.sizes());
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* g = grad_output.data<T>();
    const T* x = self.data<T>();
    T* o = out.data<T>();
    const auto& loops = vectorized::loops().of<T>();
    return split(self.numel(), [&](int64_t b, int64_t e) { loops.threshold_backward(g + b, x + b, T(threshold), o + b, e - b); });
  };
  const int threads = self.dtype() == DType::kF32 ? run(float{}) : run(double{});
  zone.rename(ran_name("threshold_backward (cpu loop)", nullptr, threads));
  return out;
}

Tensor bias_backward(const Tensor& grad_output) {
  // Half types: computed on f32 copies and rounded back (Note [Half types on the CPU]); the widen and
  // round zones name that in the library row.
  if (is_half(grad_output.dtype()))
    return round_from_f32(bias_backward(widen_to_f32(grad_output)), grad_output.dtype());
  STRATA_ZONE(zone, Layer::kLibrary, "bias_backward (cpu loop)");
  check_cpu_input("bias_backward", grad_output);
  Tensor out = Tensor::empty(op_shapes::bias_backward(grad_output.sizes()), grad_output.dtype(), grad_output.device());
  if (grad_output.dtype() == DType::kF32) {
    bias_backward_loop(grad_output.data<float>(), grad_output.sizes(), out.data<float>());
  } else {
    bias_backward_loop(grad_output.data<double>(), grad_output.sizes(), out.data<double>());
  }
  return out;
}

Tensor sum(const Tensor& self) {
  // Half types: computed on f32 copies and rounded back (Note [Half types on the CPU]); the widen and
  // round zones name that in the library row.
  if (is_half(self.dtype())) return round_from_f32(sum(widen_to_f32(self)), self.dtype());
  STRATA_ZONE(zone, Layer::kLibrary, "sum (cpu loop)");
  check_cpu_input("sum", self);
  Tensor out = Tensor::empty(Shape{}, self.dtype(), self.device());
  int threads = 1;
  if (self.dtype() == DType::kF32) {
    out.data<float>()[0] = sum_loop(self.data<float>(), self.numel(), threads);
  } else {
    out.data<double>()[0] = sum_loop(self.data<double>(), self.numel(), threads);
  }
  zone.rename(ran_name("sum (cpu loop)", nullptr, threads));
  return out;
}

Tensor ones_like(const Tensor& self) {
  // Half types: computed on f32 copies and rounded back (Note [Half types on the CPU]); the widen and
  // round zones name that in the library row.
  if (is_half(self.dtype())) return round_from_f32(ones_like(widen_to_f32(self)), self.dtype());
  STRATA_ZONE(zone, Layer::kLibrary, "ones_like (cpu loop)");
  check_cpu_input("ones_like", self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  if (self.dtype() == DType::kF32) {
    fill_loop(out.data<float>(), 1.0f, out.numel());
  } else {
    fill_loop(out.data<double>(), 1.0, out.numel());
  }
  return out;
}

Tensor expand_as(const Tensor& self, const Tensor& other) {
  // Half types: computed on f32 copies and rounded back (Note [Half types on the CPU]); the widen and
  // round zones name that in the library row.
  if (is_half(self.dtype()))
    return round_from_f32(expand_as(widen_to_f32(self), widen_to_f32(other)), self.dtype());
  STRATA_ZONE(zone, Layer::kLibrary, "expand_as (cpu loop)");
  op_shapes::check_operands("expand_as", check_cpu_input, self, other);
  // Materialised, not a view: strata's kernels take contiguous tensors (see docs/autograd.md).
  Tensor out = Tensor::empty(op_shapes::expand_as(self.sizes(), other.sizes()), self.dtype(), self.device());
  if (self.dtype() == DType::kF32) {
    fill_loop(out.data<float>(), scalar_of<float>(self), out.numel());
  } else {
    fill_loop(out.data<double>(), scalar_of<double>(self), out.numel());
  }
  return out;
}

// ---- The tanh GELU's ops ---------------------------------------------------------------------------------
// Each is f(element) (or f(a, b)) over contiguous memory, in T (f32 for half types, Note [Half types on the
// CPU]); a Python float operand is rounded to T first and the arithmetic is done in T, as PyTorch does with
// a wrapped number, so a scalar op and its lowering in the compiled path (layers/compiler) agree exactly.

namespace {

// The zone names of one op's loop: the native one and the two half-type ones (string literals).
// The vector math a loop calls, per element type, for its row ("SLEEF"); nullptr where it calls none.
struct MathLabels {
  const char* f32 = nullptr;
  const char* f64 = nullptr;
  const char* of(DType d) const { return d == DType::kF32 ? f32 : f64; }
};

// Where a functor's f32 loop calls strata's own vector math (vectorized/math_f32.h) instead of SLEEF's.
template <typename Fn>
constexpr const char* kF32Forward = "SLEEF";
template <>
constexpr const char* kF32Forward<math::Tanh> = "strata tanh";
template <>
constexpr const char* kF32Forward<math::Gelu> = "A&S erf";
template <typename Fn>
constexpr const char* kF32Gradient = "SLEEF";
template <>
constexpr const char* kF32Gradient<math::Gelu> = "A&S erf + SLEEF";

struct LoopNames {
  const char* native;
  const char* bf16;
  const char* f16;
};

// out = loop(self) elementwise: `loop(in, out, n)` is called with float or double pointers on each
// thread's range. `math`: the vector math the loop calls, which the row names.
template <typename Loop>
Tensor map1(const char* op, const LoopNames& names, const Tensor& self, const Loop& loop, MathLabels math = {}) {
  const char* base = loop_name(self.dtype(), names.native, names.bf16, names.f16);
  STRATA_ZONE(zone, Layer::kLibrary, base);
  check_cpu_input(op, self);
  Tensor widened;
  const Tensor& x = as_f32(self, widened);
  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    return split(x.numel(), [&](int64_t b, int64_t e) { loop(in + b, o + b, e - b); });
  };
  const int threads = x.dtype() == DType::kF32 ? run(float{}) : run(double{});
  zone.rename(ran_name(base, math.of(x.dtype()), threads));
  return round_from_f32(std::move(out), self.dtype());
}

// Note [Broadcasting in the CPU kernels]
// Operands of different shapes (docs/broadcasting.md) are not copied to the output's shape: each is
// expanded to it as a view (views::expand: stride 0 along the broadcast dims, new dims in front, no data
// moved; its zone shows under the op's), and this loop reads the views through their strides, as
// PyTorch's TensorIterator reads a broadcast operand. The innermost dim is the loop's, so [3,4] + [4]
// reads the [4] row again for every output row without materialising [3,4]; the output's rows are split
// across the intra-op threads. Same-shape operands take the vectorised loop.
template <typename T, typename F>
int broadcast_loop(const Tensor& a, const Tensor& b, T* out, F f) {
  int64_t size[4] = {1, 1, 1, 1}, sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0};
  const int pad = 4 - a.dim();  // a and b have the output's rank after expand
  for (int i = 0; i < a.dim(); ++i) {
    size[pad + i] = a.size(i);
    sa[pad + i] = a.stride(i);
    sb[pad + i] = b.stride(i);
  }
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const int64_t rows = size[0] * size[1] * size[2], cols = size[3];
  const int64_t grain = std::max<int64_t>(1, parallel::kGrainSize / std::max<int64_t>(cols, 1));
  const int threads = parallel::threads_for(0, rows, grain);
  parallel::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i2 = r % size[2], i1 = (r / size[2]) % size[1], i0 = r / (size[2] * size[1]);
      const T* ra = pa + i0 * sa[0] + i1 * sa[1] + i2 * sa[2];
      const T* rb = pb + i0 * sb[0] + i1 * sb[1] + i2 * sb[2];
      T* o = out + r * cols;
      for (int64_t i3 = 0; i3 < cols; ++i3) o[i3] = f(ra[i3 * sa[3]], rb[i3 * sb[3]]);
    }
  });
  return threads;
}

// Whether map2's operands may broadcast: add, sub and mul do, as PyTorch's; a gradient op's operands are
// the gradient and a saved tensor of the same shape, so a difference there is a bug and is refused.
enum class Operands { kBroadcast, kSameShape };

// out = f(self, other) elementwise, for two tensors of one dtype and device whose shapes broadcast (or,
// for kSameShape, are identical): `loop(a, b, out, n)` on each thread's range when the shapes are equal,
// the scalar `f(a, b)` through the broadcast loop otherwise.
template <typename Loop, typename F>
Tensor map2(const char* op, const LoopNames& names, const Tensor& self, const Tensor& other, const Loop& loop, F f,
            Operands operands = Operands::kBroadcast, MathLabels math = {}) {
  const char* base = loop_name(self.dtype(), names.native, names.bf16, names.f16);
  STRATA_ZONE(zone, Layer::kLibrary, base);
  op_shapes::check_operands(op, check_cpu_input, self, other);
  const Shape shape = operands == Operands::kBroadcast ? op_shapes::broadcast(op, self.sizes(), other.sizes())
                                                       : op_shapes::same_shape(op, self.sizes(), other.sizes());
  Tensor wide_a, wide_b;
  const Tensor &a = as_f32(self, wide_a), &b = as_f32(other, wide_b);
  Tensor out = Tensor::empty(shape, a.dtype(), self.device());
  if (self.sizes() == other.sizes()) {
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* o = out.data<T>();
      return split(a.numel(), [&](int64_t begin, int64_t end) { loop(pa + begin, pb + begin, o + begin, end - begin); });
    };
    const int threads = a.dtype() == DType::kF32 ? run(float{}) : run(double{});
    zone.rename(ran_name(base, math.of(a.dtype()), threads));
    return round_from_f32(std::move(out), self.dtype());
  }
  const Tensor va = views::expand(a, shape), vb = views::expand(b, shape);
  STRATA_ZONE(loop_zone, Layer::kLibrary, "broadcast loop (expanded views read through their strides, no copy)");
  const int threads =
      a.dtype() == DType::kF32 ? broadcast_loop(va, vb, out.data<float>(), f) : broadcast_loop(va, vb, out.data<double>(), f);
  zone.rename(ran_name(base, math.of(a.dtype()), threads));
  return round_from_f32(std::move(out), self.dtype());
}

// The loops of the element type of `p` (float or double).
template <typename T>
const vectorized::TypedLoops<T>& loops_of(const T*) {
  return vectorized::loops().of<T>();
}

}  // namespace

Tensor add(const Tensor& self, const Tensor& other, double alpha) {
  return map2(
      "add", {"add (cpu loop)", "add (cpu loop, bf16 widened to f32)", "add (cpu loop, f16 widened to f32)"}, self, other,
      [alpha](const auto* a, const auto* b, auto* out, int64_t n) {
        loops_of(a).add(a, b, static_cast<std::remove_pointer_t<decltype(out)>>(alpha), out, n);
      },
      [alpha](auto a, auto b) { return a + decltype(a)(alpha) * b; });
}

Tensor mul(const Tensor& self, const Tensor& other) {
  return map2(
      "mul", {"mul (cpu loop)", "mul (cpu loop, bf16 widened to f32)", "mul (cpu loop, f16 widened to f32)"}, self, other,
      [](const auto* a, const auto* b, auto* out, int64_t n) { loops_of(a).mul(a, b, out, n); },
      [](auto a, auto b) { return a * b; });
}

// One multiply per element, one rounding: the scaled gradient a backward pass needs exactly (AddBackward
// with alpha = 1e-8 computed as grad + (alpha - 1) * grad cancelled to 0 in f32).
Tensor mul_scalar(const Tensor& self, double other) {
  return map1("mul.Scalar",
              {"mul.Scalar (cpu loop)", "mul.Scalar (cpu loop, bf16 widened to f32)",
               "mul.Scalar (cpu loop, f16 widened to f32)"},
              self, [other](const auto* a, auto* out, int64_t n) {
                loops_of(a).mul_scalar(a, static_cast<std::remove_pointer_t<decltype(out)>>(other), out, n);
              });
}

// True division, one IEEE division per element in T (f32 for half types), as PyTorch's CPU div_true_kernel:
// x / 0 is +-inf, 0 / 0 NaN, signed zeros by the operands' signs. div.Scalar divides by the number rounded
// to T (not a multiply by its reciprocal, which rounds twice).
Tensor div(const Tensor& self, const Tensor& other) {
  return map2(
      "div", {"div (cpu loop)", "div (cpu loop, bf16 widened to f32)", "div (cpu loop, f16 widened to f32)"}, self, other,
      [](const auto* a, const auto* b, auto* out, int64_t n) { loops_of(a).div(a, b, out, n); },
      [](auto a, auto b) { return a / b; });
}

Tensor div_scalar(const Tensor& self, double other) {
  return map1("div.Scalar",
              {"div.Scalar (cpu loop)", "div.Scalar (cpu loop, bf16 widened to f32)",
               "div.Scalar (cpu loop, f16 widened to f32)"},
              self, [other](const auto* a, auto* out, int64_t n) {
                loops_of(a).div_scalar(a, static_cast<std::remove_pointer_t<decltype(out)>>(other), out, n);
              });
}

// add's a + alpha * b with b the scalar: alpha * b rounded to T once, as every element computed it.
Tensor add_scalar(const Tensor& self, double number, double alpha) {
  const double other = number_in(self.dtype(), number);  // Note [A number added to a half tensor]
  return map1("add.Scalar",
              {"add.Scalar (cpu loop)", "add.Scalar (cpu loop, bf16 widened to f32)",
               "add.Scalar (cpu loop, f16 widened to f32)"},
              self, [other, alpha](const auto* a, auto* out, int64_t n) {
                using T = std::remove_pointer_t<decltype(out)>;
                loops_of(a).add_scalar(a, T(alpha) * T(other), out, n);
              });
}

// a - alpha * b as a + (-alpha) * b, as PyTorch's sub calls add's kernel: the same rounding (negation is
// exact), so sub and add agree on every input, signed zeros included.
Tensor sub(const Tensor& self, const Tensor& other, double alpha) {
  return map2(
      "sub", {"sub (cpu loop)", "sub (cpu loop, bf16 widened to f32)", "sub (cpu loop, f16 widened to f32)"}, self, other,
      [alpha](const auto* a, const auto* b, auto* out, int64_t n) {
        loops_of(a).add(a, b, static_cast<std::remove_pointer_t<decltype(out)>>(-alpha), out, n);
      },
      [alpha](auto a, auto b) { return a + decltype(a)(-alpha) * b; });
}

Tensor sub_scalar(const Tensor& self, double number, double alpha) {
  const double other = number_in(self.dtype(), number);  // Note [A number added to a half tensor]
  return map1("sub.Scalar",
              {"sub.Scalar (cpu loop)", "sub.Scalar (cpu loop, bf16 widened to f32)",
               "sub.Scalar (cpu loop, f16 widened to f32)"},
              self, [other, alpha](const auto* a, auto* out, int64_t n) {
                using T = std::remove_pointer_t<decltype(out)>;
                loops_of(a).add_scalar(a, T(-alpha) * T(other), out, n);
              });
}

// PyTorch's pow with a number: the special exponents as sqrt, reciprocal and multiplies, the rest SLEEF's
// pow (vectorized/loops.cpp), as ATen's pow_tensor_scalar kernel; the compiled path lowers pow the same way.
Tensor pow(const Tensor& self, double exponent) {
  static constexpr double kSpecial[] = {0.0, 1.0, 0.5, -0.5, -1.0, 2.0, 3.0, -2.0};
  const bool sleef = std::find(std::begin(kSpecial), std::end(kSpecial), exponent) == std::end(kSpecial);
  return map1(
      "pow", {"pow (cpu loop)", "pow (cpu loop, bf16 widened to f32)", "pow (cpu loop, f16 widened to f32)"}, self,
      [exponent](const auto* a, auto* out, int64_t n) {
        loops_of(a).pow(a, exponent, out, n);
      },
      sleef ? MathLabels{"SLEEF", "SLEEF"} : MathLabels{});
}

// ---- The unary ops of layers/kernels/pointwise_math.h ------------------------------------------------------
// Note [Pointwise math written once]: the loop is map1's (map2's for a gradient, same shapes only), the
// math the functor's, evaluated on vectors by vectorized/loops.cpp.

namespace {

// "gelu (cpu loop)" and its two half-type forms, built once per functor (zone names must outlive the
// timeline, as string literals do).
template <typename Fn>
const LoopNames& loop_names_of(const char* name) {
  static const std::string kNative = std::string(name) + " (cpu loop)";
  static const std::string kBf16 = std::string(name) + " (cpu loop, bf16 widened to f32)";
  static const std::string kF16 = std::string(name) + " (cpu loop, f16 widened to f32)";
  static const LoopNames kNames{kNative.c_str(), kBf16.c_str(), kF16.c_str()};
  return kNames;
}

struct GradientTag {};  // gives a functor's gradient loop its own set of names

}  // namespace

template <typename Fn>
Tensor unary(const Tensor& self) {
  return map1(
      Fn::kName, loop_names_of<Fn>(Fn::kName), self,
      [](const auto* a, auto* out, int64_t n) {
        loops_of(a).unary[vectorized::index_of<Fn>(math::UnaryMath{})](a, out, n);
      },
      math::kCallsVectorMath<Fn> ? MathLabels{kF32Forward<Fn>, "SLEEF"} : MathLabels{});
}

template <typename Fn>
Tensor unary_gradient(const Tensor& grad_output, const Tensor& saved) {
  return map2(
      Fn::kGradientName, loop_names_of<std::pair<Fn, GradientTag>>(Fn::kGradientName), grad_output, saved,
      [](const auto* g, const auto* s, auto* out, int64_t n) {
        loops_of(g).gradient[vectorized::index_of<Fn>(math::UnaryGradientMath{})](g, s, out, n);
      },
      [](auto g, auto s) { return Fn::gradient(g, s); }, Operands::kSameShape,
      math::kGradientCallsVectorMath<Fn> ? MathLabels{kF32Gradient<Fn>, "SLEEF"} : MathLabels{});
}

// Every functor's loops, instantiated: the addresses, kept in a table with external linkage, make the
// compiler emit each one here for the declarations in layers/ops to name.
template <typename... Fns>
constexpr std::array<Tensor (*)(const Tensor&), sizeof...(Fns)> unary_table(math::MathList<Fns...>) {
  return {&unary<Fns>...};
}
template <typename... Fns>
constexpr std::array<Tensor (*)(const Tensor&, const Tensor&), sizeof...(Fns)> gradient_table(math::MathList<Fns...>) {
  return {&unary_gradient<Fns>...};
}
extern const decltype(unary_table(math::UnaryMath{})) kUnaryKernels;
extern const decltype(gradient_table(math::UnaryGradientMath{})) kUnaryGradientKernels;
const decltype(unary_table(math::UnaryMath{})) kUnaryKernels = unary_table(math::UnaryMath{});
const decltype(gradient_table(math::UnaryGradientMath{})) kUnaryGradientKernels =
    gradient_table(math::UnaryGradientMath{});

}  // namespace strata::kernels::cpu
