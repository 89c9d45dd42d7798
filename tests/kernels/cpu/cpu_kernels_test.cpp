// Every CPU kernel against the float64 reference (layers/kernels/reference) with the per-dtype tolerance,
// on fresh random inputs in [-1, 1) (never zeros) and on shapes that catch transposed operands, swapped
// strides and off-by-one borders: non-square, 1-sized, stride 2 with padding.
//
// "Fresh": the seed differs on every run and is printed with any failure; set STRATA_TEST_SEED to replay.
#include "layers/kernels/cpu/cpu_kernels.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "layers/dispatch/dispatch.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "tests/kernels/empty_reductions.h"
#include "lib/error.h"
#include "lib/op_shapes.h"
#include "tests/kernels/fresh_seed.h"

using namespace strata;
using strata::testing::run_seed;
namespace cpu = strata::kernels::cpu;

namespace {

Tensor rnd(const Shape& s, DType dtype, uint64_t stream) {
  Tensor t = frontend::random_tensor(s, dtype, kCPU, run_seed() + stream * 7919);
  // The premise of every comparison below: the inputs are not zeros.
  const auto v = reference::to_double(t);
  for (double x : v) REQUIRE(x != 0.0);
  return t;
}

// Exact expectations, element by element: NaN where NaN is wanted, else the same value with the same sign
// (a zero's sign is what these tests are about).
void check_exactly(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CAPTURE(got[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
    } else {
      CHECK(got[i] == want[i]);
      CHECK(std::signbit(got[i]) == std::signbit(want[i]));
    }
  }
}

const DType kDTypes[] = {DType::kF32, DType::kF64};

void check_close(const Tensor& out, const std::vector<double>& ref, DType dtype) {
  const double err = reference::relative_error(out, ref);
  CAPTURE(err);
  CHECK(err <= reference::tolerance(dtype));
}

}  // namespace

TEST_CASE("matmul matches the reference (f32 and f64, square, non-square, 1-sized)") {
  INFO("seed " << run_seed());
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1},    {1, 7, 1},    {7, 1, 5},
                                                      {1, 64, 33},  {33, 64, 1},  {17, 31, 23},
                                                      {64, 64, 64}, {128, 3, 96}, {5, 300, 2}};
  for (DType dtype : kDTypes) {
    for (const auto& mkn : shapes) {
      const int64_t m = mkn[0], k = mkn[1], n = mkn[2];
      CAPTURE(dtype_name(dtype));
      CAPTURE(Shape({m, k, n}).str());
      Tensor a = rnd(Shape{m, k}, dtype, 1), b = rnd(Shape{k, n}, dtype, 2);
      Tensor out = cpu::matmul(a, b);
      CHECK(out.sizes() == Shape{m, n});
      CHECK(out.dtype() == dtype);
      check_close(out, reference::matmul(a, b), dtype);
    }
  }
}

TEST_CASE("linear matches the reference, with and without bias") {
  INFO("seed " << run_seed());
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 1}, {1, 16, 9}, {9, 16, 1}, {32, 7, 5}, {3, 128, 64}};
  for (DType dtype : kDTypes) {
    for (const auto& shape : shapes) {
      const int64_t batch = shape[0], in = shape[1], out_features = shape[2];
      CAPTURE(dtype_name(dtype));
      CAPTURE(Shape({batch, in, out_features}).str());
      Tensor x = rnd(Shape{batch, in}, dtype, 1), w = rnd(Shape{out_features, in}, dtype, 2),
             b = rnd(Shape{out_features}, dtype, 3);
      Tensor with_bias = cpu::linear(x, w, b);
      CHECK(with_bias.sizes() == Shape{batch, out_features});
      check_close(with_bias, reference::linear(x, w, b), dtype);
      check_close(cpu::linear(x, w, Tensor()), reference::linear(x, w, Tensor()), dtype);
    }
  }
}

TEST_CASE("conv2d matches the reference: stride, padding, non-square, 1x1 kernels, batches, bias") {
  INFO("seed " << run_seed());
  struct Case {
    Shape input, weight;
    int64_t stride, padding;
    bool bias;
  };
  const std::vector<Case> cases = {
      {Shape{1, 1, 1, 1}, Shape{1, 1, 1, 1}, 1, 0, false}, {Shape{1, 1, 5, 5}, Shape{1, 1, 3, 3}, 1, 0, true},
      {Shape{2, 3, 9, 7}, Shape{4, 3, 3, 3}, 2, 1, true},   // non-square input, stride 2, pad 1
      {Shape{1, 2, 8, 5}, Shape{3, 2, 1, 1}, 1, 0, true},   // 1x1 kernel
      {Shape{3, 4, 6, 6}, Shape{5, 4, 5, 5}, 1, 2, false},  // padding 2
      {Shape{1, 2, 7, 11}, Shape{2, 2, 3, 3}, 3, 0, true},  // stride 3 with a remainder
      {Shape{1, 1, 2, 2}, Shape{1, 1, 4, 4}, 1, 1, true},   // kernel as large as the padded input -> 1x1
      {Shape{2, 1, 4, 3}, Shape{1, 1, 2, 3}, 2, 0, true},   // non-square kernel (the kernel accepts one)
  };
  for (DType dtype : kDTypes) {
    for (const Case& c : cases) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(c.input.str());
      CAPTURE(c.weight.str());
      CAPTURE(c.stride);
      CAPTURE(c.padding);
      Tensor x = rnd(c.input, dtype, 1), w = rnd(c.weight, dtype, 2);
      Tensor b = c.bias ? rnd(Shape{c.weight[0]}, dtype, 3) : Tensor();
      Tensor out = cpu::conv2d(x, w, b, {c.stride}, {c.padding}, {1}, 1);
      const auto g = op_shapes::conv2d(c.input, c.weight, nullptr, {c.stride}, {c.padding}, {1}, 1);
      CHECK(out.sizes() == g.output());
      check_close(out, reference::conv2d(x, w, b, {c.stride}, {c.padding}, {1}, 1), dtype);
    }
  }
}

