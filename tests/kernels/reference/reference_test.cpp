// The float64 reference itself (layers/kernels/reference): hand-computed values, the error measure and
// the half-precision conversions the frontend and --check rely on.
#include "layers/kernels/reference/reference.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace strata;

namespace {

Tensor make(const Shape& s, std::vector<double> values, DType dtype = DType::kF64) {
  Tensor t = Tensor::empty(s, dtype, kCPU);
  for (size_t i = 0; i < values.size(); ++i) {
    const auto value = static_cast<float>(values[i]);
    switch (dtype) {
      case DType::kF64: t.data<double>()[i] = values[i]; break;
      case DType::kF32: t.data<float>()[i] = value; break;
      case DType::kF16: t.data<uint16_t>()[i] = reference::float_to_half(value); break;
      case DType::kBF16: t.data<uint16_t>()[i] = reference::float_to_bf16(value); break;
    }
  }
  return t;
}

// A 1-D tensor of `values` in `dtype`.
Tensor vec(std::vector<double> values, DType dtype) {
  Shape s;
  s.ndim = 1;
  s[0] = static_cast<int64_t>(values.size());
  return make(s, std::move(values), dtype);
}

}  // namespace

TEST_CASE("reference values computed by hand") {
  Tensor a = make(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = make(Shape{3, 2}, {7, 8, 9, 10, 11, 12});
  CHECK(reference::matmul(a, b) == std::vector<double>{58, 64, 139, 154});
  // linear: x [2,3] times w [2,3]^T plus bias.
  Tensor w = make(Shape{2, 3}, {1, 0, -1, 0.5, 0.5, 0.5});
  Tensor bias = make(Shape{2}, {10, -10});
  CHECK(reference::linear(a, w, bias) == std::vector<double>{8, -7, 8, -2.5});
  CHECK(reference::relu(make(Shape{4}, {-1, 0, 2, -0.5})) == std::vector<double>{0, 0, 2, 0});
  // gelu(x) = x * Phi(x), with Phi(1) = 0.841344746068543 and Phi(-1) = 1 - Phi(1).
  const std::vector<double> g = reference::gelu(make(Shape{3}, {0, 1, -1}));
  CHECK(g[0] == 0.0);
  CHECK(g[1] == doctest::Approx(0.841344746068543).epsilon(1e-14));
  CHECK(g[2] == doctest::Approx(-0.158655253931457).epsilon(1e-13));
  CHECK(reference::add(make(Shape{2}, {1, 2}), make(Shape{2}, {3, 4}), -2) == std::vector<double>{-5, -6});
  // conv 1x1x3x3 with a 2x2 kernel of ones, padding 0: sums of 2x2 windows.
  Tensor img = make(Shape{1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor ones = make(Shape{1, 1, 2, 2}, {1, 1, 1, 1});
  CHECK(reference::conv2d(img, ones, Tensor(), {1}, {0}, {1}, 1) == std::vector<double>{12, 16, 24, 28});
  // With padding 1 and stride 2: windows at (-1,-1), (-1,1), (1,-1), (1,1).
  CHECK(reference::conv2d(img, ones, Tensor(), {2}, {1}, {1}, 1) == std::vector<double>{1, 5, 11, 28});
  // Dilation 2: the 2x2 kernel's taps are the corners, 1 + 3 + 7 + 9.
  CHECK(reference::conv2d(img, ones, Tensor(), {1}, {0}, {2}, 1) == std::vector<double>{20});
  // Stride (1, 2), padding (0, 1): windows at rows 0, 1 and columns -1, 1.
  CHECK(reference::conv2d(img, ones, Tensor(), {1, 2}, {0, 1}, {1}, 1) == std::vector<double>{5, 16, 11, 28});
  // Groups 2: each output channel reads its own input channel only.
  CHECK(reference::conv2d(make(Shape{1, 2, 2, 2}, {1, 2, 3, 4, 10, 20, 30, 40}), make(Shape{2, 1, 1, 1}, {1, 2}),
                          Tensor(), {1}, {0}, {1}, 2) == std::vector<double>{1, 2, 3, 4, 20, 40, 60, 80});
}

TEST_CASE("the tanh GELU's references, and their gradients, computed by hand") {
  const Tensor a = make(Shape{3}, {1, -2, 0.5}), b = make(Shape{3}, {4, 3, -2});
  CHECK(reference::mul(a, b) == std::vector<double>{4, -6, -1});
  CHECK(reference::mul_scalar(a, -2) == std::vector<double>{-2, 4, -1});
  CHECK(reference::add_scalar(a, 3, 2) == std::vector<double>{7, 4, 6.5});
  CHECK(reference::sub(a, b, 0.5) == std::vector<double>{-1, -3.5, 1.5});
  CHECK(reference::sub_scalar(a, 3, 2) == std::vector<double>{-5, -8, -5.5});
  CHECK(reference::pow(a, 3) == std::vector<double>{1, -8, 0.125});
  CHECK(reference::pow(a, -1) == std::vector<double>{1, -0.5, 2});
  // tanh(1) = 0.761594155955765, tanh(0.5) = 0.462117157260010; odd.
  const std::vector<double> t = reference::tanh(a);
  CHECK(t[0] == doctest::Approx(0.761594155955765).epsilon(1e-14));
  CHECK(t[1] == doctest::Approx(-0.964027580075817).epsilon(1e-14));
  CHECK(t[2] == doctest::Approx(0.462117157260010).epsilon(1e-14));
  CHECK(reference::tanh_backward(b, make(Shape{3}, {0.5, 1, 0})) == std::vector<double>{3, 0, -2});
  const Tensor g = make(Shape{3}, {1, 2, -1});
  CHECK(reference::mul_backward(g, a, b) == reference::Grads{{4, 6, 2}, {1, -4, -0.5}});
  CHECK(reference::sub_backward(g, a, b, 0.5) == reference::Grads{{1, 2, -1}, {-0.5, -1, 0.5}, {}});
  // d/dx x^3 = 3 x^2; exponent 0 gives zeros, not 0 * x^-1 (NaN at 0).
  CHECK(reference::pow_backward(g, a, 3)[0] == std::vector<double>{3, 24, -0.75});
  CHECK(reference::pow_backward(g, make(Shape{3}, {0, 1, 2}), 0)[0] == std::vector<double>{0, 0, 0});
  // div: true division; d self = g / b, d other = -g * a / b^2 (every value exact in binary).
  const Tensor d = make(Shape{3}, {4, -0.5, 2});
  CHECK(reference::div(a, d) == std::vector<double>{0.25, 4, 0.25});
  CHECK(reference::div_scalar(a, -4) == std::vector<double>{-0.25, 0.5, -0.125});
  CHECK(reference::div_backward(g, a, d) == reference::Grads{{0.25, -4, -0.5}, {-0.0625, 16, 0.125}});
  CHECK(reference::div_scalar_backward(g, a, -4) == reference::Grads{{-0.25, -0.5, 0.25}, {}});
  // Broadcast: [2,1] / [3] reads each row of the first against the whole second; the divisor's gradient
  // is summed over the rows.
  const Tensor col = make(Shape{2, 1}, {1, -2}), row = make(Shape{3}, {1, 2, 4});
  CHECK(reference::div(col, row) == std::vector<double>{1, 0.5, 0.25, -2, -1, -0.5});
  const Tensor ones6 = make(Shape{2, 3}, {1, 1, 1, 1, 1, 1});
  CHECK(reference::div_backward(ones6, col, row) ==
        reference::Grads{{1.75, 1.75}, {1.0, 0.25, 0.0625}});
  // 1 - tanh(1)^2 = 0.419974341614026.
  CHECK(reference::tanh_backward_of(g, a)[0][0] == doctest::Approx(0.419974341614026).epsilon(1e-14));
}

TEST_CASE("relative_error: zero for equal, scale-free, infinite for NaN, refuses a size mismatch") {
  Tensor t = make(Shape{2}, {3, 4});
  CHECK(reference::relative_error(t, {3, 4}) == 0.0);
  // ||ref|| = 0: measured against the inputs' scale (0.25 per element), never divided by zero.
  CHECK(reference::relative_error(t, {0, 0}) == doctest::Approx(5.0 / std::sqrt(2 * 0.0625)));
  CHECK(reference::relative_error(t, {3, 5}) == doctest::Approx(1.0 / std::sqrt(34.0)));
  // An output that cancels to nearly zero is judged against the inputs' scale, not its own tiny value:
  // an f32-sized rounding error on it stays an f32-sized relative error.
  Tensor tiny = make(Shape{1}, {1e-9 + 1e-7});
  CHECK(reference::relative_error(tiny, {1e-9}) == doctest::Approx(1e-7 / 0.25));
  Tensor nan = make(Shape{2}, {NAN, 4});
  CHECK(std::isinf(reference::relative_error(nan, {3, 4})));
  CHECK_THROWS(reference::relative_error(t, {1, 2, 3}));
}

TEST_CASE("relative_error: a reference past the output dtype's range is met exactly by that infinity, one ulp short by it") {
  // Note [A result past the output dtype's range]. f16's largest finite value is 65504; from 65520 (half
  // an ulp above) round-to-nearest-even gives inf, as float_to_half shows.
  constexpr double kInf = INFINITY;
  REQUIRE(reference::float_to_half(65519.0f) == 0x7bff);
  REQUIRE(reference::float_to_half(65520.0f) == 0x7c00);
  const DType f16 = DType::kF16;
  // A quotient of 8e6 is inf in f16: exact, with either sign, and at the threshold itself.
  CHECK(reference::relative_error(vec({kInf, -kInf, 1}, f16), {8e6, -8e6, 1}) == 0.0);
  CHECK(reference::relative_error(vec({kInf}, f16), {65520}) == 0.0);
  // The exact elements count at the scale floor, not with their magnitude: 8e6 in the norm would make
  // the other element's error of 0.5 vanish (0.5 / 8e6); counted at 0.25 it stays 0.5 / sqrt(1 + 0.0625).
  CHECK(reference::relative_error(vec({kInf, 1.5}, f16), {8e6, 1}) == doctest::Approx(0.5 / std::sqrt(1.0625)));
  // The wrong infinity, a finite number, or a NaN where the reference overflows: infinite error.
  CHECK(std::isinf(reference::relative_error(vec({-kInf, 1}, f16), {8e6, 1})));
  CHECK(std::isinf(reference::relative_error(vec({65504, 1}, f16), {8e6, 1})));
  CHECK(std::isinf(reference::relative_error(vec({NAN, 1}, f16), {8e6, 1})));
  // inf where the reference is finite in f16: the kernel overflowed where a correctly rounded result
  // does not. 65488 is the tie between 65472 and 65504, which goes to the even 65472.
  CHECK(std::isinf(reference::relative_error(vec({kInf, 1}, f16), {2, 1})));
  CHECK(std::isinf(reference::relative_error(vec({kInf}, f16), {65400})));
  CHECK(std::isinf(reference::relative_error(vec({kInf}, f16), {65488})));
  // A reference that rounds to 65504 itself, as 65519 does: inf is one ulp off (two rounded steps give
  // it) and counts as 65536, the value one ulp past 65504; the other infinity is still wrong.
  CHECK(reference::relative_error(vec({65504}, f16), {65519}) == doctest::Approx(15.0 / 65519));
  CHECK(reference::relative_error(vec({kInf}, f16), {65519}) == doctest::Approx(17.0 / 65519));
  CHECK(reference::relative_error(vec({-kInf}, f16), {-65490}) == doctest::Approx(46.0 / 65490));
  CHECK(std::isinf(reference::relative_error(vec({-kInf}, f16), {65519})));
}

TEST_CASE("relative_error: an infinite or NaN reference is met only by the same infinity or a NaN") {
  constexpr double kInf = INFINITY;
  for (DType dtype : {DType::kF64, DType::kF32, DType::kF16, DType::kBF16}) {
    const std::string name(dtype_name(dtype));
    CAPTURE(name);
    // x / 0 with an exact zero (an f16 input that rounded to zero): the reference is +-inf itself.
    CHECK(reference::relative_error(vec({kInf, -kInf, 0.5}, dtype), {kInf, -kInf, 0.5}) == 0.0);
    CHECK(std::isinf(reference::relative_error(vec({-kInf, 0.5}, dtype), {kInf, 0.5})));
    CHECK(std::isinf(reference::relative_error(vec({1000, 0.5}, dtype), {kInf, 0.5})));
    CHECK(std::isinf(reference::relative_error(vec({NAN, 0.5}, dtype), {-kInf, 0.5})));
    // 0 / 0: NaN for NaN is exact, and counts at the scale floor beside an error elsewhere.
    CHECK(reference::relative_error(vec({NAN, 0.5}, dtype), {NAN, 0.5}) == 0.0);
    CHECK(reference::relative_error(vec({NAN, 1.5}, dtype), {NAN, 1}) == doctest::Approx(0.5 / std::sqrt(1.0625)));
    CHECK(std::isinf(reference::relative_error(vec({0.5, 0.5}, dtype), {NAN, 0.5})));
    CHECK(std::isinf(reference::relative_error(vec({kInf, 0.5}, dtype), {NAN, 0.5})));
    CHECK(std::isinf(reference::relative_error(vec({NAN, 0.5}, dtype), {0.5, 0.5})));
  }
}

TEST_CASE("relative_error: the overflow threshold is each dtype's own, and none for f64") {
  constexpr double kInf = INFINITY;
  // bf16: largest finite (2 - 2^-7) * 2^127; from (2 - 2^-8) * 2^127 it rounds to inf.
  const double bf16_threshold = std::ldexp(2.0 - std::ldexp(1.0, -8), 127);
  REQUIRE(reference::float_to_bf16(static_cast<float>(bf16_threshold)) == 0x7f80);
  REQUIRE(reference::float_to_bf16(std::nextafter(static_cast<float>(bf16_threshold), 0.0f)) == 0x7f7f);
  CHECK(reference::relative_error(vec({kInf, -kInf}, DType::kBF16), {bf16_threshold, -1e39}) == 0.0);
  // Just under it, the reference rounds to the largest finite value: inf is one ulp off and counts as
  // 2^128. Under the largest finite value's own rounding interval, inf is wrong.
  const double bf16_largest = std::ldexp(2.0 - std::ldexp(1.0, -7), 127);
  const double below = std::nextafter(bf16_threshold, 0.0);
  CHECK(reference::relative_error(vec({kInf}, DType::kBF16), {below}) ==
        doctest::Approx((std::ldexp(1.0, 128) - below) / below));
  CHECK(std::isinf(reference::relative_error(vec({kInf}, DType::kBF16), {bf16_largest - std::ldexp(1.0, 119)})));
  // f16's threshold means nothing to a bf16 or f32 result: 8e6 is finite there, and inf is wrong.
  CHECK(std::isinf(reference::relative_error(vec({kInf}, DType::kBF16), {8e6})));
  CHECK(std::isinf(reference::relative_error(vec({kInf}, DType::kF32), {8e6})));
  // f32: from FLT_MAX plus half an ulp, (2 - 2^-24) * 2^127.
  const double f32_threshold = std::ldexp(2.0 - std::ldexp(1.0, -24), 127);
  CHECK(reference::relative_error(vec({kInf, -kInf}, DType::kF32), {f32_threshold, -1e39}) == 0.0);
  CHECK(std::isinf(reference::relative_error(vec({kInf}, DType::kF32), {3e38})));
  // f64 holds whatever the float64 reference holds: only an infinite reference is met by inf.
  CHECK(reference::relative_error(vec({1e300}, DType::kF64), {1e300}) == 0.0);
  CHECK(std::isinf(reference::relative_error(vec({kInf}, DType::kF64), {1e300})));
  CHECK(std::isinf(reference::relative_error(vec({kInf}, DType::kF64), {1e39})));
}

TEST_CASE("tolerances: tighter for wider types, looser with TF32") {
  CHECK(reference::tolerance(DType::kF64) < reference::tolerance(DType::kF32));
  CHECK(reference::tolerance(DType::kF32) < reference::tolerance(DType::kF16));
  CHECK(reference::tolerance(DType::kF16) < reference::tolerance(DType::kBF16));
  CHECK(reference::tolerance(DType::kF32, true) > reference::tolerance(DType::kF32));
}

TEST_CASE("half and bfloat16 conversions: exact values, rounding to nearest even, specials") {
  CHECK(reference::float_to_half(1.0f) == 0x3c00);
  CHECK(reference::float_to_half(-2.0f) == 0xc000);
  CHECK(reference::float_to_half(0.0f) == 0x0000);
  CHECK(reference::half_to_float(0x3c00) == 1.0f);
  CHECK(reference::half_to_float(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(std::isinf(reference::half_to_float(0x7c00)));
  CHECK(std::isnan(reference::half_to_float(0x7e00)));
  CHECK(reference::float_to_half(1e6f) == 0x7c00);  // overflow -> inf
  // 1 + 2^-11 is halfway between 1 and the next half (1 + 2^-10): ties go to even (1.0).
  CHECK(reference::float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(reference::float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(reference::bf16_to_float(reference::float_to_bf16(1.5f)) == 1.5f);
  CHECK(reference::float_to_bf16(1.0f) == 0x3f80);
  // Every half in [-1, 1] survives the round trip through float.
  for (uint32_t h = 0; h <= 0x3c00; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    REQUIRE(reference::float_to_half(reference::half_to_float(bits)) == bits);
    REQUIRE(reference::float_to_half(reference::half_to_float(bits | 0x8000)) == (bits | 0x8000));
  }
}

TEST_CASE("to_double decodes every dtype") {
  Tensor h = Tensor::empty(Shape{2}, DType::kF16, kCPU);
  h.data<uint16_t>()[0] = reference::float_to_half(0.5f);
  h.data<uint16_t>()[1] = reference::float_to_half(-0.25f);
  CHECK(reference::to_double(h) == std::vector<double>{0.5, -0.25});
  Tensor bf = Tensor::empty(Shape{1}, DType::kBF16, kCPU);
  bf.data<uint16_t>()[0] = reference::float_to_bf16(3.0f);
  CHECK(reference::to_double(bf) == std::vector<double>{3.0});
  CHECK(reference::to_double(make(Shape{2}, {1.5, 2.5}, DType::kF32)) == std::vector<double>{1.5, 2.5});
  CHECK(reference::to_double(Tensor()).empty());
}

TEST_CASE("sum.dim_IntList, mean.dim and their gradients, computed by hand") {
  // [2,3] = {{1, 2, 3}, {4, 5, 6}}
  const Tensor a = make(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(reference::sum_dim(a, Shape{0}, false, std::nullopt) == std::vector<double>{5, 7, 9});
  CHECK(reference::sum_dim(a, Shape{-1}, true, std::nullopt) == std::vector<double>{6, 15});
  CHECK(reference::sum_dim(a, Shape{}, false, std::nullopt) == std::vector<double>{21});
  CHECK(reference::mean_dim(a, Shape{1}, false, std::nullopt) == std::vector<double>{2, 5});
  CHECK(reference::mean(a, std::nullopt) == std::vector<double>{3.5});
  // [2,2,2]: sum over dims 0 and 2 leaves dim 1.
  const Tensor c = make(Shape{2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(reference::sum_dim(c, Shape{0, 2}, false, std::nullopt) == std::vector<double>{1 + 2 + 5 + 6, 3 + 4 + 7 + 8});
  // The gradient of sum over dim 1 is each row's gradient repeated; mean's divided by 3.
  const Tensor g = make(Shape{2}, {10, 20});
  CHECK(reference::sum_dim_backward(g, a, Shape{1}, false, std::nullopt)[0] ==
        std::vector<double>{10, 10, 10, 20, 20, 20});
  CHECK(reference::mean_dim_backward(make(Shape{2, 1}, {3, 6}), a, Shape{1}, true, std::nullopt)[0] ==
        std::vector<double>{1, 1, 1, 2, 2, 2});
}
