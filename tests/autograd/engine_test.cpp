// The autograd engine (layers/autograd) over graphs the Autograd key records: every differentiable op's
// gradients against float64 references on fresh random inputs and a random upstream gradient, the
// references themselves against central finite differences, the walk order, release of saved tensors,
// and refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "layers/autograd/engine.h"
#include "layers/dispatch/autograd.h"
#include "layers/frontend/frontend.h"
#include "layers/frontend/specs/specs.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "tests/support/error_text.h"

using namespace strata;
using test::message_of;

namespace {

Tensor leaf(const Shape& s, DType dtype, uint64_t seed) {
  Tensor t = frontend::random_tensor(s, dtype, kCPU, seed);
  t.set_requires_grad(true);
  return t;
}

// A tensor of doubles (the finite-difference tests perturb inputs in place).
double& at(const Tensor& t, size_t i) { return t.data<double>()[i]; }

}  // namespace

TEST_CASE("every differentiable op: the engine's gradients match the float64 reference gradients") {
  size_t checked = 0;
  ops::AllOps::for_each([&](auto decl) {
    using Op = decltype(decl);
    if constexpr (requires { Op::kReferenceBackward; }) {
      CAPTURE(std::string(Op::kName));
      ++checked;
      frontend::OpSpec spec;
      for (const char* dims : {"2x3x7x7", "5x7x3", "33"}) {
        try {
          spec = frontend::parse_op_spec(Op::kName, dims);
          break;
        } catch (const UsageError&) {
        }
      }
      REQUIRE(!spec.op.empty());
      CHECK(frontend::differentiable(spec));
      for (DType dtype : {DType::kF32, DType::kF64}) {
        CAPTURE(dtype_name(dtype));
        const frontend::PreparedCall call =
            frontend::prepare_call(spec, dtype, kCPU, 11, true, frontend::available_host_bytes());
        const binding::IValue out = call.op->call(call.args);
        REQUIRE(out.tensor().grad_fn() != nullptr);
        // A random upstream gradient, not ones: a transposed or swapped formula cannot hide behind symmetry.
        const Tensor upstream = frontend::random_tensor(out.tensor().sizes(), dtype, kCPU, 99);
        autograd::backward(out.tensor(), upstream);
        const reference::Grads want = frontend::reference_gradients(spec, call, upstream);
        for (size_t i = 0; i < call.args.size(); ++i) {
          if (!call.args[i].is_tensor()) continue;
          CAPTURE(i);
          const Tensor got = call.args[i].tensor().grad();
          REQUIRE(got.defined());
          CHECK(got.sizes() == call.args[i].tensor().sizes());
          CHECK(reference::relative_error(got, want[i]) <= reference::tolerance(dtype));
        }
      }
    }
  });
  // Every op with a backward formula has float64 gradients, so none is skipped above.
  size_t with_formula = 0;
  // The in-place ops reuse their out-of-place op's formula (inplace_rebase_test.cpp checks them).
  ops::AllOps::for_each([&](auto decl) {
    using Op = decltype(decl);
    with_formula += ops::backward_formula<Op>() != nullptr && !ops::kInPlace<Op>;
  });
  CHECK(checked == with_formula);
  CHECK(checked >= 15);  // at least the differentiable ops there were when this test was written
}