TEST_CASE("conv2d with torch's options: (H, W) strides and padding, dilation, groups - both gradients too") {
  INFO("seed " << run_seed());
  struct Case {
    Shape input, weight, stride, padding, dilation;
    int64_t groups;
    Shape output;  // torch.nn.functional.conv2d's output shape for these arguments
  };
  const std::vector<Case> cases = {
      {Shape{2, 3, 9, 7}, Shape{4, 3, 3, 3}, Shape{2, 1}, Shape{1, 0}, Shape{1}, 1, Shape{2, 4, 5, 5}},
      {Shape{1, 2, 10, 9}, Shape{3, 2, 3, 2}, Shape{1}, Shape{2, 1}, Shape{2, 3}, 1, Shape{1, 3, 10, 8}},
      {Shape{2, 6, 8, 8}, Shape{4, 3, 3, 3}, Shape{1}, Shape{1}, Shape{1}, 2, Shape{2, 4, 8, 8}},
      {Shape{1, 4, 9, 11}, Shape{4, 1, 3, 3}, Shape{2, 3}, Shape{2}, Shape{2}, 4, Shape{1, 4, 5, 4}},  // depthwise
      {Shape{2, 6, 7, 7}, Shape{9, 2, 2, 3}, Shape{3, 2}, Shape{0, 1}, Shape{3, 1}, 3, Shape{2, 9, 2, 4}},
      {Shape{0, 4, 6, 6}, Shape{6, 2, 3, 3}, Shape{1}, Shape{1}, Shape{2}, 2, Shape{0, 6, 4, 4}},  // an empty batch
  };
  for (DType dtype : kDTypes) {
    for (const Case& c : cases) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(c.input.str());
      CAPTURE(c.weight.str());
      CAPTURE(c.groups);
      const Tensor x = rnd(c.input, dtype, 1), w = rnd(c.weight, dtype, 2), b = rnd(Shape{c.weight[0]}, dtype, 3);
      const Tensor out = cpu::conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
      CHECK(out.sizes() == c.output);
      check_close(out, reference::conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups), dtype);
      const Tensor grad = rnd(c.output, dtype, 4);
      check_close(cpu::conv2d_input_backward(grad, x, w, c.stride, c.padding, c.dilation, c.groups),
                  reference::conv2d_input_backward(grad, x, w, c.stride, c.padding, c.dilation, c.groups), dtype);
      check_close(cpu::conv2d_weight_backward(grad, x, w, c.stride, c.padding, c.dilation, c.groups),
                  reference::conv2d_weight_backward(grad, x, w, c.stride, c.padding, c.dilation, c.groups), dtype);
    }
  }
}

TEST_CASE("conv2d's groups are independent: each group's output is the conv of its own channels alone") {
  // The reference computes groups the same way the kernel does; this checks both against a plain conv of
  // each group's slice, so a grouped conv that mixed the groups' channels could not pass.
  INFO("seed " << run_seed());
  const Tensor x = rnd(Shape{2, 4, 6, 5}, DType::kF64, 1), w = rnd(Shape{6, 2, 3, 3}, DType::kF64, 2);
  const std::vector<double> grouped = reference::to_double(cpu::conv2d(x, w, Tensor(), {1}, {1}, {1}, 2));
  for (int64_t group = 0; group < 2; ++group) {
    // The group's input channels [2g, 2g + 2) of each image and its weight rows [3g, 3g + 3), copied out.
    Tensor xs = Tensor::empty(Shape{2, 2, 6, 5}, DType::kF64, kCPU), ws = Tensor::empty(Shape{3, 2, 3, 3}, DType::kF64, kCPU);
    for (int64_t n = 0; n < 2; ++n) std::copy_n(x.data<double>() + (n * 4 + 2 * group) * 30, 2 * 30, xs.data<double>() + n * 60);
    std::copy_n(w.data<double>() + 3 * group * 18, 3 * 18, ws.data<double>());
    const std::vector<double> alone = reference::conv2d(xs, ws, Tensor(), {1}, {1}, {1}, 1);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < 3 * 6 * 5; ++i)
        CHECK(grouped[size_t((n * 6 + 3 * group) * 30 + i)] == doctest::Approx(alone[size_t(n * 90 + i)]).epsilon(1e-12));
  }
}

TEST_CASE("relu keeps NaN and -0.0 as PyTorch does - its gradient passes NaN through and is 0 at +-0") {
  const double nan = std::nan(""), inf = HUGE_VAL;
  const std::vector<double> in{nan, -0.0, 0.0, -1.5, 2.0, inf, -inf};
  for (DType dtype : {DType::kF32, DType::kF64}) {
    CAPTURE(dtype_name(dtype));
    Tensor x = Tensor::empty(Shape{int64_t(in.size())}, dtype, kCPU);
    for (size_t i = 0; i < in.size(); ++i) {
      if (dtype == DType::kF32) x.data<float>()[i] = float(in[i]);
      else x.data<double>()[i] = in[i];
    }
    const auto value = [&](const Tensor& t, size_t i) {
      return dtype == DType::kF32 ? double(t.data<float>()[i]) : t.data<double>()[i];
    };
    const Tensor y = cpu::relu(x);
    const std::vector<double> ref = reference::relu(x);
    CHECK(std::isnan(value(y, 0)));
    CHECK(std::isnan(ref[0]));
    CHECK((value(y, 1) == 0.0 && std::signbit(value(y, 1))));
    CHECK(std::signbit(ref[1]));
    CHECK((value(y, 2) == 0.0 && !std::signbit(value(y, 2))));
    CHECK(value(y, 3) == 0.0);
    CHECK(value(y, 4) == 2.0);
    CHECK(value(y, 5) == inf);
    CHECK(value(y, 6) == 0.0);
    // ReluBackward is threshold_backward(grad, result, 0): `result <= 0 ? 0 : grad`.
    Tensor g = Tensor::empty(x.sizes(), dtype, kCPU);
    for (size_t i = 0; i < in.size(); ++i) {
      if (dtype == DType::kF32) g.data<float>()[i] = 3.0f;
      else g.data<double>()[i] = 3.0;
    }
    const Tensor dx = cpu::threshold_backward(g, y, 0.0);
    const std::vector<double> want{3.0, 0.0, 0.0, 0.0, 3.0, 3.0, 0.0};
    for (size_t i = 0; i < in.size(); ++i) {
      CAPTURE(i);
      CHECK(value(dx, i) == want[i]);
    }
  }
}

