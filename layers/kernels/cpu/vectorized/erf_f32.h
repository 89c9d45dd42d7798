// erf for f32 vectors from one exp: self-contained text (no includes, no namespace), because the compiled
// path's generated kernels embed it verbatim (layers/compiler/codegen.cpp, through the header CMake makes
// of it) so that a compiled gelu computes exactly what the eager loop computes.
//
// Note [A faster erf for f32]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// SLEEF's 1-ulp erff costs about 5 expf's, which made strata's f32 gelu 4x PyTorch's. ATen's vectorised
// f32 erf is the classic rational approximation of Abramowitz and Stegun (formula 7.1.26: erf(|x|) =
// 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-x^2), t = 1 / (1 + p |x|)), absolute error at most
// 1.5e-7 (about 1.3 ulp of 1), and strata's f32 vector loops use it too: one exp (SLEEF's), a division and
// a few multiply-adds. Its error is absolute, not relative: erf(1e-3) is off by ~1e-4 relative. That is
// what gelu and its gradient need (they use 1 + erf) and what the f32 float64-reference tolerance (1e-5)
// checks; the f64 loops keep SLEEF's 1-ulp erf. NaN stays NaN, erf(+-inf) = +-1, erf(-0) = -0.
// V: a vector type with +, -, *, / and V(constant); abs_of, copysign_of and exp_of on it.
#pragma once

template <typename V, typename Exp, typename Abs, typename CopySign>
inline V strata_erf_f32(V x, Exp exp_of, Abs abs_of, CopySign copysign_of) {
  const V one = V(1.0f);
  const V a = abs_of(x);
  const V t = one / (one + V(0.3275911f) * a);
  V r = V(1.061405429f) * t + V(-1.453152027f);
  r = r * t + V(1.421413741f);
  r = r * t + V(-0.284496736f);
  r = r * t + V(0.254829592f);
  const V e = exp_of(V(0.0f) - x * x);
  return copysign_of(one - (t * r) * e, x);
}
