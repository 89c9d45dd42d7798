// In-place ops through views (Note [CopySlices] in layers/ops/copy_slices.h, Note [Views and their base's
// history] in lib/tensor.h): the base's history rebased onto CopySlices, the view's grad_fn regenerated,
// gradients of every input against central finite differences in float64 on fresh random inputs, what
// is refused and in whose words, the version error through a view, and graphs freed without recursion.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "layers/autograd/engine.h"
#include "layers/dispatch/autograd.h"
#include "layers/frontend/frontend.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "tests/autograd/view_gradients.h"
#include "tests/support/error_text.h"

using namespace strata;
using namespace strata::testing::views;

TEST_CASE("b[1:3].relu_(): b's grad_fn is CopySlices, the view's AsStridedBackward, gradients as finite differences") {
  const Tensor x = leaf(Shape{4, 3}), w = rnd(Shape{4, 3});
  Tensor b = ops::mul(x, 1.0);
  const Tensor v = ops::slice(b, 0, 1, 3, 1);
  CHECK(grad_fn_name(v) == "SliceBackward");
  static_cast<void>(ops::relu_(v));
  CHECK(grad_fn_name(b) == "CopySlices");
  CHECK(grad_fn_name(v) == "AsStridedBackward");  // regenerated when read, as torch's view
  CHECK(b.grad_fn()->num_saved() == 1);           // ReluBackward's result, inside CopySlices
  const Program program = [&](const std::vector<Tensor>& in) {
    Tensor base = ops::mul(in[0], 1.0);
    static_cast<void>(ops::relu_(ops::slice(base, 0, 1, 3, 1)));
    return weighted_sum(base, w);
  };
  check_gradients({x}, program);
  // Exactly: w outside rows 1..2, w where the relu passed inside them.
  for (size_t i = 0; i < 12; ++i) {
    const bool inside = i >= 3 && i < 9;
    CHECK(at(x.grad(), i) == (inside && at(x, i) <= 0 ? 0.0 : at(w, i)));
  }
}

TEST_CASE("b.t().add_(c, alpha) and b[:, ::2].mul_(c): both operands' gradients as finite differences") {
  const Tensor w = rnd(Shape{3, 4});
  SUBCASE("add_ through a transpose") {
    const Tensor x = leaf(Shape{3, 4}), c = leaf(Shape{4, 3});
    check_gradients({x, c}, [&](const std::vector<Tensor>& in) {
            Tensor b = ops::mul(in[0], 2.0);
            const Tensor t = ops::t(b);
            static_cast<void>(ops::add_(t, in[1], -0.75));
            if (grad_mode_enabled()) CHECK(grad_fn_name(t) == "AsStridedBackward");  // not in the differences
            return weighted_sum(b, w);
          });
    for (size_t r = 0; r < 4; ++r)
      for (size_t col = 0; col < 3; ++col) CHECK(at(c.grad(), r * 3 + col) == -0.75 * at(w, col * 4 + r));
  }
  SUBCASE("mul_ through a stepped slice, other broadcast along the rows") {
    const Tensor x = leaf(Shape{3, 4}), c = leaf(Shape{2});
    check_gradients({x, c}, [&](const std::vector<Tensor>& in) {
            Tensor b = ops::mul(in[0], 1.0);
            static_cast<void>(ops::mul_(ops::slice(b, 1, 0, kEnd, 2), in[1]));
            return weighted_sum(b, w);
          });
  }
  SUBCASE("a chain of views, b[1][::2], then mul_.Scalar and relu_ on it") {
    const Tensor x = leaf(Shape{3, 4});
    check_gradients({x}, [&](const std::vector<Tensor>& in) {
            Tensor b = ops::mul(in[0], 1.0);
            const Tensor v = ops::slice(ops::select(b, 0, 1), 0, 0, kEnd, 2);
            static_cast<void>(ops::mul_(v, -3.0));
            static_cast<void>(ops::relu_(v));  // a second write through the regenerated view
            return weighted_sum(b, w);
          });
  }
  SUBCASE("a base that does not require grad gets a history from the operand") {
    // The view is not recorded (z needs no gradient), yet knows its base: torch's rebase
    // (tests/autograd/unrecorded_views_test.cpp has the rest).
    const Tensor values = rnd(Shape{3, 4});
    check_gradients({leaf(Shape{4})}, [&](const std::vector<Tensor>& in) {
            const Tensor z = ops::mul(values, 1.0);
            static_cast<void>(ops::add_(ops::select(z, 0, 1), in[0], 1.0));
            return weighted_sum(z, w);
          });
  }
}

