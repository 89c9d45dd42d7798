// In-place ops and version counters (Note [In-place operators], Note [Version counter], Note [Saved tensors
// and versions]): relu_, add_ and mul_ against the float64 reference on fresh random inputs, the version
// shared by a tensor and its views, the backward that refuses a saved tensor changed in place (naming the
// tensor, its node and both versions), and the leaf refusal (inplace_rebase_test.cpp: the rebase).
#include <doctest/doctest.h>

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

Tensor rnd(const Shape& s, DType dtype = DType::kF32) { return frontend::random_tensor(s, dtype, kCPU, fresh_seed()); }

}  // namespace

TEST_CASE("relu_, add_, mul_ and mul_.Scalar write self with the reference's values and bump its version once") {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16}) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = rnd(Shape{5, 7}, dtype), y = rnd(Shape{5, 7}, dtype), row = rnd(Shape{7}, dtype);
    std::vector<double> expected = reference::relu(x);
    CHECK(x.storage()->version() == 0);
    Tensor out = ops::relu_(x);
    CHECK(out.data_ptr() == x.data_ptr());
    CHECK(x.storage()->version() == 1);
    CHECK(reference::relative_error(x, expected) <= reference::tolerance(dtype));

    expected = reference::add(x, y, -0.75);
    out = ops::add_(x, y, -0.75);
    CHECK(x.storage()->version() == 2);
    CHECK(reference::relative_error(x, expected) <= reference::tolerance(dtype));

    expected = reference::mul(x, row);  // other broadcasts to self's shape
    static_cast<void>(ops::mul_(x, row));
    CHECK(x.storage()->version() == 3);
    CHECK(reference::relative_error(x, expected) <= reference::tolerance(dtype));

    expected = reference::mul_scalar(x, -2.5);  // mul_.Scalar: the overload C++ picks for a number
    static_cast<void>(ops::mul_(x, -2.5));
    CHECK(x.storage()->version() == 4);
    CHECK(reference::relative_error(x, expected) <= reference::tolerance(dtype));
    CHECK(y.storage()->version() == 0);  // read, not written
  }
}

TEST_CASE("an in-place op through a view writes the base's memory and bumps the version every view shares") {
  const Tensor base = rnd(Shape{4, 6}, DType::kF64);
  const std::vector<double> before = reference::to_double(base);
  const Tensor column = ops::narrow(base, 1, 2, 1);  // non-contiguous: stride 6
  const Tensor t = ops::t(base);
  const Tensor other = rnd(Shape{4, 1}, DType::kF64);
  static_cast<void>(ops::add_(column, other, 2.0));
  CHECK(base.storage()->version() == 1);
  CHECK(t.storage()->version() == 1);  // one count for the storage: every view sees the write
  const std::vector<double> after = reference::to_double(base), o = reference::to_double(other);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 6; ++c) {
      const auto i = static_cast<size_t>(r * 6 + c);
      CHECK(after[i] == doctest::Approx(c == 2 ? before[i] + 2.0 * o[static_cast<size_t>(r)] : before[i]));
    }
  // A transposed view written in place: relu_ through strides, checked against the base's values.
  static_cast<void>(ops::relu_(t));
  CHECK(base.storage()->version() == 2);
  for (double v : reference::to_double(base)) CHECK(v >= 0.0);
  // A copy has a storage and a count of its own.
  const Tensor copy = ops::contiguous(t);
  CHECK(copy.storage()->version() == 0);
}

TEST_CASE("an operand that is self, or overlaps self in part, is read whole before self is written") {
  for (DType dtype : {DType::kF32, DType::kF64}) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = rnd(Shape{6, 3}, dtype);
    std::vector<double> expected = reference::add(x, x, 0.5);
    static_cast<void>(ops::add_(x, x, 0.5));  // the same memory: the direct loop
    CHECK(reference::relative_error(x, expected) <= reference::tolerance(dtype));
    const Tensor later = ops::narrow(x, 0, 1, 5), earlier = ops::narrow(x, 0, 0, 5);  // rows 1..5 and 0..4
    expected = reference::mul(later, earlier);
    static_cast<void>(ops::mul_(later, earlier));  // overlapping in part: through a temporary
    CHECK(reference::relative_error(later, expected) <= reference::tolerance(dtype));
    CHECK(x.storage()->version() == 2);
  }
}

