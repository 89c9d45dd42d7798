// Broadcasting for add, sub, mul and div (Note [Broadcasting] in lib/op_shapes.h, docs/broadcasting.md): the
// CPU kernels against the float64 reference on fresh random inputs in every dtype, the reference against
// values computed by hand, the gradients (each summed over its operand's broadcast dims, Note [Broadcast
// gradients]) against the reference's and the reference's against central differences, and the kernels
// reading expanded views without a contiguous() copy.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "layers/autograd/engine.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "lib/op_shapes.h"
#include "tests/kernels/fresh_seed.h"
#include "tests/support/error_text.h"

using namespace strata;
using strata::testing::run_seed;
using test::message_of;

namespace {

Tensor rnd(const Shape& s, DType dtype, uint64_t seed) { return frontend::random_tensor(s, dtype, kCPU, seed); }

// (self, other, the broadcast shape): trailing alignment, dims of 1 on either side, 0-d scalars.
struct Case {
  Shape self, other, out;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {Shape{3, 4}, Shape{4}, Shape{3, 4}},          {Shape{4}, Shape{3, 4}, Shape{3, 4}},
      {Shape{2, 1, 4}, Shape{3, 1}, Shape{2, 3, 4}}, {Shape{}, Shape{2, 3}, Shape{2, 3}},
      {Shape{2, 3}, Shape{}, Shape{2, 3}},           {Shape{4, 1}, Shape{1, 5}, Shape{4, 5}},
      {Shape{1}, Shape{3, 1, 2}, Shape{3, 1, 2}},    {Shape{2, 3, 1, 5}, Shape{3, 4, 1}, Shape{2, 3, 4, 5}},
  };
  return kCases;
}

// op(a, b) for the three ops, with alpha where the op has one (a value that is not 1 tests its scaling).
struct Binary {
  std::string name;  // a std::string so that CAPTURE prints the name, not the pointer
  std::function<Tensor(const Tensor&, const Tensor&)> run;
  std::function<std::vector<double>(const Tensor&, const Tensor&)> ref;
  std::function<reference::Grads(const Tensor&, const Tensor&, const Tensor&)> ref_grad;
  bool divides = false;  // other is a divisor: drawn away from 0 (|b| in [0.5, 1.5)), see operand_b
};
std::vector<Binary> binaries() {
  constexpr double kAlpha = 0.75;
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return ops::add(a, b, kAlpha); },
       [](const Tensor& a, const Tensor& b) { return reference::add(a, b, kAlpha); },
       [](const Tensor& g, const Tensor& a, const Tensor& b) { return reference::add_backward(g, a, b, kAlpha); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return ops::sub(a, b, kAlpha); },
       [](const Tensor& a, const Tensor& b) { return reference::sub(a, b, kAlpha); },
       [](const Tensor& g, const Tensor& a, const Tensor& b) { return reference::sub_backward(g, a, b, kAlpha); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); },
       [](const Tensor& a, const Tensor& b) { return reference::mul(a, b); },
       [](const Tensor& g, const Tensor& a, const Tensor& b) { return reference::mul_backward(g, a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return ops::div(a, b); },
       [](const Tensor& a, const Tensor& b) { return reference::div(a, b); },
       [](const Tensor& g, const Tensor& a, const Tensor& b) { return reference::div_backward(g, a, b); }, true},
  };
}

// The second operand: uniform in [-1, 1), or for a divisor that shifted away from 0 by 0.5 on its own side,
// so that neither the quotient's gradient nor central differences meet a pole.
Tensor operand_b(const Binary& op, const Shape& s, DType dtype, uint64_t seed) {
  if (!op.divides) return rnd(s, dtype, seed);
  Tensor t = rnd(s, DType::kF64, seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double& v = t.data<double>()[i];
    v += v < 0 ? -0.5 : 0.5;
  }
  return dtype == DType::kF64 ? t : ops::to_copy(t, dtype);
}

