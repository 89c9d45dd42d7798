// Vectors for the functors of layers/kernels/pointwise_math.h (Note [One loop source per instruction set]
// in loops.h): included by loops.cpp only, in its AVX2 and AVX-512 builds.
//
// Vec<T> holds one register of T (GCC's vector extension, which Clang speaks too) and has the operators
// and the *_of calls the functors use, so `Fn::forward(Vec<float>)` compiles from the same text as
// `Fn::forward(float)`: arithmetic lane by lane, a comparison gives a Mask, select_of picks lanes by it
// (found by argument-dependent lookup), exp_of / pow_of call SLEEF's functions for this instruction set
// (1 ulp), and so do erf_of and tanh_of for f64 (tanh SLEEF's 3.5-ulp one); f32 erf and tanh are
// math_f32.h's (Note [A faster erf for f32], Note [exp and tanh for f32]). The AVX2 build uses SLEEF's
// avx2 variants, the AVX-512 build its avx512f ones; both need a CPU that runs them, which loops.cpp's
// caller checked.
#pragma once

#include <immintrin.h>
#include <sleef.h>

#include <cstdint>
#include <cstring>

// math_f32.h's multiply-add, for this build's vector width.
#if STRATA_CPU_VECTOR_BYTES == 64
typedef float StrataF32Vector __attribute__((vector_size(64)));
static inline StrataF32Vector strata_fma(StrataF32Vector a, StrataF32Vector b, StrataF32Vector c) {
  return (StrataF32Vector)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
}
#else
typedef float StrataF32Vector __attribute__((vector_size(32)));
static inline StrataF32Vector strata_fma(StrataF32Vector a, StrataF32Vector b, StrataF32Vector c) {
  return (StrataF32Vector)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
}
#endif
#include "layers/kernels/cpu/vectorized/math_f32.h"

namespace strata::kernels::cpu::vectorized::STRATA_CPU_CAPABILITY {

#if STRATA_CPU_VECTOR_BYTES == 64
inline constexpr int kBytes = 64;
#else
inline constexpr int kBytes = 32;
#endif

template <typename T>
struct Lanes;
template <>
struct Lanes<float> {
  typedef float Raw __attribute__((vector_size(kBytes)));
  typedef int32_t Bits __attribute__((vector_size(kBytes)));
};
template <>
struct Lanes<double> {
  typedef double Raw __attribute__((vector_size(kBytes)));
  typedef int64_t Bits __attribute__((vector_size(kBytes)));
};

template <typename T>
struct Mask {
  typename Lanes<T>::Bits bits;  // every bit set in a lane that is true
};

template <typename T>
struct Vec {
  using Raw = typename Lanes<T>::Raw;
  using Bits = typename Lanes<T>::Bits;
  static constexpr int kLanes = kBytes / int(sizeof(T));
  Raw v;

  Vec() = default;
  Vec(T s) {  // NOLINT(google-explicit-constructor): the functors write T(0.5) for a broadcast constant
    for (int i = 0; i < kLanes; ++i) v[i] = s;
  }
  explicit Vec(Raw r) : v(r) {}

  static Vec load(const T* p) {
    Vec r;
    std::memcpy(&r.v, p, sizeof(Raw));
    return r;
  }
  void store(T* p) const { std::memcpy(p, &v, sizeof(Raw)); }

