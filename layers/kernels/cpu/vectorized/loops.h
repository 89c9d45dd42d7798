// The CPU backend's inner loops, built once per instruction set and chosen at run time (private to
// layers/kernels/cpu).
//
// Note [One loop source per instruction set]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// ATen compiles its CPU kernels once per CPU capability (DEFAULT, AVX2, AVX512) and picks one at run time;
// strata does the same with loops.cpp: built three times (layers/kernels/cpu/CMakeLists.txt), as the
// portable loop (baseline x86-64: the functors' scalar math, libm), with -mavx2 -mfma -mf16c (8 floats a vector)
// and with -mavx512f (16), each into a namespace of its own so no instruction of one build can reach
// another through an inline function. The vector builds evaluate the functors of
// layers/kernels/pointwise_math.h on vectors (vec.h): the same source that the CUDA kernel instantiates,
// with erf, exp, tanh and pow from SLEEF, the vector math library ATen's Vectorized<T> calls. Every element
// goes through the vector code, the last few too (loaded into a padded vector), so a result does not
// depend on where an element sits. Arithmetic is not contracted into FMAs (-ffp-contract=off), so add, mul,
// div and the gradient formulas round as the scalar loop does, bit for bit.
//
// The loops work on one contiguous range; splitting a call across threads is the caller's
// (Note [Intra-op threads] in lib/parallel.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "layers/kernels/pointwise_math.h"

namespace strata::kernels::cpu::vectorized {

enum class Isa { kPortable, kAvx2, kAvx512 };

// "portable", "AVX2", "AVX-512": how a library row names the loop that ran.
const char* isa_name(Isa isa);
// Whether this CPU (and its operating system) runs the build for `isa`.
bool cpu_runs(Isa isa);

template <typename... Fns>
constexpr size_t count_of(math::MathList<Fns...>) {
  return sizeof...(Fns);
}
inline constexpr size_t kUnaryCount = count_of(math::UnaryMath{});
inline constexpr size_t kGradientCount = count_of(math::UnaryGradientMath{});

// The index of functor Fn in a MathList (a compile error when absent).
template <typename Fn, typename First, typename... Rest>
constexpr size_t index_of(math::MathList<First, Rest...>) {
  if constexpr (std::is_same_v<Fn, First>) {
    return 0;
  } else {
    return 1 + index_of<Fn>(math::MathList<Rest...>{});
  }
}

template <typename T>
struct TypedLoops {
  std::array<void (*)(const T* in, T* out, int64_t n), kUnaryCount> unary;             // UnaryMath order
  std::array<void (*)(const T* g, const T* s, T* out, int64_t n), kGradientCount> gradient;  // UnaryGradientMath
  void (*add)(const T* a, const T* b, T alpha, T* out, int64_t n);  // a + alpha * b
  void (*mul)(const T* a, const T* b, T* out, int64_t n);
  void (*div)(const T* a, const T* b, T* out, int64_t n);
  void (*mul_scalar)(const T* a, T s, T* out, int64_t n);
  void (*div_scalar)(const T* a, T s, T* out, int64_t n);
  void (*add_scalar)(const T* a, T c, T* out, int64_t n);  // a + c
  // PyTorch's pow with a number: the special exponents as sqrt, reciprocal and multiplies, else pow.
  void (*pow)(const T* a, double exponent, T* out, int64_t n);  // chosen on the exponent as given
  void (*threshold_backward)(const T* g, const T* x, T threshold, T* out, int64_t n);
  void (*fill)(T* out, T value, int64_t n);
  double (*sum)(const T* x, int64_t n);                            // in double, one fixed order
  void (*accumulate)(const T* row, double* acc, int64_t n);        // acc[j] += row[j], in double
};

struct Loops {
  Isa isa = Isa::kPortable;
  TypedLoops<float> f32;
  TypedLoops<double> f64;
  // The half types to and from f32, rounding to nearest even (NaN stays NaN): F16C's instructions for f16
  // in the vector builds, bf16 by integer arithmetic the compiler vectorises; bit for bit the scalar
  // conversions of convert.cpp (for a NaN: a NaN).
  void (*f16_to_f32)(const uint16_t* in, float* out, int64_t n);
  void (*f32_to_f16)(const float* in, uint16_t* out, int64_t n);
  void (*bf16_to_f32)(const uint16_t* in, float* out, int64_t n);
  void (*f32_to_bf16)(const float* in, uint16_t* out, int64_t n);
  template <typename T>
  const TypedLoops<T>& of() const {
    if constexpr (std::is_same_v<T, float>) {
      return f32;
    } else {
      return f64;
    }
  }
};

// The loops of the widest instruction set this CPU runs, chosen on the first call; STRATA_CPU_ISA
// (portable, avx2, avx512) asks for a narrower one, as ATEN_CPU_CAPABILITY does.
const Loops& loops();
// The loops built for `isa` (tests compare every build this CPU runs with the portable one).
Loops loops_for(Isa isa);

// One per build of loops.cpp (loops_for is the way to reach them).
Loops make_loops_portable();
Loops make_loops_avx2();
Loops make_loops_avx512();

}  // namespace strata::kernels::cpu::vectorized