TEST_CASE("add_ refuses an operand that would grow self, as torch does") {
  const Tensor x = rnd(Shape{3}), y = rnd(Shape{2, 3});
  CHECK(test::message_of<UsageError>([&] { static_cast<void>(ops::add_(x, y, 1.0)); }).find("output with shape [3] doesn't match the broadcast shape [2x3]") !=
        std::string::npos);
  CHECK(x.storage()->version() == 0);  // refused before anything was written
}

TEST_CASE("backward through a saved tensor modified in place fails naming the tensor, its node and the versions") {
  SUBCASE("relu's saved output, changed by mul_ under no_grad") {
    Tensor x = rnd(Shape{3, 4});
    x.set_requires_grad(true);
    const Tensor y = ops::relu(x);  // ReluBackward saves y at version 0
    {
      const NoGradGuard no_grad;
      static_cast<void>(ops::mul_(y, rnd(Shape{3, 4})));
    }
    const Tensor loss = ops::sum(y);
    const std::string m = test::message_of<UsageError>([&] { autograd::backward(loss); });
    CHECK(m == "one of the variables needed for gradient computation has been modified by an inplace operation: "
               "[f32 [3x4] cpu], which is output 0 of ReluBackward, is at version 1; expected version 0 instead. "
               "Hint: ReluBackward (recorded by relu) saved it for backward, and an in-place op changed it after "
               "that; use the out-of-place op (relu, not relu_) there instead.");
    CHECK_THROWS_AS(autograd::backward(ops::sum(y)), UsageError);
  }
  SUBCASE("mul's saved operand (no grad), changed through a view") {
    const Tensor a = rnd(Shape{2, 5});
    Tensor w = rnd(Shape{2, 5});
    w.set_requires_grad(true);
    const Tensor y = ops::mul(a, w);  // MulBackward saves a and w
    static_cast<void>(ops::add_(ops::select(a, 0, 1), rnd(Shape{5}), 1.0));
    static_cast<void>(ops::relu_(a));
    const std::string m = test::message_of<UsageError>([&] { autograd::backward(ops::sum(y)); });
    CHECK(m.find("[f32 [2x5] cpu] is at version 2; expected version 0 instead") != std::string::npos);
    CHECK(m.find("MulBackward (recorded by mul)") != std::string::npos);
    CHECK(w.grad().defined() == false);  // no gradient computed from the changed values
  }
  SUBCASE("unchanged, the same graph runs") {
    const Tensor a = rnd(Shape{2, 5});
    Tensor w = rnd(Shape{2, 5});
    w.set_requires_grad(true);
    const Tensor y = ops::mul(a, w);
    static_cast<void>(ops::add_(rnd(Shape{2, 5}), a, 1.0));  // a read, not written
    autograd::backward(ops::sum(y));
    CHECK(reference::relative_error(w.grad(), reference::to_double(a)) <= reference::tolerance(DType::kF32));
  }
}

TEST_CASE("in-place ops on tensors that require grad: a leaf is refused as torch does, a non-leaf is rebased") {
  Tensor x = rnd(Shape{3, 4});
  x.set_requires_grad(true);
  CHECK_THROWS_WITH_AS(static_cast<void>(ops::relu_(x)),
                       doctest::Contains("a leaf Variable that requires grad is being used in an in-place operation."),
                       UsageError);
  CHECK(x.storage()->version() == 0);
  const Tensor y = ops::relu(x);
  static_cast<void>(ops::add_(y, rnd(Shape{3, 4}), 1.0));  // tests/autograd/inplace_rebase_test.cpp: the gradients
  CHECK(std::string(y.grad_fn()->name()) == "AddBackward");
  const Tensor z = rnd(Shape{3, 4});
  static_cast<void>(ops::mul_(z, x));
  CHECK(z.requires_grad());
  CHECK(std::string(z.grad_fn()->name()) == "MulBackward");
  {  // under no_grad the leaf is written (an optimizer's step), and its version counts the write
    const NoGradGuard no_grad;
    static_cast<void>(ops::add_(x, rnd(Shape{3, 4}), -0.1));
  }
  CHECK(x.storage()->version() == 1);
  CHECK(x.requires_grad());
  CHECK(x.is_leaf());
}

