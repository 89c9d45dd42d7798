// layers/compiler: capture, the fusion decisions, and compiled results against eager and the float64
// reference. The compile tests run the real system compiler, so they are few and small, each with its
// own temporary kernel cache.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "layers/compiler/compiler.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "tests/support/error_text.h"
#include "tests/support/subprocess.h"

namespace strata {
namespace {

using compiler::KernelKind;

Tensor rand(const Shape& s, DType dtype, uint64_t seed) { return frontend::random_tensor(s, dtype, kCPU, seed); }

compiler::Captured capture(const compiler::Function& fn, const std::vector<Tensor>& inputs) {
  return compiler::capture(fn, inputs);
}

std::vector<std::string> kernel_names(const compiler::FusionPlan& plan) {
  std::vector<std::string> names;
  for (const compiler::FusedKernel& k : plan.kernels) names.push_back(k.name);
  return names;
}

std::vector<Tensor> relu_matmul(const std::vector<Tensor>& in) { return {ops::relu(ops::matmul(in[0], in[1]))}; }
std::vector<Tensor> gelu_add(const std::vector<Tensor>& in) { return {ops::gelu(ops::add(in[0], in[1], 1.0))}; }

}  // namespace

TEST_CASE("capture records each call with its arguments, and runs it for real") {
  const Tensor a = rand({5, 7}, DType::kF32, 1), b = rand({7, 3}, DType::kF32, 2);
  const compiler::Captured c = capture(relu_matmul, {a, b});
  const compiler::Graph& g = c.graph;
  REQUIRE(g.nodes.size() == 4);
  CHECK(g.calls() == 2);
  CHECK(g.nodes[2].op == "matmul");
  CHECK(g.nodes[2].args[0].value == size_t{0});
  CHECK(g.nodes[2].args[1].value == size_t{1});
  CHECK(g.nodes[3].op == "relu");
  CHECK(g.nodes[3].meta == compiler::ValueMeta{Shape{5, 3}, DType::kF32, kCPU});
  CHECK(g.outputs == std::vector<size_t>{3});
  CHECK(g.nodes[2].users == std::vector<size_t>{3});
  // The eager result is the real one.
  REQUIRE(c.eager_outputs.size() == 1);
  std::vector<double> ref = reference::matmul(a, b);
  for (double& v : ref) v = std::max(v, 0.0);
  CHECK(reference::relative_error(c.eager_outputs[0], ref) < reference::tolerance(DType::kF32));
  const std::string listing = g.str();
  CHECK(test::contains(listing, "%2 = matmul(%0, %1)"));
  CHECK(test::contains(listing, "%3 = relu(%2)"));
  CHECK(test::contains(listing, "return (%3)"));
  // Outside a capture the key is off again: a plain call records nothing and works.
  CHECK_FALSE(local_dispatch_key_set().included.has(DispatchKey::kCapture));
  CHECK(ops::relu(a).defined());
}

TEST_CASE("capture keeps scalars and keyword arguments, and a tensor the function closed over is a constant") {
  const Tensor x = rand({8}, DType::kF64, 3), w = rand({8}, DType::kF64, 4);
  const compiler::Captured c = capture([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::add(in[0], w, 0.5)}; }, {x});
  const compiler::Graph& g = c.graph;
  REQUIRE(g.nodes.size() == 3);
  CHECK(g.nodes[1].kind == compiler::NodeKind::kConstant);
  CHECK(g.nodes[2].args[2].scalar.to_double() == 0.5);
  CHECK(test::contains(g.str(), "%2 = add(%0, %1, alpha=0.5)"));
}

TEST_CASE("fusion: relu(matmul(a, b)) is one GEMM kernel with relu in its epilogue") {
  const compiler::Captured c = capture(relu_matmul, {rand({4, 6}, DType::kF32, 1), rand({6, 5}, DType::kF32, 2)});
  const compiler::FusionPlan plan = compiler::plan_fusion(c.graph);
  REQUIRE(plan.kernels.size() == 1);
  CHECK(plan.kernels[0].name == "fused_matmul_relu");
  CHECK(plan.kernels[0].kind == KernelKind::kGemmEpilogue);
  CHECK(plan.kernels[0].inputs == std::vector<size_t>{0, 1});
  CHECK(test::contains(plan.str(c.graph), "fused_matmul_relu"));
}

