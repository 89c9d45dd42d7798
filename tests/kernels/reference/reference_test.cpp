// The float64 reference itself (layers/kernels/reference): hand-computed values, the error measure and
// the half-precision conversions the frontend and --check rely on.
#include "layers/kernels/reference/reference.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace strata;

namespace {

Tensor make(const Shape& s, std::vector<double> values, DType dtype = DType::kF64) {
  Tensor t = Tensor::empty(s, dtype, kCPU);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF64)
      t.data<double>()[i] = values[i];
    else
      t.data<float>()[i] = static_cast<float>(values[i]);
  }
  return t;
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