TEST_CASE("the float64 reference gradients agree with central finite differences of the forward references") {
  // d/dx_i of sum(w * f(x)) for a random w: each input element perturbed by +-h, in float64 throughout.
  constexpr double kStep = 1e-6;
  ops::AllOps::for_each([&](auto decl) {
    using Op = decltype(decl);
    if constexpr (requires { Op::kReferenceBackward; }) {
      CAPTURE(std::string(Op::kName));
      // conv2d with a stride, padding, dilation and groups, so all four show up in its gradients.
      frontend::ConvOptions conv;
      if (frontend::kReadsConvOptions<Op>) {
        conv.out_channels = 4;
        conv.stride = 2;
        conv.pad = 1;
        conv.dilation = 2;
        conv.groups = 2;
      }
      frontend::OpSpec spec;
      for (const char* dims : {"1x2x5x5", "3x4x2", "7"}) {
        try {
          spec = frontend::parse_op_spec(Op::kName, dims, conv);
          break;
        } catch (const UsageError&) {
        }
      }
      REQUIRE(!spec.op.empty());
      const frontend::PreparedCall call =
          frontend::prepare_call(spec, DType::kF64, kCPU, 5, false, frontend::available_host_bytes());
      const Shape out_shape = spec.call.outputs.front();
      const Tensor w = frontend::random_tensor(out_shape, DType::kF64, kCPU, 77);
      const std::vector<double> wv = reference::to_double(w);
      auto objective = [&] {
        const std::vector<double> y = frontend::reference_result(spec, call);
        double acc = 0;
        for (size_t j = 0; j < y.size(); ++j) acc += wv[j] * y[j];
        return acc;
      };
      const reference::Grads grads = frontend::reference_gradients(spec, call, w);
      for (size_t a = 0; a < call.args.size(); ++a) {
        if (!call.args[a].is_tensor()) continue;
        CAPTURE(a);
        const Tensor& x = call.args[a].tensor();
        REQUIRE(grads[a].size() == static_cast<size_t>(x.numel()));
        for (size_t i = 0; i < static_cast<size_t>(x.numel()); ++i) {
          const double saved = at(x, i);
          at(x, i) = saved + kStep;
          const double up = objective();
          at(x, i) = saved - kStep;
          const double down = objective();
          at(x, i) = saved;
          const double numeric = (up - down) / (2 * kStep);
          // relu's kink: inputs are uniform in [-1, 1), none within kStep of 0 for these seeds.
          CHECK(std::abs(numeric - grads[a][i]) <= 1e-6 * std::max(1.0, std::abs(numeric)));
        }
      }
    }
  });
}

TEST_CASE("conv2d's node keeps (H, W) stride, padding, dilation and groups for both gradient ops") {
  // Values the CLI's square options cannot give: a formula that swapped H and W, or dropped an option,
  // would give other gradients (or shapes) than the float64 reference's.
  const Tensor x = leaf({2, 6, 9, 8}, DType::kF64, 1), w = leaf({4, 3, 3, 2}, DType::kF64, 2),
               b = leaf({4}, DType::kF64, 3);
  const Shape stride{2, 1}, padding{1, 2}, dilation{1, 3};
  const Tensor y = ops::conv2d(x, w, b, stride, padding, dilation, 2);
  REQUIRE(y.sizes() == Shape{2, 4, 5, 9});
  const Tensor upstream = frontend::random_tensor(y.sizes(), DType::kF64, kCPU, 4);
  autograd::backward(y, upstream);
  const reference::Grads want = reference::conv2d_backward(upstream, x, w, b, stride, padding, dilation, 2);
  CHECK(reference::relative_error(x.grad(), want[0]) <= reference::tolerance(DType::kF64));
  CHECK(reference::relative_error(w.grad(), want[1]) <= reference::tolerance(DType::kF64));
  CHECK(reference::relative_error(b.grad(), want[2]) <= reference::tolerance(DType::kF64));
}

TEST_CASE("the walk: y.sum().backward() on linear runs SumBackward > AddmmBackward > AccumulateGrad x3") {
  const Tensor x = leaf({4, 5}, DType::kF32, 1), w = leaf({3, 5}, DType::kF32, 2), b = leaf({3}, DType::kF32, 3);
  const Tensor y = ops::linear(x, w, b);
  const Tensor s = ops::sum(y);
  CHECK(std::string(s.grad_fn()->name()) == "SumBackward");
  std::vector<std::string> seen;
  autograd::BackwardOptions options;
  options.context = &seen;
  options.before_node = [](void* context, size_t step, const char* name) {
    auto* v = static_cast<std::vector<std::string>*>(context);
    CHECK(step == v->size());
    v->push_back(name);
  };
  const autograd::BackwardRecord record = autograd::backward(s, Tensor(), options);
  CHECK(record.path() == "SumBackward > AddmmBackward > AccumulateGrad > AccumulateGrad > AccumulateGrad");
  CHECK(seen.size() == 5);
  CHECK(seen.front() == "SumBackward");
  // d sum(x W^T + b)/db = B (the batch), exactly.
  const std::vector<double> db = reference::to_double(b.grad());
  for (double v : db) CHECK(v == 4.0);
}