TEST_CASE("relu matches the reference exactly, add within the tolerance") {
  INFO("seed " << run_seed());
  for (DType dtype : kDTypes) {
    for (const Shape& s : {Shape{1}, Shape{7}, Shape{1000}, Shape{3, 5}, Shape{2, 3, 4, 5}}) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(s.str());
      Tensor a = rnd(s, dtype, 1), b = rnd(s, dtype, 2);
      Tensor r = cpu::relu(a);
      CHECK(r.sizes() == s);
      // relu only selects values: exact in every precision. add rounds its sum to the dtype.
      CHECK(reference::relative_error(r, reference::relu(a)) == 0.0);
      for (double alpha : {1.0, -0.5, 0.3}) {
        CAPTURE(alpha);
        check_close(cpu::add(a, b, alpha), reference::add(a, b, alpha), dtype);
      }
    }
  }
}

TEST_CASE("gelu matches the float64 reference within the tolerance, at both signs and far into the tails") {
  INFO("seed " << run_seed());
  for (DType dtype : kDTypes) {
    for (const Shape& s : {Shape{1}, Shape{7}, Shape{1000}, Shape{2, 3, 4, 5}}) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(s.str());
      Tensor a = rnd(s, dtype, 3);
      Tensor g = cpu::gelu(a);
      CHECK(g.sizes() == s);
      check_close(g, reference::gelu(a), dtype);
    }
  }
}

TEST_CASE("the comparison would catch a wrong kernel") {
  // A transposed operand, a dropped bias and a shifted conv window must all land far outside the
  // tolerance; otherwise the tests above prove nothing.
  INFO("seed " << run_seed());
  Tensor a = rnd(Shape{16, 16}, DType::kF32, 1), b = rnd(Shape{16, 16}, DType::kF32, 2);
  CHECK(reference::relative_error(cpu::matmul(b, a), reference::matmul(a, b)) > 0.1);
  Tensor x = rnd(Shape{4, 8}, DType::kF32, 3), w = rnd(Shape{5, 8}, DType::kF32, 4),
         bias = rnd(Shape{5}, DType::kF32, 5);
  CHECK(reference::relative_error(cpu::linear(x, w, Tensor()), reference::linear(x, w, bias)) > 0.05);
  Tensor ci = rnd(Shape{1, 2, 6, 6}, DType::kF32, 6), cw = rnd(Shape{2, 2, 3, 3}, DType::kF32, 7);
  CHECK(reference::relative_error(cpu::conv2d(ci, cw, Tensor(), {1}, {1}, {1}, 1),
                                  reference::conv2d(ci, cw, Tensor(), {1}, {1}, {1}, 1)) <=
        reference::tolerance(DType::kF32));
  Tensor shifted = cpu::conv2d(ci, cw, Tensor(), {1}, {1}, {1}, 1);
  auto ref = reference::conv2d(ci, cw, Tensor(), {1}, {1}, {1}, 1);
  ref.insert(ref.begin(), ref.back());
  ref.pop_back();
  CHECK(reference::relative_error(shifted, ref) > 0.1);
  // Dilation and groups that the kernel ignored, or H and W swapped, would be far off too.
  Tensor gi = rnd(Shape{1, 4, 9, 8}, DType::kF32, 8), gw = rnd(Shape{4, 2, 3, 3}, DType::kF32, 9);
  CHECK(reference::relative_error(cpu::conv2d(gi, gw, Tensor(), {2, 1}, {1, 2}, {1, 2}, 2),
                                  reference::conv2d(gi, gw, Tensor(), {2, 1}, {1, 2}, {1, 2}, 2)) <=
        reference::tolerance(DType::kF32));
  CHECK(cpu::conv2d(gi, gw, Tensor(), {2, 1}, {1, 2}, {1, 2}, 2).sizes() == Shape{1, 4, 5, 8});
  // The same output shape without the dilation (less padding instead): other values.
  CHECK(reference::relative_error(cpu::conv2d(gi, gw, Tensor(), {2, 1}, {1, 2}, {1, 2}, 2),
                                  reference::conv2d(gi, gw, Tensor(), {2, 1}, {1, 1}, {1, 1}, 2)) > 0.1);
}

