// Private to layers/kernels/cuda: pow with a number, as pointwise.cu's pow_kernel computes each element.
// A header the host compiles too, so that the choice of formula is tested without a GPU
// (tests/kernels/cuda/pow_value_test.cpp).
#pragma once

#include <cmath>

#include "layers/kernels/pointwise_math.h"  // STRATA_HOST_DEVICE

namespace strata::kernels::cuda {

// float calls the float function on both sides (sqrtf, powf), as the CPU kernel's std::sqrt(float) and
// std::pow(float, float) do.
STRATA_HOST_DEVICE inline float sqrt_of(float x) { return ::sqrtf(x); }
STRATA_HOST_DEVICE inline double sqrt_of(double x) { return ::sqrt(x); }
STRATA_HOST_DEVICE inline float pow_of(float x, float e) { return ::powf(x, e); }
STRATA_HOST_DEVICE inline double pow_of(double x, double e) { return ::pow(x, e); }

// PyTorch's special exponents, as the CPU kernel takes them (layers/kernels/cpu/pointwise.cpp's
// pow_value): 0 gives ones, 1 copies, 0.5 / -0.5 / -1 are sqrt / 1/sqrt / reciprocal, 2, 3 and -2
// multiplies, the rest pow in the computation type Acc. The exponent is compared as the double the caller
// gave, as torch's Scalar is, and rounded to Acc only for pow: 0.5 + 1e-12 rounds to 0.5f, but it is
// pow's exponent, and pow(-0, e) = +0 and pow(-inf, e) = +inf where sqrt gives -0 and NaN.
template <typename Acc>
STRATA_HOST_DEVICE Acc pow_value(Acc x, double exponent) {
  if (exponent == 0.0) return Acc(1);
  if (exponent == 1.0) return x;
  if (exponent == 0.5) return sqrt_of(x);
  if (exponent == -0.5) return Acc(1) / sqrt_of(x);
  if (exponent == -1.0) return Acc(1) / x;
  if (exponent == 2.0) return x * x;
  if (exponent == 3.0) return x * x * x;
  if (exponent == -2.0) return Acc(1) / (x * x);
  return pow_of(x, static_cast<Acc>(exponent));
}

}  // namespace strata::kernels::cuda