TEST_CASE("fusion: gelu(add(x, y)) and relu(add(x, y)) are one pointwise loop each") {
  const Tensor x = rand({64}, DType::kF32, 1), y = rand({64}, DType::kF32, 2);
  const compiler::FusionPlan gelu = compiler::plan_fusion(capture(gelu_add, {x, y}).graph);
  CHECK(kernel_names(gelu) == std::vector<std::string>{"fused_add_gelu"});
  CHECK(gelu.kernels[0].kind == KernelKind::kPointwise);
  const compiler::FusionPlan relu = compiler::plan_fusion(
      capture([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::add(in[0], in[1], 1.0))}; }, {x, y}).graph);
  CHECK(kernel_names(relu) == std::vector<std::string>{"fused_add_relu"});
}

TEST_CASE("fusion: an op with no lowering in the middle of a chain splits it, and stays an extern call") {
  const Tensor x = rand({32}, DType::kF32, 1), y = rand({32}, DType::kF32, 2);
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor a = ops::relu(ops::add(in[0], in[1], 1.0));
    const Tensor b = ops::to_copy(a, DType::kF32);  // no lowering: a fusion barrier
    return std::vector<Tensor>{ops::add(ops::gelu(b), in[0], 1.0)};
  };
  const compiler::FusionPlan plan = compiler::plan_fusion(capture(fn, {x, y}).graph);
  CHECK(kernel_names(plan) == std::vector<std::string>{"fused_add_relu", "to_copy", "fused_gelu_add"});
  CHECK(plan.kernels[1].kind == KernelKind::kExtern);
}

TEST_CASE("fusion: an intermediate with two users is written out, not recomputed") {
  const Tensor x = rand({16}, DType::kF64, 1), y = rand({16}, DType::kF64, 2);
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor a = ops::add(in[0], in[1], 1.0);
    return std::vector<Tensor>{ops::add(a, ops::relu(a), 1.0)};
  };
  const compiler::FusionPlan plan = compiler::plan_fusion(capture(fn, {x, y}).graph);
  CHECK(kernel_names(plan) == std::vector<std::string>{"fused_add", "fused_relu_add"});
  // A lone matmul has nothing to fuse: it stays the eager kernel.
  const compiler::FusionPlan mm = compiler::plan_fusion(
      capture([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::matmul(in[0], in[1])}; },
              {rand({3, 3}, DType::kF32, 1), rand({3, 3}, DType::kF32, 2)})
          .graph);
  CHECK(kernel_names(mm) == std::vector<std::string>{"matmul"});
  CHECK(mm.kernels[0].kind == KernelKind::kExtern);
}

TEST_CASE("a view inside a captured function is refused with the reason: the graph does not model views yet") {
  const Tensor x = frontend::random_tensor(Shape{4, 4}, DType::kF32, kCPU, 3);
  CHECK_THROWS_WITH_AS(
      capture([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::t(in[0]))}; }, {x}),
      "capture: t is a view (it shares its input's memory); the compiled path does not capture views yet "
      "(docs/views.md)",
      UsageError);
}

TEST_CASE("an in-place op inside a captured function is refused: the graph does not model mutation yet") {
  const Tensor x = frontend::random_tensor(Shape{4, 4}, DType::kF32, kCPU, 3);
  CHECK_THROWS_WITH_AS(
      capture([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu_(ops::add(in[0], in[0], 1.0))}; },
              {x}),
      "capture: relu_ writes its input in place; the compiled path does not capture in-place ops yet "
      "(docs/autograd.md)",
      UsageError);
}

TEST_CASE("a broadcasting add inside a captured function is refused: the fused loops index by the output") {
  const Tensor x = frontend::random_tensor(Shape{3, 4}, DType::kF32, kCPU, 4);
  const Tensor b = frontend::random_tensor(Shape{4}, DType::kF32, kCPU, 5);
  CHECK_THROWS_WITH_AS(
      capture([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::add(in[0], in[1], 1.0)}; }, {x, b}),
      "capture: add of [3x4] f32 cpu and [4] f32 cpu broadcasts; the compiled path does not capture broadcasting "
      "or type promotion yet (docs/broadcasting.md)",
      UsageError);
}

}  // namespace strata