TEST_CASE("CPU kernels refuse what they cannot compute, with the reason") {
  Tensor f32 = rnd(Shape{2, 2}, DType::kF32, 1), f64 = rnd(Shape{2, 2}, DType::kF64, 2);
  CHECK_THROWS_WITH_AS(cpu::matmul(f32, f64), doctest::Contains("matmul: dtypes differ"), UsageError);
  CHECK_THROWS_WITH_AS(cpu::matmul(f32, rnd(Shape{2, 2}, DType::kBF16, 8)), doctest::Contains("matmul: dtypes differ"),
                       UsageError);
  CHECK_THROWS_WITH_AS(cpu::add(f32, rnd(Shape{4}, DType::kF32, 3), 1.0),
                       doctest::Contains("add: shapes [2x2] and [4] cannot broadcast"), UsageError);
  CHECK_THROWS_WITH_AS(cpu::linear(f32, rnd(Shape{3, 2}, DType::kF32, 4), rnd(Shape{2}, DType::kF32, 5)),
                       doctest::Contains("bias must be [3]"), UsageError);
  CHECK_THROWS_WITH_AS(cpu::conv2d(rnd(Shape{1, 1, 2, 2}, DType::kF32, 6),
                                   rnd(Shape{1, 1, 3, 3}, DType::kF32, 7), Tensor(), {1}, {0}, {1}, 1),
                       doctest::Contains("Kernel size can't be greater than actual input size"), UsageError);
  CHECK_THROWS_WITH_AS(cpu::conv2d(rnd(Shape{1, 5, 8, 8}, DType::kF32, 6), rnd(Shape{4, 3, 3, 3}, DType::kF32, 7),
                                   Tensor(), {1}, {0}, {1}, 2),
                       doctest::Contains("Given groups=2, weight of size [4, 3, 3, 3], expected input[1, 5, 8, 8] to "
                                         "have 6 channels, but got 5 channels instead"),
                       UsageError);
}

TEST_CASE("the full path (binding, dispatcher, CPU kernel) computes the same as the kernel alone") {
  // Catches argument order mistakes between layers: stride and padding swapped would change the shape.
  INFO("seed " << run_seed());
  Tensor x = rnd(Shape{1, 2, 9, 9}, DType::kF64, 1), w = rnd(Shape{3, 2, 3, 3}, DType::kF64, 2),
         b = rnd(Shape{3}, DType::kF64, 3);
  binding::IValue out = binding::find_operator("conv2d").call(
      std::vector<binding::IValue>{x, w, b, binding::IValue(2), binding::IValue(1)});
  CHECK(out.tensor().sizes() == Shape{1, 3, 5, 5});
  check_close(out.tensor(), reference::conv2d(x, w, b, {2}, {1}, {1}, 1), DType::kF64);
  // (H, W) lists, dilation and groups reach the kernel in their places: swapping any two changes the shape.
  const Tensor wg = rnd(Shape{4, 1, 3, 3}, DType::kF64, 4);
  out = binding::find_operator("conv2d").call(std::vector<binding::IValue>{
      x, wg, Tensor(), binding::IValue(Shape{2, 1}), binding::IValue(Shape{0, 1}), binding::IValue(Shape{1, 2}),
      binding::IValue(2)});
  CHECK(out.tensor().sizes() == Shape{1, 4, 4, 7});
  check_close(out.tensor(), reference::conv2d(x, wg, Tensor(), {2, 1}, {0, 1}, {1, 2}, 2), DType::kF64);
  CHECK(!cpu::blas_config().empty());
  CHECK(cpu::blas_threads() >= 1);
}

namespace {
float from_bits(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}
// to_copy of one f32 value to `to`, and the bits of the result.
uint16_t cast_bits(float v, DType to) {
  Tensor t = Tensor::empty(Shape{1}, DType::kF32, kCPU);
  t.data<float>()[0] = v;
  return cpu::to_copy(t, to).data<uint16_t>()[0];
}
}  // namespace

TEST_CASE("to_copy: every dtype pair, half rounding bit-exact against the reference's, and the edge values") {
  INFO("seed " << run_seed());
  // Random values over many binades, both signs: the kernel's conversions (convert.cpp) against the
  // reference's (reference.cpp), written apart; the reference's f16 rounding is exact for normals.
  std::mt19937 rng(static_cast<uint32_t>(run_seed()));
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-14, 15);
  Tensor x = Tensor::empty(Shape{4096}, DType::kF32, kCPU);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::ldexp(mantissa(rng), exponent(rng));
  const Tensor b = cpu::to_copy(x, DType::kBF16), h = cpu::to_copy(x, DType::kF16);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = x.data<float>()[i];
    CAPTURE(v);
    REQUIRE(b.data<uint16_t>()[i] == reference::float_to_bf16(v));
    if (std::fabs(v) >= std::ldexp(1.0f, -14) && std::fabs(v) < 65504.0f) REQUIRE(h.data<uint16_t>()[i] == reference::float_to_half(v));
  }
  // Every pair of dtypes, through the full stack: values survive within the narrower dtype's tolerance.
  for (DType from : kAllDTypes) {
    const Tensor src = rnd(Shape{257}, from, 11);
    for (DType to : kAllDTypes) {
      CAPTURE(dtype_name(from));
      CAPTURE(dtype_name(to));
      const Tensor out = cpu::to_copy(src, to);
      CHECK(out.dtype() == to);
      const double tol = std::max(reference::tolerance(from), reference::tolerance(to));
      CHECK(reference::relative_error(out, reference::to_double(src)) <= tol);
      if (from == to || to == DType::kF64 || (to == DType::kF32 && from != DType::kF64))
        CHECK(reference::relative_error(out, reference::to_double(src)) == 0.0);  // widening is exact
    }
  }
  CHECK(cpu::to_copy(x, std::nullopt).dtype() == DType::kF32);
  // Edge values, by hand: ties to even, overflow to inf, NaN stays NaN, subnormal halves, signed zero.
  CHECK(cast_bits(from_bits(0x3f808000u), DType::kBF16) == 0x3f80);  // 1 + 2^-8: a tie, down to even
  CHECK(cast_bits(from_bits(0x3f818000u), DType::kBF16) == 0x3f82);  // 1 + 3*2^-8: a tie, up to even
  CHECK(cast_bits(from_bits(0x7f7fffffu), DType::kBF16) == 0x7f80);  // FLT_MAX rounds to inf
  CHECK((cast_bits(std::nanf(""), DType::kBF16) & 0x7fc0) == 0x7fc0);
  CHECK(cast_bits(-0.0f, DType::kF16) == 0x8000);
  CHECK(cast_bits(65504.0f, DType::kF16) == 0x7bff);  // the largest half
  CHECK(cast_bits(65520.0f, DType::kF16) == 0x7c00);  // halfway to the next: rounds to inf
  CHECK(cast_bits(1e6f, DType::kF16) == 0x7c00);
  CHECK((cast_bits(std::nanf(""), DType::kF16) & 0x7e00) == 0x7e00);
  CHECK(cast_bits(std::ldexp(1.0f, -24), DType::kF16) == 0x0001);  // the smallest subnormal
  CHECK(cast_bits(std::ldexp(1.0f, -25), DType::kF16) == 0x0000);  // half of it: a tie, to even (zero)
  CHECK(cast_bits(std::ldexp(1.5f, -25), DType::kF16) == 0x0001);
  CHECK(cast_bits(std::ldexp(3.0f, -16), DType::kF16) == 0x0300);  // a subnormal, exactly
  // And back: f16 subnormals and inf widen exactly.
  Tensor hs = Tensor::empty(Shape{3}, DType::kF16, kCPU);
  hs.data<uint16_t>()[0] = 0x0001;
  hs.data<uint16_t>()[1] = 0x0300;
  hs.data<uint16_t>()[2] = 0xfc00;
  const Tensor back = cpu::to_copy(hs, DType::kF32);
  CHECK(back.data<float>()[0] == std::ldexp(1.0f, -24));
  CHECK(back.data<float>()[1] == std::ldexp(3.0f, -16));
  CHECK(std::isinf(back.data<float>()[2]));
  CHECK(back.data<float>()[2] < 0);
}

