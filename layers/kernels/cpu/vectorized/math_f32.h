// erf (with its exp) and tanh on f32 vectors: self-contained text (no includes, no namespace), because
// the compiled path's generated kernels embed it verbatim (layers/compiler/codegen.cpp, through the
// header CMake makes of it) so that a compiled gelu or tanh computes exactly what the eager loop does.
// F is a GCC vector of floats (vector_size 32 or 64); the includer first defines
// `static inline F strata_fma(F a, F b, F c)`, a * b + c rounded once (the AVX2 / AVX-512 instruction):
// the multiply-adds here are explicit, so their rounding does not depend on -ffp-contract.
//
// Note [A faster erf for f32]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// SLEEF's 1-ulp erff costs about 5 expf's, which made strata's f32 gelu 4x PyTorch's. ATen's vectorised
// f32 erf is the classic rational approximation of Abramowitz and Stegun (formula 7.1.26: erf(|x|) =
// 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-x^2), t = 1 / (1 + p |x|)), absolute error at most
// 1.5e-7 (about 1.3 ulp of 1), and strata's f32 vector loops use it too: one exp, a division and a few
// multiply-adds. Its error is absolute, not relative: erf(1e-3) is off by ~1e-4 relative. That is what
// gelu and its gradient need (they use 1 + erf) and what the f32 float64-reference tolerance (1e-5)
// checks; the f64 loops keep SLEEF's 1-ulp erf. NaN stays NaN, erf(+-inf) = +-1, erf(-0) = -0.
// The exp inside is strata_exp_f32_in_range, inlined (a call to SLEEF's spills every vector register).
//
// Note [exp and tanh for f32]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// strata_exp_f32_in_range (erf's exp): x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so n ln2 is
// exact), e^r by a degree-6 polynomial fitted for relative error on that interval, times 2^n made in the
// exponent bits. Measured against float64 over 4M points of [-87, 88]: at most 0.87 ulp. Its caller keeps
// x where 2^n is a normal float; the other f32 loops call SLEEF's expf (1 ulp, every x).
// strata_tanh_f32: tanh(|x|) = |x| P(x^2) / Q(x^2), P and Q of degree 4, fitted for relative error on
// [0, 9.02] (past 9.02 tanh rounds to 1 in f32), the sign put back: one division and eight multiply-adds
// where SLEEF's 3.5-ulp tanhf costs 1.6x as much (0.27 against 0.42 ns per float on AVX-512 here).
// Measured against float64 over 2.2M points of [0, 10] (dense near 0): at most 5.2 ulp (3.1e-7 relative),
// 0.7 on average; libm's tanhf is within 2 ulp, SLEEF's within 3.5. The f32 tolerance against the float64
// reference is 1e-5. tanh(-0) = -0, tanh(+-inf) = +-1, NaN stays NaN.
#pragma once

// a where the lanes of m are set, b elsewhere; I is the integer vector of F's width.
template <typename F, typename I>
static inline F strata_select(I m, F a, F b) {
  return (F)(((I)a & m) | ((I)b & ~m));
}

// e^x for x in [-87.33654, 88.72283], where 2^n is a normal float; no check of the range.
template <typename F>
static inline F strata_exp_f32_in_range(F x) {
  typedef decltype(x < x) I;
  // k holds round(x log2 e) + 127 in its low mantissa bits: 1.5 * 2^23 has an ulp of 1.
  const F magic = F{} + 12583039.0f;  // 1.5 * 2^23 + 127
  const F k = strata_fma(x, F{} + 1.44269504f, magic);
  const F n = k - magic;
  F r = strata_fma(n, F{} - 0.693359375f, x);
  r = strata_fma(n, F{} + 2.12194440e-4f, r);
  F p = strata_fma(r, F{} + 0.0013814663f, F{} + 0.008368711f);
  p = strata_fma(p, r, F{} + 0.041668385f);
  p = strata_fma(p, r, F{} + 0.16666521f);
  p = strata_fma(p, r, F{} + 0.49999994f);
  p = strata_fma(p, r, F{} + 1.0f);
  p = strata_fma(p, r, F{} + 1.0f);
  return p * (F)((I)k << 23);  // 2^n: n + 127 in the exponent field
}

template <typename F>
static inline F strata_erf_f32(F x) {
  typedef decltype(x < x) I;
  const I sign = (I)(-F{});  // -0.0: the sign bit alone
  const F one = F{} + 1.0f;
  const F a = (F)((I)x & ~sign);
  const F t = one / strata_fma(F{} + 0.3275911f, a, one);
  F r = strata_fma(F{} + 1.061405429f, t, F{} - 1.453152027f);
  r = strata_fma(r, t, F{} + 1.421413741f);
  r = strata_fma(r, t, F{} - 0.284496736f);
  r = strata_fma(r, t, F{} + 0.254829592f);
  // exp(-x^2) with -x^2 held above the range's end: past it the term is below 1e-38 against 1, and a NaN
  // or infinite x is settled by t (NaN, or 0).
  const F nx2 = F{} - x * x, lo = F{} - 87.33654f;
  const F e = strata_exp_f32_in_range(strata_select(nx2 < lo, lo, nx2));
  const F m = one - (t * r) * e;
  return (F)(((I)m & ~sign) | ((I)x & sign));
}

template <typename F>
static inline F strata_tanh_f32(F x) {
  typedef decltype(x < x) I;
  const I sign = (I)(-F{});  // -0.0: the sign bit alone
  F a = (F)((I)x & ~sign);
  a = strata_select(a < 9.02f, a, F{} + 9.02f);  // NaN becomes 9.02 here and is put back below
  const F s = a * a;
  F num = strata_fma(s, F{} + 1.3319277e-08f, F{} + 2.0583648e-05f);
  num = strata_fma(num, s, F{} + 0.0034940455f);
  num = strata_fma(num, s, F{} + 0.13379727f);
  num = strata_fma(num, s, F{} + 1.0f);
  F den = strata_fma(s, F{} + 7.7621087e-07f, F{} + 0.000328311f);
  den = strata_fma(den, s, F{} + 0.025871115f);
  den = strata_fma(den, s, F{} + 0.46713042f);
  den = strata_fma(den, s, F{} + 1.0f);
  F r = (a * num) / den;
  r = strata_select(r < 1.0f, r, F{} + 1.0f);
  r = strata_select(x != x, x, r);
  return (F)(((I)r & ~sign) | ((I)x & sign));
}