TEST_CASE("a view's backward needs only its input's sizes: an in-place write into the base after it is no error") {
  // b = L * 1; b[2].add_(b[0]); b.sum().backward() raised "modified by an inplace operation": the
  // SelectBackward of b[0] saved b at version 0, and add_ moved it. torch's view nodes keep self's sizes,
  // not self; strata's keep RecordedNode::input_sizes. Each variant writes rows of b from a view of row 0
  // made before the write, so row 0's gradient counts how many rows it was added into.
  struct Variant {
    const char* name;
    Tensor (*other)(const Tensor& b);  // a view of row 0 with the shape of b[1:3]
    int64_t rows_written;             // b[3 - rows_written : 3] += other
  };
  const Variant variants[] = {
      {"select", [](const Tensor& b) { return ops::select(b, 0, 0); }, 1},
      {"narrow + squeeze", [](const Tensor& b) { return ops::squeeze(ops::narrow(b, 0, 0, 1), 0); }, 1},
      {"slice, step 3", [](const Tensor& b) { return ops::slice(b, 0, 0, 4, 3); }, 2},  // rows 0 and 3
      {"unsqueeze + expand", [](const Tensor& b) { return ops::expand(ops::unsqueeze(ops::select(b, 0, 0), 0), Shape{2, 3}); }, 2},
      {"reshape + view", [](const Tensor& b) { return ops::view(ops::slice(ops::reshape(b, Shape{12}), 0, 0, 3, 1), Shape{3}); }, 1},
  };
  for (const Variant& v : variants) {
    CAPTURE(std::string(v.name));
    Tensor leaf = rnd(Shape{4, 3}, DType::kF64);
    leaf.set_requires_grad(true);
    const Tensor b = ops::mul(leaf, 1.0);
    const Tensor other = v.other(b);
    REQUIRE(other.grad_fn() != nullptr);
    CHECK(other.grad_fn()->num_saved() == 0);  // the view node keeps no tensor
    static_cast<void>(ops::add_(ops::slice(b, 0, 3 - v.rows_written, 3, 1), other, 1.0));
    autograd::backward(ops::sum(b), Tensor());
    // d sum(b') / dL: 1 everywhere; row 0 also once per row it was added into, except the slice variant,
    // whose row 3 was read (added into row 2) and written (row 2 only: rows 1..2 get rows 0 and 3).
    std::vector<double> expected(12, 1.0);
    if (std::string(v.name) == "slice, step 3") {
      expected[0] = expected[1] = expected[2] = 2.0;   // row 0 into row 1
      expected[9] = expected[10] = expected[11] = 2.0;  // row 3 into row 2
    } else {
      for (int c = 0; c < 3; ++c) expected[static_cast<size_t>(c)] += static_cast<double>(v.rows_written);
    }
    CHECK(reference::to_double(leaf.grad()) == expected);
  }
  // A saved tensor that the formula reads is still checked: relu's output written after relu is refused.
  Tensor leaf = rnd(Shape{6}, DType::kF64);
  leaf.set_requires_grad(true);
  const Tensor r = ops::relu(ops::mul(leaf, 1.0));
  static_cast<void>(ops::add_(ops::narrow(r, 0, 0, 2), ops::narrow(r, 0, 2, 2), 1.0));
  CHECK_THROWS_AS(autograd::backward(ops::sum(r), Tensor()), UsageError);
}