TEST_CASE("a leaf used twice gets one AccumulateGrad node, fed the sum of both paths") {
  const Tensor x = leaf({6}, DType::kF64, 4);
  const Tensor r = ops::relu(x);  // recorded first (separate statements: argument order is unspecified)
  const Tensor g_of_x = ops::gelu(x);
  const Tensor y = ops::add(r, g_of_x, 1.0);
  const autograd::BackwardRecord record = autograd::backward(ops::sum(y));
  // Newest first: gelu was recorded after relu, so GeluBackward runs before ReluBackward.
  CHECK(record.path() == "SumBackward > AddBackward > GeluBackward > ReluBackward > AccumulateGrad");
  const std::vector<double> xv = reference::to_double(x), g = reference::to_double(x.grad());
  for (size_t i = 0; i < 6; ++i) {
    const double cdf = 0.5 * (1 + std::erf(xv[i] / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * xv[i] * xv[i]) / std::sqrt(2 * std::acos(-1.0));
    CHECK(g[i] == doctest::Approx((xv[i] > 0 ? 1.0 : 0.0) + cdf + xv[i] * pdf).epsilon(1e-12));
  }
}

TEST_CASE("add's alpha scales the second gradient - gradients accumulate across passes into .grad") {
  const Tensor a = leaf({5}, DType::kF64, 6), b = leaf({5}, DType::kF64, 7);
  autograd::backward(ops::sum(ops::add(a, b, 2.5)));
  for (double v : reference::to_double(a.grad())) CHECK(v == 1.0);
  for (double v : reference::to_double(b.grad())) CHECK(v == 2.5);
  autograd::backward(ops::sum(ops::add(a, b, 2.5)));
  for (double v : reference::to_double(b.grad())) CHECK(v == 5.0);
}

TEST_CASE("AddBackward scales by alpha with one multiply: no cancellation for alpha near 0 or near 1") {
  // grad + (alpha - 1) * grad gave exactly 0 for alpha = 1e-8 in f32, and ~200 ulp off for alpha = 1e-3.
  for (double alpha : {1e-8, 1e-3, 1.0 + 1e-6, -3.0}) {
    CAPTURE(alpha);
    const Tensor a = leaf({7}, DType::kF32, 30), b = leaf({7}, DType::kF32, 31);
    autograd::backward(ops::sum(ops::add(a, b, alpha)));
    for (double v : reference::to_double(b.grad())) CHECK(v == double(static_cast<float>(alpha)));
    for (double v : reference::to_double(a.grad())) CHECK(v == 1.0);
  }
}

TEST_CASE("saved tensors are freed by backward - a second pass is refused, unless the graph was retained") {
  const Tensor x = leaf({3, 4}, DType::kF32, 8), w = leaf({4, 2}, DType::kF32, 9);
  const Tensor y = ops::matmul(x, w);
  const Tensor s = ops::sum(y);
  CHECK(y.grad_fn()->num_saved() == 2);
  autograd::BackwardOptions keep;
  keep.retain_graph = true;
  autograd::backward(s, Tensor(), keep);
  CHECK(y.grad_fn()->num_saved() == 2);
  autograd::backward(s);
  CHECK(y.grad_fn()->num_saved() == 0);
  const std::string error = message_of<UsageError>([&] { autograd::backward(s); });
  CHECK(error.find("backward through the graph a second time") != std::string::npos);
  CHECK_THROWS_AS(autograd::backward(s), UsageError);
}

TEST_CASE("no leak: 10^4 forward + backward passes leave no node alive and nothing saved") {
  const int64_t before = RecordedNode::live_count();
  const Tensor x = leaf({2, 3}, DType::kF32, 10), w = leaf({4, 3}, DType::kF32, 11), b = leaf({4}, DType::kF32, 12);
  std::weak_ptr<GradNode> last;
  for (int i = 0; i < 10000; ++i) {
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    const Tensor y = ops::relu(ops::linear(x, w, b));
    const Tensor s = ops::sum(y);
    autograd::backward(s);
    CHECK_MESSAGE(y.grad_fn()->num_saved() == 0, "ReluBackward kept its result after backward");
    if (i == 9999) last = y.grad_fn();
  }
  CHECK(last.expired());
  CHECK(RecordedNode::live_count() == before);
  CHECK(x.grad().defined());
}

TEST_CASE("a long graph frees without recursing: 10^6 relus, and matmuls whose saved inputs hold the chain") {
  // Note [Freeing a long graph]: freed by nested destructors, 250,000 nodes overflowed an 8 MiB stack.
  const int64_t before = RecordedNode::live_count();
  {
    Tensor h = leaf({4}, DType::kF32, 20);
    for (int i = 0; i < 1000000; ++i) h = ops::relu(h);
    CHECK(RecordedNode::live_count() == before + 1000000);
  }
  CHECK(RecordedNode::live_count() == before);
  {
    // Each MmBackward saves its input, whose grad_fn is the previous node: two owners per node.
    const Tensor w = leaf({2, 2}, DType::kF32, 21);
    Tensor h = leaf({1, 2}, DType::kF32, 22);
    for (int i = 0; i < 300000; ++i) h = ops::matmul(h, w);
    // Another tensor's node holds the chain's end: dropping h frees nothing yet.
    const Tensor side = ops::relu(h);
    h = Tensor();
    CHECK(RecordedNode::live_count() == before + 300001);
  }
  CHECK(RecordedNode::live_count() == before);
}

TEST_CASE("bad input: a root that needs no grad, a non-scalar root without a gradient, a wrong-shaped one") {
  const Tensor plain = frontend::random_tensor({3}, DType::kF32, kCPU, 1);
  CHECK(message_of<UsageError>([&] { autograd::backward(plain); }).find("does not require grad") !=
        std::string::npos);
  CHECK_THROWS_AS(autograd::backward(plain), UsageError);
  const Tensor y = ops::relu(leaf({3}, DType::kF32, 2));
  CHECK(message_of<UsageError>([&] { autograd::backward(y); }).find("only for scalar outputs") !=
        std::string::npos);
  CHECK(message_of<UsageError>([&] {
          autograd::backward(y, frontend::random_tensor({4}, DType::kF32, kCPU, 3));
        }).find("must match") != std::string::npos);
}

TEST_CASE("a gradient op recorded under Autograd has no derivative: backward through it says so") {
  const Tensor a = leaf({2, 3}, DType::kF32, 1), b = leaf({3, 2}, DType::kF32, 2);
  const Tensor s = ops::sum(ops::gemm(a, b, 0, 0));
  const std::string error = message_of<UnavailableError>([&] { autograd::backward(s); });
  CHECK(error.find("no derivative for gemm") != std::string::npos);
}

TEST_CASE("gemm's transposes against the reference, every combination (the products MmBackward needs)") {
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1}) {
      CAPTURE(ta);
      CAPTURE(tb);
      const Shape a = ta ? Shape{7, 5} : Shape{5, 7}, b = tb ? Shape{3, 7} : Shape{7, 3};
      for (DType dtype : {DType::kF32, DType::kF64}) {
        const Tensor x = frontend::random_tensor(a, dtype, kCPU, 1), y = frontend::random_tensor(b, dtype, kCPU, 2);
        const Tensor out = ops::gemm(x, y, ta, tb);
        CHECK(out.sizes() == Shape{5, 3});
        CHECK(reference::relative_error(out, reference::gemm(x, y, ta, tb)) <= reference::tolerance(dtype));
      }
    }
  CHECK_THROWS_AS(ops::gemm(frontend::random_tensor({2, 3}, DType::kF32, kCPU, 1),
                            frontend::random_tensor({2, 3}, DType::kF32, kCPU, 2), 0, 2),
                  UsageError);
}
