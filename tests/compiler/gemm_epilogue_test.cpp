// choose_lt_epilogue (layers/compiler/gemm_epilogue.cpp, Note [Which cuBLASLt epilogue]): which cuBLASLt
// epilogue a GEMM-epilogue kernel becomes on the GPU, decided on the host from captured graphs: strata's
// programs and hand-written chains. No compiler and no GPU: capture and fusion only.
#include <doctest/doctest.h>

#include <cmath>

#include "layers/compiler/compiler.h"
#include "layers/frontend/frontend.h"
#include "layers/frontend/sequence.h"
#include "layers/ops/operators.h"
#include "tests/support/error_text.h"

namespace strata {
namespace {

using compiler::LtEpilogue;

Tensor rand(const Shape& s, DType dtype, uint64_t seed) { return frontend::random_tensor(s, dtype, kCPU, seed); }

struct Planned {
  compiler::Captured captured;
  compiler::FusionPlan plan;
};

Planned plan_of(const compiler::Function& fn, const std::vector<Tensor>& inputs) {
  Planned p{compiler::capture(fn, inputs), {}};
  p.plan = compiler::plan_fusion(p.captured.graph);
  return p;
}

// A named program's forward (layers/frontend/programs.cpp), captured as `strata trace --mode compiled` does.
Planned program(const std::string& name, const std::string& dims, DType dtype) {
  frontend::Sequence seq = frontend::prepare_sequence(frontend::parse_sequence_spec(name, dims), dtype, kCPU, 5,
                                                      false, size_t(1) << 30);
  return plan_of([&](const std::vector<Tensor>&) { return std::vector<Tensor>{seq.forward().tensor()}; },
                 {seq.input});
}

// The plan's one GEMM-epilogue kernel's choice.
compiler::EpilogueChoice gemm_choice(const Planned& p) {
  const compiler::FusedKernel* found = nullptr;
  for (const compiler::FusedKernel& k : p.plan.kernels) {
    if (k.kind != compiler::KernelKind::kGemmEpilogue) continue;
    REQUIRE(found == nullptr);
    found = &k;
  }
  REQUIRE(found != nullptr);
  return compiler::choose_lt_epilogue(p.captured.graph, *found);
}

// The tanh GELU over x as programs.cpp writes it, the operands of add and the final mul in either order.
Tensor tanh_gelu(const Tensor& x, bool swapped, double half = 0.5) {
  const Tensor cube = ops::mul(ops::pow(x, 3.0), 0.044715);
  const Tensor inner = ops::mul(swapped ? ops::add(cube, x, 1.0) : ops::add(x, cube, 1.0), std::sqrt(2.0 / M_PI));
  const Tensor one_plus = ops::add(ops::tanh(inner), 1.0, 1.0);
  const Tensor half_x = ops::mul(x, half);
  return swapped ? ops::mul(one_plus, half_x) : ops::mul(half_x, one_plus);
}

// A GEMM kernel over the whole graph: fusion never puts the tanh GELU after a GEMM (x has three readers,
// so the GEMM's result is not an intermediate with one user), but a GPU epilogue can take it whole.
compiler::FusedKernel whole_graph_kernel(const compiler::Graph& g) {
  compiler::FusedKernel k;
  k.kind = compiler::KernelKind::kGemmEpilogue;
  k.name = "whole";
  for (size_t id = 0; id < g.nodes.size(); ++id)
    if (g.nodes[id].kind == compiler::NodeKind::kCall) k.nodes.push_back(id);
  k.output = k.nodes.back();
  return k;
}

}  // namespace

TEST_CASE("relu_matmul: relu after the GEMM is cuBLASLt's RELU epilogue, f32 and f64") {
  for (DType dtype : {DType::kF32, DType::kF64}) {
    CAPTURE(dtype_name(dtype));
    const compiler::EpilogueChoice c = gemm_choice(program("relu_matmul", "24x16x8", dtype));
    CHECK(c.epilogue == LtEpilogue::kRelu);
    CHECK(!c.has_bias);
    CHECK(std::string(compiler::lt_epilogue_name(c.epilogue)) == "CUBLASLT_EPILOGUE_RELU");
    CHECK(test::contains(c.why, "relu"));
  }
}

TEST_CASE("linear_gelu: the erf gelu is not cuBLASLt's GELU (the tanh form), so no epilogue") {
  const compiler::EpilogueChoice c = gemm_choice(program("linear_gelu", "8x16x12", DType::kF32));
  CHECK(c.epilogue == LtEpilogue::kNone);
  CHECK(c.has_bias);
  CHECK(test::contains(c.why, "erf"));
  CHECK(test::contains(c.why, "tanh"));
}

TEST_CASE("linear's bias and relu: RELU_BIAS - without a bias RELU - in f64 with a bias none") {
  const Tensor w = rand({6, 5}, DType::kF32, 2), bias = rand({6}, DType::kF32, 3);
  const Planned with = plan_of([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::linear(in[0], w, bias))}; },
                               {rand({4, 5}, DType::kF32, 1)});
  compiler::EpilogueChoice c = gemm_choice(with);
  CHECK(c.epilogue == LtEpilogue::kReluBias);
  CHECK(c.has_bias);
  CHECK(test::contains(c.why, "CUBLASLT_EPILOGUE_RELU_BIAS"));

  const Planned without = plan_of(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::linear(in[0], w, Tensor()))}; },
      {rand({4, 5}, DType::kF32, 1)});
  c = gemm_choice(without);
  CHECK(c.epilogue == LtEpilogue::kRelu);
  CHECK(!c.has_bias);

  const Tensor w64 = rand({6, 5}, DType::kF64, 2), bias64 = rand({6}, DType::kF64, 3);
  const Planned f64 = plan_of(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::linear(in[0], w64, bias64))}; },
      {rand({4, 5}, DType::kF64, 1)});
  c = gemm_choice(f64);
  CHECK(c.epilogue == LtEpilogue::kNone);
  CHECK(test::contains(c.why, "f64"));
}