TEST_CASE("bf16 and f16 tensors on the CPU: widened to f32, computed, rounded - each op against the reference") {
  INFO("seed " << run_seed());
  for (DType d : {DType::kBF16, DType::kF16}) {
    CAPTURE(dtype_name(d));
    const Tensor a = rnd(Shape{17, 33}, d, 1), b = rnd(Shape{33, 9}, d, 2), w = rnd(Shape{9, 33}, d, 3),
                 bias = rnd(Shape{9}, d, 4);
    const Tensor mm = cpu::matmul(a, b);
    CHECK(mm.dtype() == d);
    check_close(mm, reference::matmul(a, b), d);
    check_close(cpu::linear(a, w, bias), reference::linear(a, w, bias), d);
    const Tensor x = rnd(Shape{2, 3, 7, 7}, d, 5), k = rnd(Shape{4, 3, 3, 3}, d, 6), kb = rnd(Shape{4}, d, 7);
    check_close(cpu::conv2d(x, k, kb, {2}, {1}, {1}, 1), reference::conv2d(x, k, kb, {2}, {1}, {1}, 1), d);
    const Tensor kg = rnd(Shape{6, 1, 3, 3}, d, 8);
    check_close(cpu::conv2d(x, kg, Tensor(), {1, 2}, {2, 1}, {2}, 3), reference::conv2d(x, kg, Tensor(), {1, 2}, {2, 1}, {2}, 3), d);
    check_close(cpu::relu(a), reference::relu(a), d);
    check_close(cpu::gelu(a), reference::gelu(a), d);
    check_close(cpu::add(a, a, 0.5), reference::add(a, a, 0.5), d);
    // relu of a half tensor is exact: max(x, 0) of a representable value is representable.
    CHECK(reference::relative_error(cpu::relu(a), reference::relu(a)) == 0.0);
  }
}

// The kernels check_empty_reductions calls (tests/kernels/empty_reductions.h).
struct CpuKernels {
  static constexpr auto kMatmul = &cpu::matmul;
  static constexpr auto kGemm = &cpu::gemm;
  static constexpr auto kLinear = &cpu::linear;
  static constexpr auto kConv2d = &cpu::conv2d;
  static constexpr auto kConv2dInputBackward = &cpu::conv2d_input_backward;
  static constexpr auto kConv2dWeightBackward = &cpu::conv2d_weight_backward;
  static constexpr auto kBiasBackward = &cpu::bias_backward;
  static constexpr auto kSum = &cpu::sum;
};

TEST_CASE("accumulating kernels write their whole output when the reduced dimension is empty (N = 0, K = 0, C = 0)") {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16}) testing::check_empty_reductions(CpuKernels{}, kCPU, dtype);
}