TEST_CASE("a view taken before its base was rebased regenerates its grad_fn, as torch's does") {
  const Tensor x = leaf(Shape{3, 4});
  Tensor y = ops::mul(x, 2.0);
  const Tensor v = ops::t(y);
  static_cast<void>(ops::relu_(y));  // y itself, not a view: ReluBackward; v and row are now stale
  CHECK(grad_fn_name(v) == "AsStridedBackward");
  autograd::backward(ops::sum(v));
  for (size_t i = 0; i < 12; ++i) CHECK(at(x.grad(), i) == (at(x, i) > 0 ? 2.0 : 0.0));
  // A write through one view makes another stale too: row reads the CopySlices history.
  const Tensor x2 = leaf(Shape{3, 4});
  Tensor b = ops::mul(x2, 1.0);
  const Tensor first = ops::select(b, 0, 0), whole = ops::narrow(b, 1, 0, 4);
  static_cast<void>(ops::mul_(first, 5.0));
  CHECK(grad_fn_name(whole) == "AsStridedBackward");
  autograd::backward(ops::sum(whole));
  for (size_t i = 0; i < 12; ++i) CHECK(at(x2.grad(), i) == (i < 4 ? 5.0 : 1.0));
}

TEST_CASE("refused as torch refuses: a view of a leaf, a view that repeats elements") {
  const Tensor x = leaf(Shape{3, 4});
  const std::string m = test::message_of<UsageError>([&] { static_cast<void>(ops::relu_(ops::select(x, 0, 1))); });
  CHECK(m.find("a view of a leaf Variable that requires grad is being used in an in-place operation. (relu_ on "
               "[f64 [4] cpu]") == 0);
  CHECK(x.storage()->version() == 0);
  {
    const NoGradGuard no_grad;  // an optimizer's update through a view: allowed
    static_cast<void>(ops::mul_(ops::select(x, 0, 1), 0.5));
  }
  CHECK(x.storage()->version() == 1);
  const Tensor y = ops::mul(leaf(Shape{1, 4}), 1.0);
  const std::string n =
      test::message_of<UsageError>([&] { static_cast<void>(ops::mul_(ops::expand(y, Shape{3, 4}), 2.0)); });
  CHECK(n.find("unsupported operation: more than one element of the written-to tensor refers to a single memory "
               "location") == 0);
}

TEST_CASE("a tensor saved for backward and written through a view: the version error, naming its node") {
  const Tensor x = leaf(Shape{3, 4}), w = leaf(Shape{3, 4});
  Tensor b = ops::mul(x, 1.0);
  const Tensor z = ops::mul(b, w);  // MulBackward saves b for w's gradient
  static_cast<void>(ops::mul_(ops::slice(b, 0, 0, 1, 1), 2.0));
  const std::string m = test::message_of<UsageError>([&] { autograd::backward(ops::sum(z)); });
  CHECK(m.find("[f64 [3x4] cpu], which is output 0 of MulBackward, is at version 1; expected version 0 instead") !=
        std::string::npos);
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("NaN and inf in the gradient: the view's region is replaced, not blended") {
  // d loss / d b is inf at every element; relu_ through the view zeroes the region where it cut, so
  // exactly those elements of x get 0 (an arithmetic blend, g * 0, would make them NaN).
  const Tensor x = leaf(Shape{2, 3});
  for (size_t i = 0; i < 6; ++i) at(x, i) = i % 2 == 0 ? -1.0 : 1.0;
  Tensor weights;
  {
    const NoGradGuard no_grad;
    weights = ops::mul(ops::ones_like(x), std::numeric_limits<double>::infinity());
  }
  Tensor b = ops::mul(x, 1.0);
  static_cast<void>(ops::relu_(ops::select(b, 0, 1)));
  autograd::backward(ops::sum(ops::mul(b, weights)));
  for (size_t i = 0; i < 6; ++i) {
    CAPTURE(i);
    if (i >= 3 && at(x, i) < 0) {
      CHECK(at(x.grad(), i) == 0.0);
    } else {
      CHECK(std::isinf(at(x.grad(), i)));
    }
  }
}

TEST_CASE("graphs with CopySlices are freed: no node outlives them, and a long chain frees without recursing") {
  const int64_t before = RecordedNode::live_count();
  {
    const Tensor x = leaf(Shape{4, 3});
    Tensor b = ops::mul(x, 1.0);
    for (int i = 0; i < 20000; ++i) static_cast<void>(ops::mul_(ops::select(b, 0, i % 4), 1.0));
    autograd::backward(ops::sum(b));
    for (size_t i = 0; i < 12; ++i) CHECK(at(x.grad(), i) == 1.0);
  }
  CHECK(RecordedNode::live_count() == before);
}