// A float64 copy of t's magnitudes (to_double reads every dtype, including t's own float64, without aliasing it).
Tensor magnitudes(const Tensor& t) {
  const std::vector<double> values = reference::to_double(t);
  Tensor out = Tensor::empty(t.sizes(), DType::kF64, kCPU);
  for (size_t i = 0; i < values.size(); ++i) out.data<double>()[i] = std::fabs(values[i]);
  return out;
}

// Note [Broadcast gradients against the terms' magnitudes]: an operand's gradient sums g, g b, g / b or
// -g a / b^2 over its broadcast dims: terms of both signs, each rounded to the dtype before the (double)
// sum, so the error is a few roundings of the sum of their magnitudes, which can be far above a sum that
// cancels. relative_error's floor of 0.25 is not enough in bf16: the gradient of a scalar divisor against
// a 2x3 operand, terms up to 4 in magnitude, erred 0.051 relative to its cancelled sum (seed 3064482806)
// while under 0.3% relative to the terms. So each element of the error is measured against the sum of its
// terms' magnitudes: every formula here is a product of g, a, b and reciprocals, so the same reference
// gradient on |g|, |a|, |b| gives exactly that sum. Without a broadcast there is one term and the bound is
// relative_error's; a wrong gradient (a missed sum, a sign) errs by the terms' scale and still fails.
double error_against_terms(const Tensor& got, const std::vector<double>& ref, const std::vector<double>& terms) {
  constexpr double kScaleFloor = 0.25;  // as relative_error's
  const std::vector<double> values = reference::to_double(got);
  REQUIRE(values.size() == ref.size());
  REQUIRE(terms.size() == ref.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (values[i] - ref[i]) * (values[i] - ref[i]);
    norm += std::max(terms[i] * terms[i], kScaleFloor * kScaleFloor);
  }
  if (!std::isfinite(diff)) return INFINITY;
  return ref.empty() ? 0.0 : std::sqrt(diff / norm);
}

}  // namespace

TEST_CASE("the broadcast shape rule: trailing alignment, dims of 1, scalars - a mismatch names both shapes") {
  for (const Case& c : cases()) {
    CAPTURE(c.self.str());
    CAPTURE(c.other.str());
    CHECK(op_shapes::broadcast("add", c.self, c.other) == c.out);
  }
  CHECK_THROWS_AS(op_shapes::broadcast("add", Shape{3, 4}, Shape{3}), UsageError);
  CHECK(message_of<UsageError>([] { op_shapes::broadcast("mul", Shape{2, 3}, Shape{4, 3}); }) ==
          "mul: shapes [2x3] and [4x3] cannot broadcast: size 2 and size 4 at dim -2 (aligned from the last dim, "
        "each pair of sizes must be equal or one of them 1)");
  // Through the dispatcher: the CPU kernel refuses before allocating.
  const Tensor a = rnd(Shape{3, 4}, DType::kF32, 1), b = rnd(Shape{3}, DType::kF32, 2);
  CHECK_THROWS_AS(ops::add(a, b, 1.0), UsageError);
  CHECK(message_of<UsageError>([&] {
          ops::sub(a, b, 1.0);
        }).rfind("sub: shapes [3x4] and [3] cannot broadcast", 0) == 0);
}

TEST_CASE("the reference broadcasts by hand-computed values") {
  // [2,1] + 0.5 * [3]: row r is a[r] + 0.5 * b.
  const Tensor a = rnd(Shape{2, 1}, DType::kF64, 3), b = rnd(Shape{3}, DType::kF64, 4);
  const auto av = reference::to_double(a), bv = reference::to_double(b);
  const auto out = reference::add(a, b, 0.5);
  REQUIRE(out.size() == 6);
  for (size_t r = 0; r < 2; ++r)
    for (size_t c = 0; c < 3; ++c) CHECK(out[r * 3 + c] == av[r] + 0.5 * bv[c]);
  // Its gradients: a's sums each row, b's each column (scaled by alpha).
  const Tensor g = rnd(Shape{2, 3}, DType::kF64, 5);
  const auto gv = reference::to_double(g);
  const auto grads = reference::add_backward(g, a, b, 0.5);
  CHECK(grads[0][1] == doctest::Approx(gv[3] + gv[4] + gv[5]));
  CHECK(grads[1][2] == doctest::Approx(0.5 * (gv[2] + gv[5])));
}