TEST_CASE("the tanh GELU's ops (mul, sub, tanh, pow, scalar forms) match the float64 reference") {
  INFO("seed " << run_seed());
  for (DType dtype : kDTypes) {
    for (const Shape& s : {Shape{1}, Shape{7}, Shape{1000}, Shape{3, 5}, Shape{2, 3, 4, 5}}) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(s.str());
      // Scaled to [-4, 4): tanh's tails and pow's growth, not only values near 0.
      const Tensor a = cpu::mul_scalar(rnd(s, dtype, 11), 4.0), b = rnd(s, dtype, 12), g = rnd(s, dtype, 13);
      check_close(cpu::mul(a, b), reference::mul(a, b), dtype);
      check_close(cpu::tanh(a), reference::tanh(a), dtype);
      check_close(cpu::tanh_backward(g, b), reference::tanh_backward(g, b), dtype);
      for (double v : {2.0, -0.5, 0.044715, 1e-8}) {
        CAPTURE(v);
        check_close(cpu::mul_scalar(a, v), reference::mul_scalar(a, v), dtype);
        check_close(cpu::add_scalar(a, v, 1.0), reference::add_scalar(a, v, 1.0), dtype);
        check_close(cpu::add_scalar(a, v, -0.3), reference::add_scalar(a, v, -0.3), dtype);
        check_close(cpu::sub_scalar(a, v, 0.7), reference::sub_scalar(a, v, 0.7), dtype);
        check_close(cpu::sub(a, b, v), reference::sub(a, b, v), dtype);
      }
      for (double e : {3.0, 2.0, 1.0, 0.0, -1.0, -2.0}) {
        CAPTURE(e);
        check_close(cpu::pow(a, e), reference::pow(a, e), dtype);
      }
      // Non-integer exponents on positive bases (a negative base gives NaN there, as in PyTorch).
      const Tensor positive = cpu::add_scalar(cpu::mul_scalar(b, 0.5), 1.0, 1.0);
      for (double e : {0.5, 1.5, -0.25}) {
        CAPTURE(e);
        check_close(cpu::pow(positive, e), reference::pow(positive, e), dtype);
      }
    }
  }
}

TEST_CASE("the tanh GELU's ops on NaN, +-inf and signed zeros give what PyTorch gives") {
  const double nan = std::nan(""), inf = HUGE_VAL;
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    auto make = [&](const std::vector<double>& v) {
      Tensor t = Tensor::empty(Shape{int64_t(v.size())}, dtype, kCPU);
      for (size_t i = 0; i < v.size(); ++i) {
        if (dtype == DType::kF32) t.data<float>()[i] = float(v[i]);
        else t.data<double>()[i] = v[i];
      }
      return t;
    };
    // Exact expectations, bit for bit where the sign of a zero matters.
    auto expect = [&](const Tensor& t, const std::vector<double>& want) {
      check_exactly(reference::to_double(t), want);
    };
    const Tensor x = make({nan, -0.0, 0.0, inf, -inf, -2.0});
    expect(cpu::tanh(x), {nan, -0.0, 0.0, 1.0, -1.0, dtype == DType::kF32 ? double(std::tanh(-2.0f)) : std::tanh(-2.0)});
    expect(cpu::pow(x, 3.0), {nan, -0.0, 0.0, inf, -inf, -8.0});
    expect(cpu::pow(x, 0.0), {1.0, 1.0, 1.0, 1.0, 1.0, 1.0});  // x^0 = 1, NaN included (C's pow and PyTorch)
    expect(cpu::pow(x, -1.0), {nan, -inf, inf, 0.0, -0.0, -0.5});
    // 0.5 is sqrt, as in PyTorch: sqrt(-0) = -0 and sqrt(-inf) = NaN (C's pow gives +0 and +inf).
    expect(cpu::pow(x, 0.5), {nan, -0.0, 0.0, inf, nan, nan});
    expect(cpu::mul_scalar(x, 0.0), {nan, -0.0, 0.0, nan, nan, -0.0});
    expect(cpu::mul(x, make({1.0, 5.0, -1.0, 0.0, -2.0, -0.0})), {nan, -0.0, -0.0, nan, inf, 0.0});
    expect(cpu::sub(x, x, 1.0), {nan, 0.0, 0.0, nan, nan, 0.0});  // -0 - -0 = +0, inf - inf = NaN
    expect(cpu::sub(x, make({0.0, 0.0, 0.0, 0.0, 0.0, 0.0}), 1.0), {nan, -0.0, 0.0, inf, -inf, -2.0});
    expect(cpu::add_scalar(x, 0.0, 1.0), {nan, 0.0, 0.0, inf, -inf, -2.0});  // -0 + 0 = +0
    expect(cpu::sub_scalar(x, 0.0, 1.0), {nan, -0.0, 0.0, inf, -inf, -2.0});  // -0 - 0 = -0
    expect(cpu::tanh_backward(make({1.0, 2.0, 3.0, nan, 1.0, 1.0}), make({0.5, 1.0, -1.0, 0.0, nan, 0.0})),
           {0.75, 0.0, 0.0, nan, nan, 1.0});
  }
}

