// pow with a number as the CUDA kernel computes it (layers/kernels/cuda/pow_value.h), on the host: the
// formula is chosen on the double exponent, as the CPU kernel and torch choose it. The kernel itself is
// checked on a GPU in pointwise_gpu_test.cpp.
#include "layers/kernels/cuda/pow_value.h"

#include <doctest/doctest.h>

#include <cmath>
#include <initializer_list>
#include <limits>

using strata::kernels::cuda::pow_value;

namespace {

// Same value, NaN for NaN, and the same sign of zero.
template <typename T>
bool same(T got, T want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

template <typename T>
void check_specials_of_type() {
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  const T xs[] = {nan, T(-0.0), T(0.0), inf, -inf, T(-2), T(1.5), T(0.25)};
  for (T x : xs) {
    CAPTURE(x);
    // The exact special exponents: the formulas (sqrt(-0) = -0, sqrt(-inf) = NaN, 1/sqrt(-0) = -inf).
    CHECK(same(pow_value<T>(x, 0.0), T(1)));
    CHECK(same(pow_value<T>(x, 1.0), x));
    CHECK(same(pow_value<T>(x, 0.5), T(std::sqrt(x))));
    CHECK(same(pow_value<T>(x, -0.5), T(T(1) / std::sqrt(x))));
    CHECK(same(pow_value<T>(x, -1.0), T(T(1) / x)));
    CHECK(same(pow_value<T>(x, 2.0), T(x * x)));
    CHECK(same(pow_value<T>(x, -2.0), T(T(1) / (x * x))));
    // An exponent that is none of them is pow's, even where it rounds to one in T.
    for (double e : {0.5 + 1e-12, -0.5 - 1e-12, 1.7, -2.5}) {
      CAPTURE(e);
      CHECK(same(pow_value<T>(x, e), T(std::pow(x, static_cast<T>(e)))));
    }
  }
}

}  // namespace

TEST_CASE("pow_value: the special exponents are the double ones, the rest pow in the computation type") {
  check_specials_of_type<float>();
  check_specials_of_type<double>();
  // What the choice on the double decides: 0.5 + 1e-12 is 0.5f in f32, and pow(-0, e) = +0 and
  // pow(-inf, e) = +inf where sqrt gives -0 and NaN (the kernel compared the f32-rounded exponent).
  CHECK(static_cast<float>(0.5 + 1e-12) == 0.5f);
  CHECK(same(pow_value<float>(-0.0f, 0.5 + 1e-12), 0.0f));
  CHECK(same(pow_value<float>(-std::numeric_limits<float>::infinity(), 0.5 + 1e-12),
             std::numeric_limits<float>::infinity()));
  CHECK(same(pow_value<float>(-0.0f, -0.5 - 1e-12), std::numeric_limits<float>::infinity()));
  CHECK(same(pow_value<float>(-0.0f, 0.5), -0.0f));
}