TEST_CASE("add, sub, mul and div broadcast in every dtype, against the float64 reference on fresh inputs") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  for (const Binary& op : binaries())
    for (const Case& c : cases())
      for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
        CAPTURE(op.name);
        CAPTURE(c.self.str());
        CAPTURE(c.other.str());
        CAPTURE(dtype_name(dtype));
        const Tensor a = rnd(c.self, dtype, seed), b = operand_b(op, c.other, dtype, seed + 1);
        const Tensor out = op.run(a, b);
        CHECK(out.sizes() == c.out);
        CHECK(out.dtype() == dtype);
        CHECK(reference::relative_error(out, op.ref(a, b)) <= reference::tolerance(dtype));
      }
}

TEST_CASE("each gradient is summed over its operand's broadcast dims: engine against the reference") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  for (const Binary& op : binaries())
    for (const Case& c : cases())
      for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16}) {
        CAPTURE(op.name);
        CAPTURE(c.self.str());
        CAPTURE(c.other.str());
        CAPTURE(dtype_name(dtype));
        Tensor a = rnd(c.self, dtype, seed), b = operand_b(op, c.other, dtype, seed + 1);
        a.set_requires_grad(true);
        b.set_requires_grad(true);
        const Tensor g = rnd(c.out, dtype, seed + 2);
        autograd::backward(op.run(a, b), g);
        const auto expected = op.ref_grad(g, a, b);
        const auto terms = op.ref_grad(magnitudes(g), magnitudes(a), magnitudes(b));
        REQUIRE(a.grad().defined());
        REQUIRE(b.grad().defined());
        CHECK(a.grad().sizes() == c.self);
        CHECK(b.grad().sizes() == c.other);
        CHECK(a.grad().dtype() == dtype);
        CHECK(error_against_terms(a.grad(), expected[0], terms[0]) <= reference::tolerance(dtype));
        CHECK(error_against_terms(b.grad(), expected[1], terms[1]) <= reference::tolerance(dtype));
      }
}

TEST_CASE("the reference's broadcast gradients against central differences of the reference") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  constexpr double kH = 1e-6;
  for (const Binary& op : binaries())
    for (const Case& c : cases()) {
      CAPTURE(op.name);
      CAPTURE(c.self.str());
      CAPTURE(c.other.str());
      Tensor in[2] = {rnd(c.self, DType::kF64, seed), operand_b(op, c.other, DType::kF64, seed + 1)};
      const Tensor g = rnd(c.out, DType::kF64, seed + 2);
      const auto gv = reference::to_double(g);
      const auto grads = op.ref_grad(g, in[0], in[1]);
      // d/dx_j of sum(g * op(a, b)), one coordinate at a time.
      auto loss = [&] {
        const auto y = op.ref(in[0], in[1]);
        double s = 0;
        for (size_t i = 0; i < y.size(); ++i) s += gv[i] * y[i];
        return s;
      };
      for (int k = 0; k < 2; ++k)
        for (int64_t j = 0; j < in[k].numel(); ++j) {
          double* x = in[k].data<double>() + j;
          const double keep = *x;
          *x = keep + kH;
          const double up = loss();
          *x = keep - kH;
          const double down = loss();
          *x = keep;
          CHECK(grads[static_cast<size_t>(k)][static_cast<size_t>(j)] == doctest::Approx((up - down) / (2 * kH)).epsilon(1e-6));
        }
    }
}