TEST_CASE("the tanh GELU after a GEMM, in either operand order, is GELU - with linear's bias GELU_BIAS") {
  const Tensor a = rand({4, 5}, DType::kF32, 1), b = rand({5, 6}, DType::kF32, 2);
  const Tensor w = rand({6, 5}, DType::kF32, 3), bias = rand({6}, DType::kF32, 4);
  for (bool swapped : {false, true}) {
    CAPTURE(swapped);
    compiler::Captured g = compiler::capture(
        [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh_gelu(ops::matmul(in[0], in[1]), swapped)}; },
        {a, b});
    compiler::EpilogueChoice c = compiler::choose_lt_epilogue(g.graph, whole_graph_kernel(g.graph));
    CHECK(c.epilogue == LtEpilogue::kGelu);
    CHECK(test::contains(c.why, "tanh GELU (8 calls)"));
    g = compiler::capture(
        [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh_gelu(ops::linear(in[0], w, bias), swapped)}; },
        {a});
    c = compiler::choose_lt_epilogue(g.graph, whole_graph_kernel(g.graph));
    CHECK(c.epilogue == LtEpilogue::kGeluBias);
  }
  // Another constant is another function: not the GELU.
  const compiler::Captured off = compiler::capture(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh_gelu(ops::matmul(in[0], in[1]), false, 0.6)}; },
      {a, b});
  const compiler::EpilogueChoice c = compiler::choose_lt_epilogue(off.graph, whole_graph_kernel(off.graph));
  CHECK(c.epilogue == LtEpilogue::kNone);
  CHECK(test::contains(c.why, "pow, mul.Scalar, add"));
}

TEST_CASE("what no epilogue computes: an add of a tensor, two activations, a kernel with no GEMM") {
  const Tensor a = rand({4, 5}, DType::kF32, 1), b = rand({5, 6}, DType::kF32, 2), y = rand({4, 6}, DType::kF32, 3);
  Planned p = plan_of(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::add(ops::matmul(in[0], in[1]), in[2], 1.0))}; },
      {a, b, y});
  compiler::EpilogueChoice c = gemm_choice(p);
  CHECK(c.epilogue == LtEpilogue::kNone);
  CHECK(test::contains(c.why, "add, relu after the GEMM"));

  p = plan_of([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::relu(ops::matmul(in[0], in[1])))}; },
              {a, b});
  c = gemm_choice(p);
  CHECK(c.epilogue == LtEpilogue::kNone);
  CHECK(test::contains(c.why, "relu, relu after the GEMM"));

  p = plan_of([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::add(in[0], in[1], 1.0))}; },
              {y, y});
  REQUIRE(p.plan.kernels.size() == 1);
  c = compiler::choose_lt_epilogue(p.captured.graph, p.plan.kernels[0]);
  CHECK(c.epilogue == LtEpilogue::kNone);
  CHECK(test::contains(c.why, "pointwise kernel has no GEMM"));
}

}  // namespace strata
