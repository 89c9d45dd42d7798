// matmul with torch.matmul's shape rules (Note [matmul's shape rules] in lib/op_shapes.h) and linear on
// N-D input, through the dispatcher to the CPU kernels: every case against the float64 reference on fresh
// random inputs in f32 and f64 (1-D/1-D, 1-D/2-D, 2-D/1-D, batched, broadcast batch, transposed views in
// a batch), the engine's gradients against the reference gradients, the reference gradients against
// central finite differences of the forward reference, and the refusals in torch's words.
//
// "Fresh": the seed differs on every run and is printed with any failure; set STRATA_TEST_SEED to replay.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "layers/autograd/engine.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "lib/op_shapes.h"
#include "tests/kernels/fresh_seed.h"

using namespace strata;
using strata::testing::run_seed;

namespace {

Tensor rnd(const Shape& s, DType dtype, uint64_t stream) {
  return frontend::random_tensor(s, dtype, kCPU, run_seed() + stream * 7919);
}

struct Case {
  Shape self, other, out;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {Shape{4}, Shape{4}, Shape{}},                        // dot: 0-d
      {Shape{4}, Shape{4, 5}, Shape{5}},                    // row vector
      {Shape{3, 4}, Shape{4}, Shape{3}},                    // column vector
      {Shape{3, 4}, Shape{4, 5}, Shape{3, 5}},              // the 2-D product
      {Shape{2, 3, 4}, Shape{2, 4, 5}, Shape{2, 3, 5}},     // batched
      {Shape{2, 1, 3, 4}, Shape{5, 4, 6}, Shape{2, 5, 3, 6}},  // broadcast batch
      {Shape{3, 4}, Shape{2, 4, 5}, Shape{2, 3, 5}},        // a matrix against a batch
      {Shape{4}, Shape{2, 4, 5}, Shape{2, 5}},              // a vector against a batch
      {Shape{2, 3, 4}, Shape{4}, Shape{2, 3}},
      {Shape{2, 0, 4}, Shape{4, 3}, Shape{2, 0, 3}},        // empty
      {Shape{2, 3, 0}, Shape{2, 0, 5}, Shape{2, 3, 5}},     // an empty sum: zeros
  };
  return kCases;
}

std::string usage_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no UsageError>";
}

}  // namespace

TEST_CASE("matmul, torch.matmul's cases: the CPU kernel against the float64 reference, f32 and f64") {
  CAPTURE(run_seed());
  uint64_t stream = 1;
  for (const Case& c : cases()) {
    CAPTURE(c.self.str());
    CAPTURE(c.other.str());
    for (DType dtype : {DType::kF32, DType::kF64}) {
      CAPTURE(dtype_name(dtype));
      const Tensor a = rnd(c.self, dtype, stream++), b = rnd(c.other, dtype, stream++);
      const Tensor out = ops::matmul(a, b);
      CHECK(out.sizes() == c.out);
      CHECK(out.dtype() == dtype);
      CHECK(reference::relative_error(out, reference::matmul(a, b)) <= reference::tolerance(dtype));
    }
  }
}

TEST_CASE("matmul: transposed and permuted views in a batch are read through the op flags, as the reference reads them") {
  CAPTURE(run_seed());
  for (DType dtype : {DType::kF32, DType::kF64}) {
    CAPTURE(dtype_name(dtype));
    // [2,4,3] read as [2,3,4]; [6,4] read as [4,6]; the batch broadcast against a plain [2,4,6] too.
    const Tensor a = ops::transpose(rnd(Shape{2, 4, 3}, dtype, 1), 1, 2);
    const Tensor b = ops::t(rnd(Shape{6, 4}, dtype, 2));
    const Tensor c = rnd(Shape{2, 4, 6}, dtype, 3);
    REQUIRE(!a.is_contiguous());
    CHECK(reference::relative_error(ops::matmul(a, b), reference::matmul(a, b)) <= reference::tolerance(dtype));
    CHECK(reference::relative_error(ops::matmul(a, c), reference::matmul(a, c)) <= reference::tolerance(dtype));
    // A permuted batch: batch strides out of order, matrices transposed.
    const Tensor p = ops::permute(rnd(Shape{5, 2, 4, 3}, dtype, 4), Shape{1, 0, 3, 2});  // [2,5,3,4]
    const Tensor q = ops::transpose(rnd(Shape{5, 6, 4}, dtype, 5), 1, 2);                // [5,4,6]
    const Tensor pq = ops::matmul(p, q);
    CHECK(pq.sizes() == Shape{2, 5, 3, 6});
    CHECK(reference::relative_error(pq, reference::matmul(p, q)) <= reference::tolerance(dtype));
    // An expanded (stride 0) batch dim.
    const Tensor e = ops::expand(rnd(Shape{1, 3, 4}, dtype, 6), Shape{2, 3, 4});
    CHECK(reference::relative_error(ops::matmul(e, c), reference::matmul(e, c)) <= reference::tolerance(dtype));
  }
}

