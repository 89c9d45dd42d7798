// add, the tanh GELU's ops (mul, sub, pow, scalar forms) and the unary ops of pointwise_math.h as plain loops over contiguous memory: with -O2/-O3 and __restrict the compiler emits
// vector code, which is all a memory-bound pointwise op needs on the CPU.
#include <array>
#include <cmath>
#include <string>
#include <utility>

#include "layers/kernels/cpu/cpu_common.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/pointwise_math.h"
#include "lib/op_shapes.h"
#include "lib/views.h"
#include "lib/zone.h"

namespace strata::kernels::cpu {
namespace {

// The zone's name: the loop, and for half types that it ran on f32 copies (Note [Half types on the CPU]).
const char* loop_name(DType dtype, const char* native, const char* bf16, const char* f16) {
  return dtype == DType::kBF16 ? bf16 : dtype == DType::kF16 ? f16 : native;
}

}  // namespace

// ---- Gradient ops (the backward formulas' calls, layers/ops/operators.h) ------------------------------

namespace {

template <typename T>
void threshold_backward_loop(const T* __restrict g, const T* __restrict x, T threshold, T* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] <= threshold ? T(0) : g[i];  // PyTorch's: x <= t gives 0
}

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
T sum_loop(const T* __restrict x, int64_t n) {
  double acc = 0;  // as bias_backward: a long sum keeps its digits
  for (int64_t i = 0; i < n; ++i) acc += double(x[i]);
  return T(acc);
}

template <typename T>
void fill_loop(T* __restrict out, T value, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = value;
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
  if (self.dtype() == DType::kF32) {
    threshold_backward_loop(grad_output.data<float>(), self.data<float>(), static_cast<float>(threshold),
                            out.data<float>(), self.numel());
  } else {
    threshold_backward_loop(grad_output.data<double>(), self.data<double>(), threshold, out.data<double>(),
                            self.numel());
  }
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
  if (self.dtype() == DType::kF32) {
    out.data<float>()[0] = sum_loop(self.data<float>(), self.numel());
  } else {
    out.data<double>()[0] = sum_loop(self.data<double>(), self.numel());
  }
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
struct LoopNames {
  const char* native;
  const char* bf16;
  const char* f16;
};

template <typename T, typename F>
void map_loop(const T* __restrict in, T* __restrict out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
}

template <typename T, typename F>
void map2_loop(const T* __restrict a, const T* __restrict b, T* __restrict out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

// out = f(self) elementwise; f is called with float or double.
template <typename F>
Tensor map1(const char* op, const LoopNames& names, const Tensor& self, F f) {
  STRATA_ZONE(zone, Layer::kLibrary, loop_name(self.dtype(), names.native, names.bf16, names.f16));
  check_cpu_input(op, self);
  const Tensor x = widen_to_f32(self);
  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (x.dtype() == DType::kF32) {
    map_loop(x.data<float>(), out.data<float>(), x.numel(), f);
  } else {
    map_loop(x.data<double>(), out.data<double>(), x.numel(), f);
  }
  return round_from_f32(std::move(out), self.dtype());
}

// Note [Broadcasting in the CPU kernels]
// Operands of different shapes (docs/broadcasting.md) are not copied to the output's shape: each is
// expanded to it as a view (views::expand: stride 0 along the broadcast dims, new dims in front, no data
// moved; its zone shows under the op's), and this loop reads the views through their strides, as
// PyTorch's TensorIterator reads a broadcast operand. The innermost dim is the loop's, so [3,4] + [4]
// reads the [4] row again for every output row without materialising [3,4]. Same-shape operands keep the
// contiguous loop (map2_loop), which the compiler vectorises.
template <typename T, typename F>
void broadcast_loop(const Tensor& a, const Tensor& b, T* __restrict out, F f) {
  int64_t size[4] = {1, 1, 1, 1}, sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0};
  const int pad = 4 - a.dim();  // a and b have the output's rank after expand
  for (int i = 0; i < a.dim(); ++i) {
    size[pad + i] = a.size(i);
    sa[pad + i] = a.stride(i);
    sb[pad + i] = b.stride(i);
  }
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  for (int64_t i0 = 0; i0 < size[0]; ++i0)
    for (int64_t i1 = 0; i1 < size[1]; ++i1)
      for (int64_t i2 = 0; i2 < size[2]; ++i2) {
        const T* ra = pa + i0 * sa[0] + i1 * sa[1] + i2 * sa[2];
        const T* rb = pb + i0 * sb[0] + i1 * sb[1] + i2 * sb[2];
        for (int64_t i3 = 0; i3 < size[3]; ++i3) *out++ = f(ra[i3 * sa[3]], rb[i3 * sb[3]]);
      }
}

// Whether map2's operands may broadcast: add, sub and mul do, as PyTorch's; a gradient op's operands are
// the gradient and a saved tensor of the same shape, so a difference there is a bug and is refused.
enum class Operands { kBroadcast, kSameShape };

// out = f(self, other) elementwise, for two tensors of one dtype and device whose shapes broadcast (or,
// for kSameShape, are identical).
template <typename F>
Tensor map2(const char* op, const LoopNames& names, const Tensor& self, const Tensor& other, F f,
            Operands operands = Operands::kBroadcast) {
  STRATA_ZONE(zone, Layer::kLibrary, loop_name(self.dtype(), names.native, names.bf16, names.f16));
  op_shapes::check_operands(op, check_cpu_input, self, other);
  const Shape shape = operands == Operands::kBroadcast ? op_shapes::broadcast(op, self.sizes(), other.sizes())
                                                       : op_shapes::same_shape(op, self.sizes(), other.sizes());
  const Tensor a = widen_to_f32(self), b = widen_to_f32(other);
  Tensor out = Tensor::empty(shape, a.dtype(), self.device());
  if (self.sizes() == other.sizes()) {
    if (a.dtype() == DType::kF32) {
      map2_loop(a.data<float>(), b.data<float>(), out.data<float>(), a.numel(), f);
    } else {
      map2_loop(a.data<double>(), b.data<double>(), out.data<double>(), a.numel(), f);
    }
    return round_from_f32(std::move(out), self.dtype());
  }
  const Tensor va = views::expand(a, shape), vb = views::expand(b, shape);
  STRATA_ZONE(loop_zone, Layer::kLibrary, "broadcast loop (expanded views read through their strides, no copy)");
  if (a.dtype() == DType::kF32) {
    broadcast_loop(va, vb, out.data<float>(), f);
  } else {
    broadcast_loop(va, vb, out.data<double>(), f);
  }
  return round_from_f32(std::move(out), self.dtype());
}

}  // namespace

Tensor add(const Tensor& self, const Tensor& other, double alpha) {
  return map2("add", {"add (cpu loop)", "add (cpu loop, bf16 widened to f32)", "add (cpu loop, f16 widened to f32)"},
              self, other, [alpha](auto a, auto b) { return a + decltype(a)(alpha) * b; });
}

Tensor mul(const Tensor& self, const Tensor& other) {
  return map2("mul", {"mul (cpu loop)", "mul (cpu loop, bf16 widened to f32)", "mul (cpu loop, f16 widened to f32)"},
              self, other, [](auto a, auto b) { return a * b; });
}

// One multiply per element, one rounding: the scaled gradient a backward pass needs exactly (AddBackward
// with alpha = 1e-8 computed as grad + (alpha - 1) * grad cancelled to 0 in f32).
Tensor mul_scalar(const Tensor& self, double other) {
  return map1("mul.Scalar",
              {"mul.Scalar (cpu loop)", "mul.Scalar (cpu loop, bf16 widened to f32)",
               "mul.Scalar (cpu loop, f16 widened to f32)"},
              self, [other](auto v) { return v * decltype(v)(other); });
}

// True division, one IEEE division per element in T (f32 for half types), as PyTorch's CPU div_true_kernel:
// x / 0 is +-inf, 0 / 0 NaN, signed zeros by the operands' signs. div.Scalar divides by the number rounded
// to T (not a multiply by its reciprocal, which rounds twice).
Tensor div(const Tensor& self, const Tensor& other) {
  return map2("div", {"div (cpu loop)", "div (cpu loop, bf16 widened to f32)", "div (cpu loop, f16 widened to f32)"},
              self, other, [](auto a, auto b) { return a / b; });
}

Tensor div_scalar(const Tensor& self, double other) {
  return map1("div.Scalar",
              {"div.Scalar (cpu loop)", "div.Scalar (cpu loop, bf16 widened to f32)",
               "div.Scalar (cpu loop, f16 widened to f32)"},
              self, [other](auto v) { return v / decltype(v)(other); });
}

Tensor add_scalar(const Tensor& self, double number, double alpha) {
  const double other = number_in(self.dtype(), number);  // Note [A number added to a half tensor]
  return map1("add.Scalar",
              {"add.Scalar (cpu loop)", "add.Scalar (cpu loop, bf16 widened to f32)",
               "add.Scalar (cpu loop, f16 widened to f32)"},
              self, [other, alpha](auto v) {
                using T = decltype(v);
                return v + T(alpha) * T(other);  // add's a + alpha * b with b the scalar
              });
}

// a - alpha * b as a + (-alpha) * b, as PyTorch's sub calls add's kernel: the same rounding (negation is
// exact), so sub and add agree on every input, signed zeros included.
Tensor sub(const Tensor& self, const Tensor& other, double alpha) {
  return map2("sub", {"sub (cpu loop)", "sub (cpu loop, bf16 widened to f32)", "sub (cpu loop, f16 widened to f32)"},
              self, other, [alpha](auto a, auto b) { return a + decltype(a)(-alpha) * b; });
}

Tensor sub_scalar(const Tensor& self, double number, double alpha) {
  const double other = number_in(self.dtype(), number);  // Note [A number added to a half tensor]
  return map1("sub.Scalar",
              {"sub.Scalar (cpu loop)", "sub.Scalar (cpu loop, bf16 widened to f32)",
               "sub.Scalar (cpu loop, f16 widened to f32)"},
              self, [other, alpha](auto v) {
                using T = decltype(v);
                return v + T(-alpha) * T(other);
              });
}

// PyTorch's pow with a number (aten/src/ATen/native/cpu/PowKernel.cpp and pow_out): 0 fills ones, 1 copies,
// 0.5 / -0.5 / -1 are sqrt / rsqrt / reciprocal, 2, 3 and -2 are multiplies, the rest std::pow. Not only
// faster: the special values follow those functions (sqrt(-0) = -0 and sqrt(-inf) = NaN, where pow gives
// +0 and +inf), so strata agrees with PyTorch on them. The compiled path lowers pow the same way.
template <typename T>
T pow_value(T x, double exponent) {
  if (exponent == 0.0) return T(1);
  if (exponent == 1.0) return x;
  if (exponent == 0.5) return std::sqrt(x);
  if (exponent == -0.5) return T(1) / std::sqrt(x);
  if (exponent == -1.0) return T(1) / x;
  if (exponent == 2.0) return x * x;
  if (exponent == 3.0) return x * x * x;
  if (exponent == -2.0) return T(1) / (x * x);
  return std::pow(x, T(exponent));
}

Tensor pow(const Tensor& self, double exponent) {
  return map1("pow", {"pow (cpu loop)", "pow (cpu loop, bf16 widened to f32)", "pow (cpu loop, f16 widened to f32)"},
              self, [exponent](auto v) { return pow_value(v, exponent); });
}

// ---- The unary ops of layers/kernels/pointwise_math.h ------------------------------------------------------
// Note [Pointwise math written once]: the loop is map1's (map2's for a gradient, same shapes only), the
// math the functor's; every functor in the lists is instantiated here, where the loops are built with -O3.

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
  return map1(Fn::kName, loop_names_of<Fn>(Fn::kName), self, [](auto v) { return Fn::forward(v); });
}

template <typename Fn>
Tensor unary_gradient(const Tensor& grad_output, const Tensor& saved) {
  return map2(Fn::kGradientName, loop_names_of<std::pair<Fn, GradientTag>>(Fn::kGradientName), grad_output, saved,
              [](auto g, auto s) { return Fn::gradient(g, s); }, Operands::kSameShape);
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