#if STRATA_TRACING
TEST_CASE("a broadcast operand is read as an expanded view: no contiguous() copy, no copy of its values") {
  const Tensor a = rnd(Shape{64, 32}, DType::kF32, 6), b = rnd(Shape{32}, DType::kF32, 7);
  Timeline tl;
  {
    tracing::ActiveScope scope(&tl);
    static_cast<void>(ops::add(a, b, 1.0));
  }
  std::vector<std::string> dispatch, library;
  for (const Span& s : tl.spans()) (s.layer == Layer::kDispatch ? dispatch : library).emplace_back(s.name);
  for (const std::string& d : dispatch) CHECK(d.find("contiguous") == std::string::npos);
  int expands = 0;
  for (const std::string& l : library) expands += l.rfind("expand (view", 0) == 0 ? 1 : 0;
  CHECK(expands == 2);
  CHECK(library.back() == "broadcast loop (expanded views read through their strides, no copy)");
}
#endif

// ---- Type promotion (Note [Type promotion] in lib/op_shapes.h) ------------------------------------------

TEST_CASE("the promotion rule among f16, bf16, f32 and f64, as PyTorch's") {
  CHECK(op_shapes::promote_types(DType::kF32, DType::kF64) == DType::kF64);
  CHECK(op_shapes::promote_types(DType::kF16, DType::kF64) == DType::kF64);
  CHECK(op_shapes::promote_types(DType::kF16, DType::kBF16) == DType::kF32);
  CHECK(op_shapes::promote_types(DType::kBF16, DType::kF32) == DType::kF32);
  CHECK(op_shapes::promote_types(DType::kF16, DType::kF16) == DType::kF16);
}

TEST_CASE("add, sub, mul and div of two dtypes compute in the promoted one, against the float64 reference") {
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  const std::pair<DType, DType> pairs[] = {{DType::kF32, DType::kF64}, {DType::kF16, DType::kBF16},
                                           {DType::kBF16, DType::kF32}, {DType::kF64, DType::kF16}};
  for (const Binary& op : binaries())
    for (const auto& pair : pairs) {  // no structured binding: clang 14 cannot CAPTURE one
      const DType da = pair.first, db = pair.second;
      CAPTURE(op.name);
      CAPTURE(dtype_name(da));
      CAPTURE(dtype_name(db));
      const DType common = op_shapes::promote_types(da, db);
      // Broadcasting and promotion together: [3,4] with [4].
      Tensor a = rnd(Shape{3, 4}, da, seed), b = operand_b(op, Shape{4}, db, seed + 1);
      a.set_requires_grad(true);
      b.set_requires_grad(true);
      const Tensor out = op.run(a, b);
      CHECK(out.dtype() == common);
      CHECK(reference::relative_error(out, op.ref(a, b)) <= reference::tolerance(common));
      // Each gradient comes back in its operand's dtype, summed over the broadcast dim.
      const Tensor g = rnd(Shape{3, 4}, common, seed + 2);
      autograd::backward(out, g);
      const auto expected = op.ref_grad(g, a, b);
      CHECK(a.grad().dtype() == da);
      CHECK(b.grad().dtype() == db);
      CHECK(b.grad().sizes() == Shape{4});
      CHECK(reference::relative_error(a.grad(), expected[0]) <= reference::tolerance(da) + reference::tolerance(common));
      CHECK(reference::relative_error(b.grad(), expected[1]) <= reference::tolerance(db) + reference::tolerance(common));
    }
  // A Python number does not promote: an f16 tensor times 2.0 stays f16 (mul.Scalar).
  CHECK(ops::mul(rnd(Shape{4}, DType::kF16, seed), 2.0).dtype() == DType::kF16);
}

