// In-place ops through views the Autograd key did not record (Note [Views and their base's history] in
// lib/tensor.h): a view of a tensor that needs no grad, written with an operand that does, rebases its
// base onto CopySlices as torch does; a base that is not contiguous; what torch refuses (a view made
// under no_grad); detach; and two threads reading one stale view's grad_fn. Gradients against central
// finite differences in float64 on fresh random inputs (STRATA_TEST_SEED replays a run).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
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

namespace {

// A copy of `values` that needs no grad: a fresh tensor each time a program runs, since the program
// writes it. Made under no_grad so that it is never recorded, whatever the values.
Tensor plain_copy(const Tensor& values) {
  const NoGradGuard no_grad;
  return ops::mul(values, 1.0);
}

}  // namespace

TEST_CASE("w[0].add_(c) with w needing no grad: w's grad_fn is CopySlices, gradients as finite differences") {
  INFO("seed " << testing::run_seed());
  const Tensor w = plain_copy(rnd(Shape{3, 3}));
  const Tensor c = leaf(Shape{3});
  const Tensor early = ops::t(w);  // taken before the write, not recorded either
  const Tensor v = ops::select(w, 0, 0);
  CHECK_FALSE(v.requires_grad());
  CHECK(v.autograd_meta() == nullptr);  // not recorded: a header with its base's identity only
  static_cast<void>(ops::add_(v, c, 1.0));
  CHECK(grad_fn_name(w) == "CopySlices");
  CHECK(w.requires_grad());
  CHECK_FALSE(w.is_leaf());
  CHECK(w.storage()->version() == 1);
  // torch's v and early: they require grad now, with a node over w's new history.
  CHECK(v.requires_grad());
  CHECK(grad_fn_name(v) == "AsStridedBackward");
  CHECK(grad_fn_name(early) == "AsStridedBackward");
  autograd::backward(ops::sum(w));
  for (size_t i = 0; i < 3; ++i) CHECK(at(c.grad(), i) == 1.0);

  const Tensor values = rnd(Shape{3, 4}), weights = rnd(Shape{3, 4});
  check_gradients({leaf(Shape{4})}, [&](const std::vector<Tensor>& in) {
          Tensor b = plain_copy(values);
          static_cast<void>(ops::mul_(ops::select(b, 0, 1), in[0]));
          return weighted_sum(b, weights);
        });
  // A view of a view, a view taken before the write read afterwards, and two writes through views.
  check_gradients({leaf(Shape{2}), leaf(Shape{4})}, [&](const std::vector<Tensor>& in) {
          Tensor b = plain_copy(values);
          const Tensor before = ops::t(b);
          static_cast<void>(ops::mul_(ops::select(ops::slice(b, 0, 1, kEnd, 1), 1, 2), in[0]));
          static_cast<void>(ops::add_(ops::select(b, 0, 0), in[1], -0.5));
          return weighted_sum(ops::t(before), weights);
        });
}

TEST_CASE("a base that is not contiguous: the view's region found through the base's layout") {
  INFO("seed " << testing::run_seed());
  const Tensor values = rnd(Shape{4, 3}), weights = rnd(Shape{3, 4});
  // base: the transpose of a [4, 3] tensor as a tensor of its own (detach), strides (1, 3); written
  // through a row first by an operand that makes it need grad, then through a stepped column.
  Program program = [&](const std::vector<Tensor>& in) {
    const Tensor base = ops::t(plain_copy(values)).detach();
    REQUIRE_FALSE(base.is_contiguous());
    static_cast<void>(ops::mul_(base, in[0]));  // not a view: base's history is MulBackward
    static_cast<void>(ops::add_(ops::select(base, 0, 1), in[1], 2.0));
    static_cast<void>(ops::relu_(ops::slice(ops::select(base, 1, 2), 0, 0, kEnd, 2)));
    return weighted_sum(base, weights);
  };
  check_gradients({leaf(Shape{3, 4}), leaf(Shape{4})}, program);
  const Tensor base = ops::t(plain_copy(values)).detach();
  const Tensor column = ops::select(base, 1, 0);
  static_cast<void>(ops::add_(ops::select(base, 0, 2), leaf(Shape{4}), 1.0));
  CHECK(grad_fn_name(base) == "CopySlices");
  CHECK(grad_fn_name(column) == "AsStridedBackward");
  autograd::backward(ops::sum(ops::mul(column, 3.0)));  // through AsStridedBackward over CopySlices
}