TEST_CASE("div and div.Scalar match the float64 reference - true division, not a multiply by a reciprocal") {
  INFO("seed " << run_seed());
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    for (const Shape& s : {Shape{1}, Shape{7}, Shape{1000}, Shape{3, 5}, Shape{2, 3, 4, 5}}) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(s.str());
      // a in [-4, 4); the divisor |b| in [0.5, 1.5), both signs: no pole, quotients up to 8.
      const Tensor a = cpu::mul_scalar(rnd(s, dtype, 21), 4.0), r = rnd(s, DType::kF64, 22);
      Tensor b64 = Tensor::empty(s, DType::kF64, kCPU);
      for (int64_t i = 0; i < r.numel(); ++i) {
        const double v = r.data<double>()[i];
        b64.data<double>()[i] = v + (v < 0 ? -0.5 : 0.5);
      }
      const Tensor b = dtype == DType::kF64 ? b64 : cpu::to_copy(b64, dtype);
      check_close(cpu::div(a, b), reference::div(a, b), dtype);
      for (double v : {2.0, -0.5, 3.0, 1e-8, -7.25}) {
        CAPTURE(v);
        if (dtype == DType::kF16 && v == 1e-8) {
          // |a| / 1e-8 passes f16's largest finite value (65504): the IEEE result, and torch's, is an
          // infinity of a's sign (a zero stays a zero), which a relative error against float64 cannot say.
          const std::vector<double> got = reference::to_double(cpu::div_scalar(a, v));
          const std::vector<double> in = reference::to_double(a);
          for (size_t i = 0; i < got.size(); ++i) {
            CAPTURE(in[i]);
            if (std::abs(in[i]) * 1e8 > 65504.0) CHECK(got[i] == std::copysign(INFINITY, in[i]));
          }
          continue;
        }
        check_close(cpu::div_scalar(a, v), reference::div_scalar(a, v), dtype);
      }
    }
  }
  // One IEEE division: 1 / 3 in f32 is the float nearest 1/3, which x * (1 / 3.0f) need not give.
  Tensor x = Tensor::empty(Shape{3}, DType::kF32, kCPU);
  x.data<float>()[0] = 1.0f;
  x.data<float>()[1] = 7.0f;
  x.data<float>()[2] = -10.0f;
  const Tensor q = cpu::div_scalar(x, 3.0);
  CHECK(q.data<float>()[0] == 1.0f / 3.0f);
  CHECK(q.data<float>()[1] == 7.0f / 3.0f);
  CHECK(q.data<float>()[2] == -10.0f / 3.0f);
  // Broadcasting as mul's: [3,4] / [4] and [2,1] / [3].
  const Tensor m = rnd(Shape{3, 4}, DType::kF32, 23);
  const Tensor row = cpu::add_scalar(cpu::mul_scalar(rnd(Shape{4}, DType::kF32, 24), 0.0), 2.0, 1.0);  // all 2
  const Tensor bq = cpu::div(m, row);
  CHECK(bq.sizes() == Shape{3, 4});
  for (int64_t i = 0; i < 12; ++i) CHECK(bq.data<float>()[i] == m.data<float>()[i] / 2.0f);
  CHECK(cpu::div(rnd(Shape{2, 1}, DType::kF64, 25), cpu::add_scalar(rnd(Shape{3}, DType::kF64, 26), 3.0, 1.0)).sizes() ==
        Shape{2, 3});
  CHECK_THROWS_WITH_AS(cpu::div(m, rnd(Shape{3}, DType::kF32, 27)),
                       doctest::Contains("div: shapes [3x4] and [3] cannot broadcast"), UsageError);
  CHECK_THROWS_WITH_AS(cpu::div(m, rnd(Shape{3, 4}, DType::kF64, 28)), doctest::Contains("div: dtypes differ"),
                       UsageError);
  const Tensor empty = Tensor::empty(Shape{0, 4}, DType::kF32, kCPU);
  CHECK(cpu::div(empty, empty).sizes() == Shape{0, 4});
  CHECK(cpu::div_scalar(empty, 2.0).numel() == 0);
}

TEST_CASE("div on NaN, +-inf and signed zeros: x / 0 = +-inf, 0 / 0 = NaN, the zero's sign as PyTorch's") {
  const double nan = std::nan(""), inf = HUGE_VAL;
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    CAPTURE(dtype_name(dtype));
    auto make = [&](const std::vector<double>& v) {
      Tensor t = Tensor::empty(Shape{int64_t(v.size())}, DType::kF64, kCPU);
      for (size_t i = 0; i < v.size(); ++i) t.data<double>()[i] = v[i];
      return dtype == DType::kF64 ? t : cpu::to_copy(t, dtype);  // every value here is exact in each dtype
    };
    auto expect = [&](const Tensor& t, const std::vector<double>& want) {
      CHECK(t.dtype() == dtype);
      check_exactly(reference::to_double(t), want);
    };
    const Tensor x = make({1.0, -1.0, 0.0, -0.0, 0.0, nan, inf, -inf, 2.0, -2.0, inf, 0.0});
    const Tensor y = make({0.0, 0.0, 0.0, 0.0, -0.0, 1.0, 2.0, -0.0, inf, inf, inf, -4.0});
    const std::vector<double> want = {inf, -inf, nan, nan, nan, nan, inf, inf, 0.0, -0.0, nan, -0.0};
    expect(cpu::div(x, y), want);
    // The reference is IEEE too: the same specials.
    check_exactly(reference::div(x, y), want);
    expect(cpu::div_scalar(x, 0.0), {inf, -inf, nan, nan, nan, nan, inf, -inf, inf, -inf, inf, nan});
    expect(cpu::div_scalar(x, -0.0), {-inf, inf, nan, nan, nan, nan, -inf, inf, -inf, inf, -inf, nan});
    expect(cpu::div_scalar(x, -2.0), {-0.5, 0.5, -0.0, 0.0, -0.0, nan, -inf, inf, -1.0, 1.0, -inf, -0.0});
  }
}

TEST_CASE("the tanh GELU's ops refuse shapes that cannot broadcast naming both, and other dtypes naming both") {
  const Tensor a = rnd(Shape{2, 3}, DType::kF32, 1), b = rnd(Shape{3, 2}, DType::kF32, 2);
  CHECK_THROWS_WITH_AS(cpu::mul(a, b),
                       "mul: shapes [2x3] and [3x2] cannot broadcast: size 3 and size 2 at dim -1 (aligned from the last "
                       "dim, each pair of sizes must be equal or one of them 1)",
                       UsageError);
  CHECK_THROWS_WITH_AS(cpu::sub(a, b, 1.0), doctest::Contains("sub: shapes [2x3] and [3x2] cannot broadcast"), UsageError);
  CHECK_THROWS_WITH_AS(cpu::tanh_backward(a, b), doctest::Contains("tanh_backward: shapes differ"), UsageError);
  CHECK_THROWS_WITH_AS(cpu::mul(a, rnd(Shape{2, 3}, DType::kF64, 3)), doctest::Contains("mul: dtypes differ"),
                       UsageError);
  // Empty tensors: an empty result of the same shape, no element touched.
  const Tensor empty = Tensor::empty(Shape{0, 4}, DType::kF32, kCPU);
  CHECK(cpu::mul(empty, empty).sizes() == Shape{0, 4});
  CHECK(cpu::pow(empty, 3.0).sizes() == Shape{0, 4});
  CHECK(cpu::tanh(empty).numel() == 0);
}