  friend Vec operator+(Vec a, Vec b) { return Vec(a.v + b.v); }
  friend Vec operator-(Vec a, Vec b) { return Vec(a.v - b.v); }
  friend Vec operator*(Vec a, Vec b) { return Vec(a.v * b.v); }
  friend Vec operator/(Vec a, Vec b) { return Vec(a.v / b.v); }
  friend Vec operator-(Vec a) { return Vec(-a.v); }
  friend Mask<T> operator<(Vec a, Vec b) { return {Bits(a.v < b.v)}; }
  friend Mask<T> operator<=(Vec a, Vec b) { return {Bits(a.v <= b.v)}; }
  friend Mask<T> operator>(Vec a, Vec b) { return {Bits(a.v > b.v)}; }
  friend Mask<T> operator>=(Vec a, Vec b) { return {Bits(a.v >= b.v)}; }
};

// `condition ? a : b` lane by lane: the bits of a where the mask is set, of b elsewhere (NaN and -0.0 pass
// through unchanged, as the scalar select does).
template <typename T>
Vec<T> select_of(Mask<T> m, Vec<T> a, Vec<T> b) {
  using Bits = typename Lanes<T>::Bits;
  using Raw = typename Lanes<T>::Raw;
  return Vec<T>(Raw((Bits(a.v) & m.bits) | (Bits(b.v) & ~m.bits)));
}

#if STRATA_CPU_VECTOR_BYTES == 64
#define STRATA_SLEEF_F(name, ulp) Sleef_##name##f16_##ulp##avx512f
#define STRATA_SLEEF_D(name, ulp) Sleef_##name##d8_##ulp##avx512f
using NativeF = __m512;
using NativeD = __m512d;
inline Vec<float> sqrt_of(Vec<float> x) { return Vec<float>(Vec<float>::Raw(_mm512_sqrt_ps(NativeF(x.v)))); }
inline Vec<double> sqrt_of(Vec<double> x) { return Vec<double>(Vec<double>::Raw(_mm512_sqrt_pd(NativeD(x.v)))); }
#else
#define STRATA_SLEEF_F(name, ulp) Sleef_##name##f8_##ulp##avx2
#define STRATA_SLEEF_D(name, ulp) Sleef_##name##d4_##ulp##avx2
using NativeF = __m256;
using NativeD = __m256d;
inline Vec<float> sqrt_of(Vec<float> x) { return Vec<float>(Vec<float>::Raw(_mm256_sqrt_ps(NativeF(x.v)))); }
inline Vec<double> sqrt_of(Vec<double> x) { return Vec<double>(Vec<double>::Raw(_mm256_sqrt_pd(NativeD(x.v)))); }
#endif

#define STRATA_SLEEF_UNARY(fn, name, ulp)                                                                 \
  inline Vec<float> fn(Vec<float> x) { return Vec<float>(Vec<float>::Raw(STRATA_SLEEF_F(name, ulp)(NativeF(x.v)))); } \
  inline Vec<double> fn(Vec<double> x) { return Vec<double>(Vec<double>::Raw(STRATA_SLEEF_D(name, ulp)(NativeD(x.v)))); }
STRATA_SLEEF_UNARY(exp_of, exp, u10)
#undef STRATA_SLEEF_UNARY
// tanh: f32 by Note [exp and tanh for f32]; f64 SLEEF's 3.5-ulp function, which costs a third of its
// 1-ulp one and is as accurate as the f64 tolerance needs (libm's is within 2 ulp).
inline Vec<float> tanh_of(Vec<float> x) { return Vec<float>(strata_tanh_f32(x.v)); }
inline Vec<double> tanh_of(Vec<double> x) {
  return Vec<double>(Vec<double>::Raw(STRATA_SLEEF_D(tanh, u35)(NativeD(x.v))));
}

// erf: f32 by Note [A faster erf for f32] (math_f32.h), f64 SLEEF's 1-ulp function.
inline Vec<float> erf_of(Vec<float> x) { return Vec<float>(strata_erf_f32(x.v)); }
inline Vec<double> erf_of(Vec<double> x) {
  return Vec<double>(Vec<double>::Raw(STRATA_SLEEF_D(erf, u10)(NativeD(x.v))));
}

inline Vec<float> pow_of(Vec<float> x, Vec<float> y) {
  return Vec<float>(Vec<float>::Raw(STRATA_SLEEF_F(pow, u10)(NativeF(x.v), NativeF(y.v))));
}
inline Vec<double> pow_of(Vec<double> x, Vec<double> y) {
  return Vec<double>(Vec<double>::Raw(STRATA_SLEEF_D(pow, u10)(NativeD(x.v), NativeD(y.v))));
}

}  // namespace strata::kernels::cpu::vectorized::STRATA_CPU_CAPABILITY