TEST_CASE("linear on N-D input: [..., IN] x [OUT,IN]^T + [OUT] against the reference, views included") {
  CAPTURE(run_seed());
  for (DType dtype : {DType::kF32, DType::kF64}) {
    CAPTURE(dtype_name(dtype));
    const Tensor w = rnd(Shape{4, 5}, dtype, 1), bias = rnd(Shape{4}, dtype, 2);
    for (const Shape& s : {Shape{5}, Shape{3, 5}, Shape{2, 3, 5}, Shape{2, 2, 3, 5}}) {
      CAPTURE(s.str());
      const Tensor x = rnd(s, dtype, 3);
      const Tensor y = ops::linear(x, w, bias);
      CHECK(y.sizes() == op_shapes::linear(s, w.sizes(), &bias.sizes()));
      CHECK(reference::relative_error(y, reference::linear(x, w, bias)) <= reference::tolerance(dtype));
      CHECK(reference::relative_error(ops::linear(x, w, Tensor()), reference::linear(x, w, Tensor())) <=
            reference::tolerance(dtype));
    }
    const Tensor xv = ops::transpose(rnd(Shape{2, 5, 3}, dtype, 4), 1, 2);  // [2,3,5], a batch of transposed matrices
    CHECK(reference::relative_error(ops::linear(xv, w, bias), reference::linear(xv, w, bias)) <=
          reference::tolerance(dtype));
  }
}

TEST_CASE("matmul and linear gradients: the engine against the reference, the reference against finite differences") {
  CAPTURE(run_seed());
  uint64_t stream = 100;
  for (const Case& c : cases()) {
    CAPTURE(c.self.str());
    CAPTURE(c.other.str());
    for (DType dtype : {DType::kF32, DType::kF64}) {
      CAPTURE(dtype_name(dtype));
      Tensor a = rnd(c.self, dtype, stream++), b = rnd(c.other, dtype, stream++);
      a.set_requires_grad(true);
      b.set_requires_grad(true);
      const Tensor out = ops::matmul(a, b);
      const Tensor upstream = rnd(out.sizes(), dtype, stream++);
      autograd::backward(out, upstream);
      const reference::Grads want = reference::matmul_backward(upstream, a, b);
      REQUIRE(a.grad().defined());
      REQUIRE(b.grad().defined());
      CHECK(a.grad().sizes() == c.self);
      CHECK(b.grad().sizes() == c.other);
      CHECK(reference::relative_error(a.grad(), want[0]) <= reference::tolerance(dtype));
      CHECK(reference::relative_error(b.grad(), want[1]) <= reference::tolerance(dtype));
    }
    // The reference's gradients: d/dx_i of sum(w * matmul(a, b)), each element perturbed by +-h in f64.
    constexpr double kStep = 1e-6;
    const Tensor a = rnd(c.self, DType::kF64, stream++), b = rnd(c.other, DType::kF64, stream++);
    const Tensor w = rnd(c.out, DType::kF64, stream++);
    const std::vector<double> wv = reference::to_double(w);
    const reference::Grads grads = reference::matmul_backward(w, a, b);
    for (int arg = 0; arg < 2; ++arg) {
      const Tensor& x = arg == 0 ? a : b;
      REQUIRE(grads[static_cast<size_t>(arg)].size() == static_cast<size_t>(x.numel()));
      for (size_t i = 0; i < static_cast<size_t>(x.numel()); ++i) {
        double& v = x.data<double>()[i];
        const double saved = v;
        auto objective = [&] {
          const std::vector<double> y = reference::matmul(a, b);
          double acc = 0;
          for (size_t j = 0; j < y.size(); ++j) acc += wv[j] * y[j];
          return acc;
        };
        v = saved + kStep;
        const double up = objective();
        v = saved - kStep;
        const double down = objective();
        v = saved;
        const double numeric = (up - down) / (2 * kStep);
        CHECK(std::abs(numeric - grads[static_cast<size_t>(arg)][i]) <= 1e-6 * std::max(1.0, std::abs(numeric)));
      }
    }
  }
  // linear on 3-D input: input, weight and bias gradients.
  for (DType dtype : {DType::kF32, DType::kF64}) {
    CAPTURE(dtype_name(dtype));
    Tensor x = rnd(Shape{2, 3, 5}, dtype, 1), w = rnd(Shape{4, 5}, dtype, 2), bias = rnd(Shape{4}, dtype, 3);
    x.set_requires_grad(true);
    w.set_requires_grad(true);
    bias.set_requires_grad(true);
    const Tensor y = ops::linear(x, w, bias);
    const Tensor upstream = rnd(y.sizes(), dtype, 4);
    autograd::backward(y, upstream);
    const reference::Grads want = reference::linear_backward(upstream, x, w, bias);
    CHECK(x.grad().sizes() == x.sizes());
    CHECK(reference::relative_error(x.grad(), want[0]) <= reference::tolerance(dtype));
    CHECK(reference::relative_error(w.grad(), want[1]) <= reference::tolerance(dtype));
    CHECK(reference::relative_error(bias.grad(), want[2]) <= reference::tolerance(dtype));
  }
}

TEST_CASE("matmul and linear refuse shapes that do not multiply, in torch's words") {
  const Tensor a = rnd(Shape{3, 4}, DType::kF32, 1), b = rnd(Shape{5, 6}, DType::kF32, 2);
  CHECK(usage_message([&] { ops::matmul(a, b); }).find("mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)") !=
        std::string::npos);
  const Tensor v3 = rnd(Shape{3}, DType::kF32, 3), v4 = rnd(Shape{4}, DType::kF32, 4);
  CHECK(usage_message([&] { ops::matmul(v3, v4); }).find("inconsistent tensor size") != std::string::npos);
  const Tensor p = rnd(Shape{2, 3, 4}, DType::kF32, 5), q = rnd(Shape{3, 4, 5}, DType::kF32, 6);
  CHECK(usage_message([&] { ops::matmul(p, q); }).find("must match the size of tensor b (3)") != std::string::npos);
  const Tensor w = rnd(Shape{5, 3}, DType::kF32, 7);
  CHECK(usage_message([&] { ops::linear(p, w, Tensor()); })
            .find("mat1 and mat2 shapes cannot be multiplied (6x4 and 3x5)") != std::string::npos);
}