TEST_CASE("a view made under no_grad and written with grad mode on: torch's error, nothing written") {
  const Tensor c = leaf(Shape{3});
  for (const bool base_requires_grad : {false, true}) {
    CAPTURE(base_requires_grad);
    const Tensor w = base_requires_grad ? ops::mul(leaf(Shape{3, 3}), 1.0) : plain_copy(rnd(Shape{3, 3}));
    Tensor v;
    {
      const NoGradGuard no_grad;
      v = ops::select(w, 0, 1);
    }
    CHECK(v.is_no_grad_view());
    CHECK(ops::t(v).is_no_grad_view());  // carried to a view of it, as torch's creation meta is
    const std::string m = test::message_of<UsageError>([&] { static_cast<void>(ops::add_(v, c, 1.0)); });
    CHECK(m.find("A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given "
                 "that this use case is ambiguous and error-prone, it is forbidden.") == 0);
    CHECK(m.find("(add_ on [f64 [3] cpu])") != std::string::npos);
    CHECK(w.storage()->version() == 0);
    const NoGradGuard no_grad;  // both inside no_grad: allowed, and not recorded
    static_cast<void>(ops::add_(v, c, 1.0));
    CHECK(w.storage()->version() == 1);
  }
  const Tensor w = plain_copy(rnd(Shape{3, 3}));
  CHECK_FALSE(w.requires_grad());
}

TEST_CASE("refused as torch refuses: a view of a leaf, an expanded view, whether or not recorded") {
  const Tensor x = leaf(Shape{3, 4});
  std::string m = test::message_of<UsageError>([&] { static_cast<void>(ops::relu_(ops::select(x, 0, 1))); });
  CHECK(m.find("a view of a leaf Variable that requires grad is being used in an in-place operation. (relu_ on "
               "[f64 [4] cpu]") == 0);
  const Tensor plain = plain_copy(rnd(Shape{1, 4}));
  m = test::message_of<UsageError>(
      [&] { static_cast<void>(ops::mul_(ops::expand(plain, Shape{3, 4}), leaf(Shape{3, 4}))); });
  CHECK(m.find("unsupported operation: more than one element of the written-to tensor refers to a single memory "
               "location") == 0);
  CHECK(plain.storage()->version() == 0);
  CHECK_FALSE(plain.requires_grad());
}

TEST_CASE("detach: a tensor of its own, whose in-place history is its own and never its source's") {
  const Tensor x = leaf(Shape{2, 3});
  const Tensor d = x.detach();
  CHECK_FALSE(d.is_view());
  CHECK_FALSE(d.requires_grad());
  CHECK(d.storage() == x.storage());
  static_cast<void>(ops::add_(d, leaf(Shape{2, 3}), 1.0));
  CHECK(grad_fn_name(d) == "AddBackward");
  CHECK(grad_fn_name(x) == "None");
  CHECK(x.is_leaf());
  CHECK(x.storage()->version() == 1);  // the same memory and count, as torch's detach shares them
}

TEST_CASE("threads reading one stale view's grad_fn at once get one node") {
  // Without the view's lock, each reader could regenerate the node and write the view's grad_fn while
  // another reads it (a data race ThreadSanitizer reports; here also seen as two different nodes).
  constexpr int kThreads = 4, kRounds = 200;
  for (int round = 0; round < kRounds; ++round) {
    const Tensor b = ops::mul(leaf(Shape{3, 4}), 1.0);
    const Tensor early = ops::t(b);  // recorded: TBackward until b is written
    static_cast<void>(ops::mul_(ops::select(b, 0, 0), 2.0));  // early is stale now
    std::atomic<int> ready{0};
    std::vector<const GradNode*> seen(kThreads, nullptr);
    std::vector<std::thread> readers;
    for (int i = 0; i < kThreads; ++i) {
      readers.emplace_back([&, i] {
        ready.fetch_add(1);
        while (ready.load() < kThreads) {
        }
        seen[size_t(i)] = early.grad_fn().get();
      });
    }
    for (std::thread& t : readers) t.join();
    REQUIRE(seen[0] != nullptr);
    CHECK(std::string(seen[0]->name()) == "AsStridedBackward");
    for (const GradNode* node : seen) REQUIRE(node == seen[0]);
  }
}
