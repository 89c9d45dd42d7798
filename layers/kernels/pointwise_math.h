// Note [Pointwise math written once]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The scalar math of the unary pointwise ops, written once for both backends, as ATen's cpu_kernel and
// gpu_kernel take one functor: the CPU loop (layers/kernels/cpu/pointwise.cpp: `unary<Fn>`, over f32 or
// f64, half types widened to f32) and the CUDA kernel (layers/kernels/cuda/pointwise.cu: `launch_unary<Fn>`,
// a grid-stride loop that loads half types as f32) instantiate every functor in UnaryMath and
// UnaryGradientMath below. Each functor gives
//   kName            the operator's name (zone names: "gelu (cpu loop)", "gelu_kernel<<<>>>")
//   forward(x)       y = f(x), in T = float or double
//   gradient(g, s)   (optional) the gradient op's value: g * f'(x), from the saved tensor s, which is x or,
//                    for ops that save their result (tanh), y; kGradientName names that operator
//   kFormula, kGradientFormula
//                    f(x) and the gradient as a reader writes them, for the op's line of `strata trace
//                    --help` (Note [An op's spec beside the frontend] in layers/frontend/specs/spec_format.h)
// A new unary op is a functor here, one entry in each list, and its declaration in layers/ops (its CLI
// spec is the frontend's default for a functor op); the float64 reference stays apart (layers/kernels/reference shares no code with any backend).
//
// The functors use arithmetic, the *_of calls below and nothing else, so that the compiled path can also
// evaluate them on source text (layers/compiler/fusion.cpp) and fuse an op with no lowering of its own,
// and so that the CPU's vector loops evaluate them on vectors of T (layers/kernels/cpu/vectorized: there
// the *_of calls are SLEEF's).
// The libm calls go through the overloads below, so that float calls the float function (erff, expf,
// tanhf) on the host as std::erf(float) does and on the device as CUDA's erf(float) does: the results
// are those of the per-op loops these functors replaced, bit for bit.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define STRATA_HOST_DEVICE __host__ __device__
#else
#define STRATA_HOST_DEVICE
#endif