TEST_CASE("a 0-d tensor beside a dimensioned one does not promote it, as PyTorch's result_type") {
  // Every strata dtype is floating, one category: the dimensioned operand's dtype wins whatever the 0-d
  // one's ([n] f32 * 0-d f64 is f32, [n] bf16 * 0-d f16 is bf16); two 0-d or two dimensioned operands
  // promote as promote_types. A [1] tensor is dimensioned.
  const uint64_t seed = run_seed();
  CAPTURE(seed);
  for (const DType dim_dtype : kAllDTypes)
    for (const DType scalar_dtype : kAllDTypes) {
      CAPTURE(dtype_name(dim_dtype));
      CAPTURE(dtype_name(scalar_dtype));
      const Tensor d = rnd(Shape{2, 3}, dim_dtype, seed), one = rnd(Shape{1}, dim_dtype, seed + 3);
      const Tensor s = rnd(Shape{}, scalar_dtype, seed + 1), s2 = rnd(Shape{}, dim_dtype, seed + 2);
      CHECK(op_shapes::result_type(d, s) == dim_dtype);
      CHECK(op_shapes::result_type(s, one) == dim_dtype);
      CHECK(op_shapes::result_type(s, s2) == op_shapes::promote_types(scalar_dtype, dim_dtype));
      CHECK(op_shapes::result_type(one, rnd(Shape{4}, scalar_dtype, seed + 4)) ==
            op_shapes::promote_types(scalar_dtype, dim_dtype));
    }
  // Through the ops, values against the reference and each gradient in its operand's dtype and shape.
  for (const Binary& op : binaries()) {
    CAPTURE(op.name);
    Tensor a = rnd(Shape{3, 4}, DType::kBF16, seed), b = operand_b(op, Shape{}, DType::kF64, seed + 1);
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    for (const bool scalar_first : {false, true}) {
      if (scalar_first && op.divides) continue;  // a bf16 divisor may be near 0
      const Tensor out = scalar_first ? op.run(b, a) : op.run(a, b);
      CHECK(out.dtype() == DType::kBF16);
      CHECK(out.sizes() == Shape{3, 4});
      CHECK(reference::relative_error(out, scalar_first ? op.ref(b, a) : op.ref(a, b)) <=
            reference::tolerance(DType::kBF16));
    }
    autograd::backward(op.run(a, b), rnd(Shape{3, 4}, DType::kBF16, seed + 2));
    CHECK(a.grad().dtype() == DType::kBF16);
    CHECK(b.grad().dtype() == DType::kF64);
    CHECK(b.grad().dim() == 0);
  }
  CHECK(ops::mul(rnd(Shape{}, DType::kF16, seed), rnd(Shape{}, DType::kBF16, seed + 1)).dtype() == DType::kF32);
  CHECK(ops::mul(rnd(Shape{5}, DType::kF16, seed), rnd(Shape{5}, DType::kBF16, seed + 1)).dtype() == DType::kF32);
}

#if STRATA_TRACING
TEST_CASE("the promoted operand's cast is a to_copy call of its own - one dtype makes none") {
  const Tensor a = rnd(Shape{8}, DType::kF32, 8), b = rnd(Shape{8}, DType::kF64, 9);
  auto dispatch_rows = [](const std::function<void()>& f) {
    Timeline tl;
    {
      tracing::ActiveScope scope(&tl);
      f();
    }
    std::vector<std::string> names;
    for (const Span& s : tl.spans())
      if (s.layer == Layer::kDispatch) names.emplace_back(s.name);
    return names;
  };
  int casts = 0;
  for (const std::string& n : dispatch_rows([&] { static_cast<void>(ops::mul(a, b)); }))
    casts += n.rfind("to_copy", 0) == 0 ? 1 : 0;
  CHECK(casts == 1);
  for (const std::string& n : dispatch_rows([&] { static_cast<void>(ops::mul(b, b)); }))
    CHECK(n.rfind("to_copy", 0) != 0);
}
#endif
