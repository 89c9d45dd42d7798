// In-place ops on tensors with a history (Note [In-place operators], Note [Autograd identity]): the
// tensor's history rebased onto the op's node and seen through every handle, the gradients against
// float64 formulas and central finite differences on fresh random inputs, what mul_ saves, the version
// errors when a saved tensor changes afterwards, and no node leaked by a rebase (copy_slices_test.cpp: views).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "layers/autograd/engine.h"
#include "layers/dispatch/autograd.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "tests/support/error_text.h"

using namespace strata;

namespace {

uint64_t fresh_seed() {
  static std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

Tensor rnd(const Shape& s, DType dtype = DType::kF64) { return frontend::random_tensor(s, dtype, kCPU, fresh_seed()); }
Tensor leaf(const Shape& s, DType dtype = DType::kF64) {
  Tensor t = rnd(s, dtype);
  t.set_requires_grad(true);
  return t;
}
double& at(const Tensor& t, size_t i) { return t.data<double>()[i]; }

// The largest |a - b| / max(|b|, 1) over the elements of f64 tensor `a` and the values `b`.
double error(const Tensor& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < b.size(); ++i) worst = std::max(worst, std::abs(at(a, i) - b[i]) / std::max(std::abs(b[i]), 1.0));
  return worst;
}

const RecordedNode& node_of(const Tensor& t) { return dynamic_cast<const RecordedNode&>(*t.grad_fn()); }

// Central finite differences of sum(f(x)) for every element of x (f64, run without grad).
std::vector<double> finite_differences(const Tensor& x, const std::function<Tensor(const Tensor&)>& f) {
  const NoGradGuard no_grad;
  auto total = [&] {
    const Tensor copy = ops::to_copy(x, std::nullopt);  // f writes in place: never into x itself
    const Tensor y = f(copy);
    double s = 0;
    for (int64_t i = 0; i < y.numel(); ++i) s += at(y, size_t(i));
    return s;
  };
  const double h = 1e-6;
  std::vector<double> g(size_t(x.numel()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double v = at(x, i);
    at(x, i) = v + h;
    const double up = total();
    at(x, i) = v - h;
    const double down = total();
    at(x, i) = v;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

}  // namespace

TEST_CASE("y = x * 2 - y.relu_(): y's grad_fn is ReluBackward over MulBackward, seen through every copy of y") {
  const Tensor x = leaf(Shape{4, 6});
  Tensor y = ops::mul(x, 2.0);
  const Tensor copy = y;  // another handle of the same tensor, taken before the write
  const std::shared_ptr<GradNode> before = y.grad_fn();
  const Tensor out = ops::relu_(y);
  CHECK(std::string(y.grad_fn()->name()) == "ReluBackward");
  CHECK(copy.grad_fn() == y.grad_fn());
  CHECK(out.grad_fn() == y.grad_fn());
  CHECK(node_of(y).next(0) == before);  // edge 0: the history before the write
  CHECK(node_of(y).num_saved() == 1);   // the result, after the write
  CHECK_FALSE(y.is_leaf());
  autograd::backward(ops::sum(y));
  std::vector<double> expected(size_t(x.numel()));
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = at(x, i) > 0 ? 2.0 : 0.0;
  CHECK(error(x.grad(), expected) == 0.0);
}

TEST_CASE("add_ with alpha and mul_ by a tensor that requires grad: gradients of both operands") {
  SUBCASE("y = x * 1.5; y.add_(w, alpha=-0.75)") {
    const Tensor x = leaf(Shape{3, 5}), w = leaf(Shape{5});  // w broadcasts over y's rows
    Tensor y = ops::mul(x, 1.5);
    static_cast<void>(ops::add_(y, w, -0.75));
    CHECK(std::string(y.grad_fn()->name()) == "AddBackward");
    autograd::backward(ops::sum(y));
    CHECK(error(x.grad(), std::vector<double>(15, 1.5)) <= 1e-15);
    CHECK(error(w.grad(), std::vector<double>(5, -0.75 * 3)) <= 1e-15);
  }
  SUBCASE("y = x * 2; y.mul_(w) saves w and a copy of y before the write") {
    const Tensor x = leaf(Shape{2, 7}), w = leaf(Shape{2, 7});
    Tensor y = ops::mul(x, 2.0);
    static_cast<void>(ops::mul_(y, w));
    CHECK(std::string(y.grad_fn()->name()) == "MulBackward");
    CHECK(node_of(y).num_saved() == 2);
    CHECK(y.storage()->version() == 1);
    autograd::backward(ops::sum(y));
    std::vector<double> dx(14), dw(14);
    for (size_t i = 0; i < 14; ++i) {
      dx[i] = 2 * at(w, i);
      dw[i] = 2 * at(x, i);  // y's value before the write, not after
    }
    CHECK(error(x.grad(), dx) <= 1e-15);
    CHECK(error(w.grad(), dw) <= 1e-15);
  }
  SUBCASE("what mul_ saves follows what needs a gradient, as torch's VariableType") {
    Tensor y = ops::mul(leaf(Shape{4}), 2.0);
    static_cast<void>(ops::mul_(y, rnd(Shape{4})));
    CHECK(node_of(y).num_saved() == 1);  // other only: nothing needs y's old value
    CHECK(node_of(y).needs_grad(0));
    CHECK_FALSE(node_of(y).needs_grad(1));
  }
  SUBCASE("self needs no grad, an operand does: self becomes a non-leaf that requires grad") {
    const Tensor z = rnd(Shape{6}), w = leaf(Shape{6});
    const Tensor handle = z;
    const std::vector<double> original = reference::to_double(z);
    static_cast<void>(ops::mul_(z, w));
    CHECK(handle.requires_grad());
    CHECK_FALSE(handle.is_leaf());
    CHECK(node_of(z).num_saved() == 1);  // z's old value only: z itself needs no gradient
    CHECK_FALSE(node_of(z).needs_grad(0));
    autograd::backward(ops::sum(handle));
    CHECK(error(w.grad(), original) == 0.0);
  }
}

TEST_CASE("a chain of in-place ops: gradients against the formula and central finite differences (f64)") {
  const Tensor x = leaf(Shape{3, 4}), w = leaf(Shape{3, 4});
  // sum(relu(-3 (2x w + 0.5 x))): with z = -3 (2w + 0.5) x, d/dx = -3 (z > 0)(2w + 0.5), d/dw = -6 (z > 0) x.
  // relu_ comes last: a write after it would change the result ReluBackward saved (the version error).
  auto chain = [&](const Tensor& in, const Tensor& weight) {
    Tensor y = ops::mul(in, 2.0);
    static_cast<void>(ops::mul_(y, weight));
    static_cast<void>(ops::add_(y, in, 0.5));
    static_cast<void>(ops::mul_(y, -3.0));
    static_cast<void>(ops::relu_(y));
    return y;
  };
  autograd::backward(ops::sum(chain(x, w)));
  std::vector<double> dx(12), dw(12);
  for (size_t i = 0; i < 12; ++i) {
    const bool positive = -3 * (2 * at(w, i) + 0.5) * at(x, i) > 0;
    dx[i] = positive ? -3 * (2 * at(w, i) + 0.5) : 0.0;
    dw[i] = positive ? -6 * at(x, i) : 0.0;
  }
  CHECK(error(x.grad(), dx) <= 1e-14);  // summed in another order than the formula
  CHECK(error(w.grad(), dw) <= 1e-14);
  const Tensor x_values = ops::to_copy(x, std::nullopt), w_values = ops::to_copy(w, std::nullopt);
  CHECK(error(x.grad(), finite_differences(x_values, [&](const Tensor& in) { return chain(in, w_values); })) <= 1e-6);
  CHECK(error(w.grad(), finite_differences(w_values, [&](const Tensor& in) { return chain(x_values, in); })) <= 1e-6);
}

TEST_CASE("a tensor saved for backward and changed in place afterwards: torch's version error, not a wrong gradient") {
  SUBCASE("relu_'s saved result, then mul_.Scalar: at version 2, expected 1, as torch says") {
    const Tensor x = leaf(Shape{5}, DType::kF32);
    Tensor y = ops::mul(x, 2.0);
    static_cast<void>(ops::relu_(y));
    static_cast<void>(ops::mul_(y, 3.0));
    const std::string m = test::message_of<UsageError>([&] { autograd::backward(ops::sum(y)); });
    CHECK(m.find("[f32 [5] cpu], which is output 0 of ReluBackward, is at version 2; expected version 1 instead") !=
          std::string::npos);
    CHECK(m.find("ReluBackward (recorded by relu_)") != std::string::npos);
    CHECK_FALSE(x.grad().defined());
  }
  SUBCASE("mul_'s saved other, written afterwards") {
    const Tensor x = leaf(Shape{5}), c = rnd(Shape{5});
    Tensor y = ops::mul(x, 2.0);
    static_cast<void>(ops::mul_(y, c));
    static_cast<void>(ops::add_(c, rnd(Shape{5}), 1.0));
    const std::string m = test::message_of<UsageError>([&] { autograd::backward(ops::sum(y)); });
    CHECK(m.find("[f64 [5] cpu] is at version 1; expected version 0 instead") != std::string::npos);
  }
  SUBCASE("a view taken before the rebase reads the new history, as torch's regenerated view does") {
    const Tensor x = leaf(Shape{3, 4});
    Tensor y = ops::mul(x, 2.0);
    const Tensor v = ops::t(y);
    static_cast<void>(ops::relu_(y));
    CHECK(std::string(v.grad_fn()->name()) == "AsStridedBackward");  // copy_slices_test.cpp: more
    autograd::backward(ops::sum(v));
    for (size_t i = 0; i < 12; ++i) CHECK(at(x.grad(), i) == (at(x, i) > 0 ? 2.0 : 0.0));
  }
}

TEST_CASE("a rebase frees its graph: no node outlives the tensors, even when y's new node reaches y's saver") {
  const int64_t before = RecordedNode::live_count();
  {
    const Tensor x = leaf(Shape{4}), w = leaf(Shape{4});
    Tensor y = ops::mul(x, 2.0);
    const Tensor z = ops::mul(y, w);  // MulBackward saves y
    static_cast<void>(ops::add_(y, z, 1.0));  // y's AddBackward has an edge to z's MulBackward
    static_cast<void>(ops::relu_(y));
    CHECK(RecordedNode::live_count() == before + 4);
  }
  CHECK(RecordedNode::live_count() == before);
}