TEST_CASE("sum.dim_IntList and mean.dim match the reference: several shapes, dims, keepdim, every dtype") {
  INFO("seed " << run_seed());
  struct Case {
    Shape shape, dim, out;
    bool keepdim;
  };
  const Case cases[] = {
      {Shape{3, 5}, Shape{1}, Shape{3}, false},          {Shape{3, 5}, Shape{-2}, Shape{1, 5}, true},
      {Shape{2, 3, 4}, Shape{0, 2}, Shape{3}, false},    {Shape{2, 3, 4}, Shape{-1, 0}, Shape{1, 3, 1}, true},
      {Shape{2, 3, 4, 5}, Shape{}, Shape{}, false},      {Shape{2, 3, 4, 5}, Shape{}, Shape{1, 1, 1, 1}, true},
      {Shape{2, 3, 4, 5}, Shape{1, 3}, Shape{2, 4}, false}, {Shape{1000}, Shape{0}, Shape{}, false},
      {Shape{7, 1}, Shape{1}, Shape{7}, false},
  };
  for (DType dtype : kAllDTypes) {
    for (const Case& c : cases) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(c.shape.str());
      CAPTURE(c.dim.str());
      CAPTURE(c.keepdim);
      const Tensor a = rnd(c.shape, dtype, 11);
      const Tensor s = cpu::sum_dim(a, c.dim, c.keepdim, std::nullopt);
      const Tensor m = cpu::mean_dim(a, c.dim, c.keepdim, std::nullopt);
      CHECK(s.sizes() == c.out);
      CHECK(m.sizes() == c.out);
      CHECK(s.dtype() == dtype);
      check_close(s, reference::sum_dim(a, c.dim, c.keepdim, std::nullopt), dtype);
      check_close(m, reference::mean_dim(a, c.dim, c.keepdim, std::nullopt), dtype);
      // dtype=: the output in f64, from the same double accumulator.
      const Tensor wide = cpu::sum_dim(a, c.dim, c.keepdim, DType::kF64);
      CHECK(wide.dtype() == DType::kF64);
      check_close(wide, reference::sum_dim(a, c.dim, c.keepdim, std::nullopt), DType::kF64);
    }
  }
  // mean over every dim is the plain mean
  const Tensor a = rnd(Shape{4, 6}, DType::kF32, 12);
  check_close(cpu::mean(a, std::nullopt), reference::mean(a, std::nullopt), DType::kF32);
}

TEST_CASE("sum.dim_IntList and mean.dim: empty tensors, 0-d tensors and the refusals, in torch's words") {
  const Tensor empty = Tensor::empty(Shape{0, 3}, DType::kF32, kCPU);
  const Tensor s = cpu::sum_dim(empty, Shape{0}, false, std::nullopt);
  CHECK(s.sizes() == Shape{3});
  for (int i = 0; i < 3; ++i) CHECK(s.data<float>()[i] == 0.0f);
  const Tensor m = cpu::mean_dim(empty, Shape{0}, true, std::nullopt);
  CHECK(m.sizes() == Shape{1, 3});
  CHECK(std::isnan(m.data<float>()[0]));  // 0/0, as torch
  CHECK(cpu::sum_dim(empty, Shape{1}, false, std::nullopt).sizes() == Shape{0});
  const Tensor scalar = rnd(Shape{}, DType::kF64, 13);
  CHECK(cpu::sum_dim(scalar, Shape{-1}, true, std::nullopt).data<double>()[0] == scalar.data<double>()[0]);
  const Tensor a = rnd(Shape{3, 4}, DType::kF32, 14);
  CHECK_THROWS_WITH_AS(cpu::sum_dim(a, Shape{2}, false, std::nullopt),
                       doctest::Contains("Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
                       IndexRangeError);
  CHECK_THROWS_WITH_AS(cpu::mean_dim(a, Shape{0, -2}, false, std::nullopt),
                       doctest::Contains("dim 0 appears multiple times in the list of dims"), UsageError);
}

TEST_CASE("as_strided_scatter refuses a region whose reach overflows int64, and writes nothing outside self") {
  // The furthest element offset + sum((size - 1) * stride) wrapped past 2^63 to a small number that
  // passed the bounds check, and the write landed outside self. Strides near 2^63 / (size - 1), and
  // offsets that push a sum just past INT64_MAX, are refused; a region just inside self still writes.
  const Tensor self = rnd(Shape{4, 6}, DType::kF32, 41);
  const Tensor src = rnd(Shape{2, 3}, DType::kF32, 42);
  const int64_t near = (int64_t{1} << 62) + (int64_t{1} << 61);  // x2 passes INT64_MAX, and wraps to negative
  for (const auto& [stride, offset] : std::vector<std::pair<Shape, int64_t>>{
           {Shape{near, 1}, 0}, {Shape{1, INT64_MAX}, 0}, {Shape{INT64_MAX / 2, INT64_MAX / 2}, 3},
           {Shape{6, 2}, INT64_MAX - 5}}) {
    CHECK_THROWS_AS(kernels::cpu::as_strided_scatter(self, src, Shape{2, 3}, stride, offset), UsageError);
  }
  const Tensor out = kernels::cpu::as_strided_scatter(self, src, Shape{2, 3}, Shape{6, 2}, 13);  // reaches 23
  const std::vector<double> got = reference::to_double(out);
  CHECK(got == reference::as_strided_scatter(self, src, Shape{2, 3}, Shape{6, 2}, 13));
}