namespace strata::kernels::math {

STRATA_HOST_DEVICE inline float erf_of(float x) { return ::erff(x); }
STRATA_HOST_DEVICE inline double erf_of(double x) { return ::erf(x); }
STRATA_HOST_DEVICE inline float exp_of(float x) { return ::expf(x); }
STRATA_HOST_DEVICE inline double exp_of(double x) { return ::exp(x); }
STRATA_HOST_DEVICE inline float tanh_of(float x) { return ::tanhf(x); }
STRATA_HOST_DEVICE inline double tanh_of(double x) { return ::tanh(x); }
// `condition ? a : b`, as a call so that the compiled path's lowering can write it too (fusion.cpp).
template <typename T>
STRATA_HOST_DEVICE T select_of(bool condition, T a, T b) {
  return condition ? a : b;
}

struct Relu {
  static constexpr const char* kName = "relu";
  static constexpr bool kVectorMath = false;
  // `x < 0 ? 0 : x`, PyTorch's relu, rather than max(x, 0): NaN stays NaN (a diverging model must show),
  // -0.0 stays -0.0. Its gradient is threshold_backward, an op with a threshold argument of its own.
  template <typename T>
  STRATA_HOST_DEVICE static T forward(T x) {
    return select_of(x < T(0), T(0), x);
  }
};

struct Gelu {
  static constexpr const char* kName = "gelu";
  static constexpr bool kVectorMath = true, kGradientVectorMath = true;  // erf; erf and exp
  static constexpr const char* kGradientName = "gelu_backward";
  static constexpr const char* kFormula = "x * Phi(x) (exact, erf)";
  static constexpr const char* kGradientFormula = "grad * (Phi(x) + x phi(x))";
  // The exact form, as PyTorch's default (approximate='none'): x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)).
  template <typename T>
  STRATA_HOST_DEVICE static T forward(T x) {
    const T inv_sqrt2 = T(0.70710678118654752440);
    return T(0.5) * x * (T(1) + erf_of(x * inv_sqrt2));
  }
  // d/dx x * Phi(x) = Phi(x) + x * phi(x), from the saved input.
  template <typename T>
  STRATA_HOST_DEVICE static T gradient(T grad, T x) {
    const T inv_sqrt2 = T(0.70710678118654752440), inv_sqrt_2pi = T(0.39894228040143267794);
    const T cdf = T(0.5) * (T(1) + erf_of(x * inv_sqrt2));
    const T pdf = inv_sqrt_2pi * exp_of(T(-0.5) * x * x);
    return grad * (cdf + x * pdf);
  }
};

struct Tanh {
  static constexpr const char* kName = "tanh";
  static constexpr bool kVectorMath = true, kGradientVectorMath = false;  // tanh; 1 - y^2
  static constexpr const char* kGradientName = "tanh_backward";
  static constexpr const char* kGradientFormula = "grad * (1 - y^2)";  // tanh's own line is written by hand
  template <typename T>
  STRATA_HOST_DEVICE static T forward(T x) {
    return tanh_of(x);
  }
  // d/dx tanh(x) = 1 - tanh(x)^2, from the saved output y (PyTorch's tanh_backward(grad, output)).
  template <typename T>
  STRATA_HOST_DEVICE static T gradient(T grad, T y) {
    return grad * (T(1) - y * y);
  }
};

struct Silu {
  static constexpr const char* kName = "silu";
  static constexpr bool kVectorMath = true, kGradientVectorMath = true;  // exp
  static constexpr const char* kGradientName = "silu_backward";
  static constexpr const char* kFormula = "x * sigmoid(x)";
  static constexpr const char* kGradientFormula = "grad * s (1 + x (1 - s)), s = sigmoid(x)";
  // x * sigmoid(x) as PyTorch computes it, x / (1 + exp(-x)): -0.0 stays -0.0, -inf gives NaN (-inf / inf)
  // as in PyTorch, and a large negative x gives -0.0 once exp(-x) overflows.
  template <typename T>
  STRATA_HOST_DEVICE static T forward(T x) {
    return x / (T(1) + exp_of(-x));
  }
  // PyTorch's silu_backward: s = sigmoid(x), grad * s * (1 + x * (1 - s)), from the saved input.
  template <typename T>
  STRATA_HOST_DEVICE static T gradient(T grad, T x) {
    const T sigmoid = T(1) / (T(1) + exp_of(-x));
    return grad * sigmoid * (T(1) + x * (T(1) - sigmoid));
  }
};

struct Sigmoid {
  static constexpr const char* kName = "sigmoid";
  static constexpr bool kVectorMath = true, kGradientVectorMath = false;  // exp; y (1 - y)
  static constexpr const char* kGradientName = "sigmoid_backward";
  static constexpr const char* kFormula = "1 / (1 + exp(-x))";
  static constexpr const char* kGradientFormula = "grad * y (1 - y)";
  // 1 / (1 + exp(-x)), as PyTorch's CPU and CUDA kernels: a large negative x gives +0 once exp(-x)
  // overflows to inf, -inf gives 0, +inf gives 1, NaN stays NaN.
  template <typename T>
  STRATA_HOST_DEVICE static T forward(T x) {
    return T(1) / (T(1) + exp_of(-x));
  }
  // d/dx sigmoid(x) = y * (1 - y), from the saved output y (PyTorch's sigmoid_backward(grad, output)).
  template <typename T>
  STRATA_HOST_DEVICE static T gradient(T grad, T y) {
    return grad * (T(1) - y) * y;
  }
};

// Whether a functor's forward (kVectorMath) or gradient (kGradientVectorMath) calls erf_of, exp_of or
// tanh_of: on the CPU those are SLEEF's vector functions, and the library row says so.
template <typename Fn>
inline constexpr bool kCallsVectorMath = Fn::kVectorMath;
template <typename Fn>
inline constexpr bool kGradientCallsVectorMath = Fn::kGradientVectorMath;

// The functors each backend instantiates: every forward, and every gradient.
template <typename... Fns>
struct MathList {};
using UnaryMath = MathList<Relu, Gelu, Tanh, Silu, Sigmoid>;
using UnaryGradientMath = MathList<Gelu, Tanh, Silu, Sigmoid>;

}  // namespace strata::kernels::math
