// Sequences (layers/frontend/sequence.cpp): `mlp` specs, sizing, seeded parameters, the model's forward
// through the real stack against its float64 reference on fresh random inputs, and the gradients of every
// parameter from the autograd engine against a float64 backward (itself checked by finite differences).
#include "layers/frontend/sequence.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "layers/autograd/engine.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"

using namespace strata;
using namespace strata::frontend;

namespace {

std::string spec_error(const std::string& dims) {
  try {
    parse_sequence_spec("mlp", dims);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<accepted>";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("mlp specs: batch, input, hidden widths, output") {
  SequenceSpec s = parse_sequence_spec("mlp", "16x256x512x10");
  CHECK(s.batch == 16);
  CHECK(s.widths == std::vector<int64_t>{256, 512, 10});
  CHECK(s.linears() == 2);
  CHECK(s.steps() == 3);  // linear, relu, linear
  CHECK(s.text == "mlp 16x256x512x10");
  s = parse_sequence_spec("mlp", "4x8x2");  // no hidden layer: one Linear
  CHECK(s.linears() == 1);
  CHECK(s.steps() == 1);
  s = parse_sequence_spec("mlp", "2x3x4x5x6x7");  // more than 4 fields, which single ops refuse
  CHECK(s.linears() == 4);
  CHECK(s.steps() == 7);
  CHECK(is_sequence("mlp"));
  CHECK_FALSE(is_sequence("linear"));
}

TEST_CASE("bad mlp specs are refused with what was wrong and what is allowed") {
  CHECK(has(spec_error("16x256"), "at least 3 needed"));
  CHECK(has(spec_error("16x256"), "BxINxHIDDEN"));
  CHECK(has(spec_error("16"), "1 size,"));
  CHECK(has(spec_error("16x0x10"), "contains 0"));
  CHECK(has(spec_error("16xx10"), "empty field"));
  CHECK(has(spec_error("16x256x"), "empty field"));
  CHECK(has(spec_error("16x-3x10"), "negative"));
  CHECK(has(spec_error("16x2.5x10"), "whole number"));
  CHECK(has(spec_error("16x3000000000x10"), "too large"));
  CHECK(has(spec_error(""), "empty field"));
  std::string many = "2";
  for (size_t i = 0; i < kMaxMlpLayers + 2; ++i) many += "x3";
  CHECK(has(spec_error(many), "at most " + std::to_string(kMaxMlpLayers)));
  // As an operator, mlp is refused with a pointer to where sequences are taken.
  try {
    parse_op_spec("mlp", "16x256x10");
    FAIL("mlp accepted as an operator");
  } catch (const UsageError& e) {
    CHECK(has(e.what(), "sequence of ops"));
  }
}

TEST_CASE("required_bytes counts the input, every parameter and every activation") {
  // mlp 2x3x4x5: input 2x3 = 6; W0 4x3 + b0 4 = 16; linear out 2x4 + relu out 2x4 = 16; W1 5x4 + b1 5 = 25;
  // output 2x5 = 10 -> 73 elements.
  CHECK(required_bytes(parse_sequence_spec("mlp", "2x3x4x5"), DType::kF32) == 73 * 4);
  CHECK(required_bytes(parse_sequence_spec("mlp", "2x3x4x5"), DType::kF64) == 73 * 8);
  try {
    required_bytes(parse_sequence_spec("mlp", "2147483647x2147483647x2147483647x2147483647"), DType::kF64);
    FAIL("accepted");
  } catch (const UsageError& e) {
    CHECK(has(e.what(), "2^63"));
  }
  // Refused before anything is allocated, naming the need and what is available.
  try {
    prepare_sequence(parse_sequence_spec("mlp", "1024x1024x1024"), DType::kF32, kCPU, 1, false, 1000);
    FAIL("accepted");
  } catch (const UsageError& e) {
    CHECK(has(e.what(), "only"));
    CHECK(has(e.what(), "mlp 1024x1024x1024"));
  }
}

TEST_CASE("prepare_sequence: parameters like nn.Linear's, the input not requiring grad") {
  const SequenceSpec spec = parse_sequence_spec("mlp", "5x64x32x3");
  Sequence s = prepare_sequence(spec, DType::kF64, kCPU, 11, /*requires_grad=*/true, SIZE_MAX);
  REQUIRE(s.steps.size() == 3);
  REQUIRE(s.parameters.size() == 4);
  CHECK_FALSE(s.input.requires_grad());
  for (const Tensor& p : s.parameters) CHECK(p.requires_grad());
  CHECK(s.parameters[0].sizes() == Shape{32, 64});
  CHECK(s.parameters[1].sizes() == Shape{32});
  CHECK(s.parameters[2].sizes() == Shape{3, 32});
  // Weights within +-1/sqrt(fan_in), and not all zero.
  for (size_t i = 0; i < 2; ++i) {
    const double bound = 1.0 / std::sqrt(double(spec.widths[i]));
    double largest = 0;
    for (double v : reference::to_double(s.parameters[2 * i])) largest = std::max(largest, std::fabs(v));
    CHECK(largest <= bound);
    CHECK(largest > bound / 2);
  }
  CHECK(s.steps[0].op->schema().name == "linear");
  CHECK(s.steps[1].op->schema().name == "relu");
  CHECK(s.steps[2].op->schema().name == "linear");
  CHECK(s.description == "[5x64] -> linear 32 -> relu -> linear 3 -> [5x3]");
  // flops from the ops' own declarations: 2*B*IN*OUT + B*OUT per linear, B*H per relu.
  CHECK(s.flops == doctest::Approx(2.0 * 5 * 64 * 32 + 5 * 32 + 5 * 32 + 2.0 * 5 * 32 * 3 + 5 * 3));
  // Without --requires-grad nothing requires grad; the same seed gives the same values.
  Sequence plain = prepare_sequence(spec, DType::kF64, kCPU, 11, false, SIZE_MAX);
  for (const Tensor& p : plain.parameters) CHECK_FALSE(p.requires_grad());
  CHECK(reference::to_double(plain.parameters[2]) == reference::to_double(s.parameters[2]));
}

TEST_CASE("the mlp forward through binding and dispatch matches its float64 reference") {
  for (const char* dims : {"7x13x5", "16x256x512x10", "3x17x9x11x4", "1x8x8x8x8x2"}) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      for (bool grad : {false, true}) {
        CAPTURE(std::string(dims));
        CAPTURE(dtype_name(dtype));
        CAPTURE(grad);
        const SequenceSpec spec = parse_sequence_spec("mlp", dims);
        Sequence s = prepare_sequence(spec, dtype, kCPU, 1234 + spec.steps(), grad, SIZE_MAX);
        const binding::IValue out = s.forward();
        CHECK(out.tensor().sizes() == Shape{spec.batch, spec.widths.back()});
        CHECK(out.tensor().requires_grad() == grad);  // Autograd recorded through the whole model
        const double err = reference::relative_error(out.tensor(), reference_result(s));
        CHECK(err <= sequence_tolerance(spec, dtype, false));
        // The same forward again (the steps' inputs were released and are fed anew): the same output.
        CHECK(reference::relative_error(s.forward().tensor(), reference::to_double(out.tensor())) == 0.0);
      }
    }
  }
}

TEST_CASE("the reference is of the whole model: a wrong hidden layer is caught") {
  const SequenceSpec spec = parse_sequence_spec("mlp", "4x16x8x3");
  Sequence s = prepare_sequence(spec, DType::kF64, kCPU, 5, false, SIZE_MAX);
  const binding::IValue out = s.forward();
  // Shift the hidden layer's bias after the forward: the reference now describes another model.
  for (int64_t i = 0; i < s.parameters[1].numel(); ++i) s.parameters[1].data<double>()[i] += 0.5;
  CHECK(reference::relative_error(out.tensor(), reference_result(s)) > sequence_tolerance(spec, DType::kF64, false));
}

namespace {

// sum(model(input)) in float64 from the reference forward: what the gradients are gradients of.
double reference_loss(const Sequence& s) {
  double sum = 0;
  for (double v : reference_result(s)) sum += v;
  return sum;
}

}  // namespace

TEST_CASE("the float64 parameter gradients agree with central finite differences of the float64 forward") {
  // f64 parameters on the host, nudged one element at a time: the reference chain (linear_backward,
  // relu_backward, in reverse) is checked against the definition, not against another formula.
  const SequenceSpec spec = parse_sequence_spec("mlp", "3x5x4x4x2");
  Sequence s = prepare_sequence(spec, DType::kF64, kCPU, 77, false, SIZE_MAX);
  const std::vector<std::vector<double>> grads = reference_parameter_gradients(s);
  REQUIRE(grads.size() == s.parameters.size());
  constexpr double kStep = 1e-6;
  for (size_t p = 0; p < s.parameters.size(); ++p) {
    CAPTURE(parameter_name(p));
    double* data = s.parameters[p].data<double>();
    REQUIRE(grads[p].size() == static_cast<size_t>(s.parameters[p].numel()));
    for (int64_t i = 0; i < s.parameters[p].numel(); ++i) {
      const double saved = data[i];
      data[i] = saved + kStep;
      const double up = reference_loss(s);
      data[i] = saved - kStep;
      const double down = reference_loss(s);
      data[i] = saved;
      CHECK(grads[p][static_cast<size_t>(i)] == doctest::Approx((up - down) / (2 * kStep)).epsilon(1e-6));
    }
  }
  CHECK(parameter_name(0) == "0.weight");  // nn.Sequential(Linear, ReLU, Linear).named_parameters()
  CHECK(parameter_name(3) == "2.bias");
}

TEST_CASE("--view on an mlp: the named tensor becomes a view the step reads, the forward still matches its reference") {
  const SequenceSpec spec = parse_sequence_spec("mlp", "5x12x8x8x3");
  CHECK(sequence_tensor_names(spec) ==
        std::vector<std::string>{"input", "0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"});
  Sequence s = prepare_sequence(spec, DType::kF64, kCPU, 21, /*requires_grad=*/true, SIZE_MAX);
  apply_sequence_views(s, {"input=t", "2.weight=t", "4.bias=slice3"}, 21, SIZE_MAX);
  REQUIRE(s.views.size() == 3);
  // Each view has the tensor's sizes over its own buffer, and the step that reads the tensor holds it.
  CHECK(s.input.sizes() == Shape{5, 12});
  CHECK(s.input.strides() == Shape{1, 5});
  CHECK(s.input.storage() == s.views[0].base.storage());
  CHECK(s.steps[0].args[0].tensor().storage() == s.input.storage());
  CHECK(s.parameters[2].sizes() == Shape{8, 8});
  CHECK(s.parameters[2].strides() == Shape{1, 8});
  CHECK(s.steps[2].args[1].tensor().storage() == s.parameters[2].storage());  // Linear 2 is step 2 (module 2)
  CHECK(s.parameters[5].strides() == Shape{3});
  CHECK(s.steps[4].args[2].tensor().storage() == s.parameters[5].storage());
  // A parameter's view is the leaf that requires grad; the input is data.
  CHECK(s.parameters[2].requires_grad());
  CHECK(s.parameters[5].requires_grad());
  CHECK_FALSE(s.input.requires_grad());
  CHECK(has(s.description, "(input: t view, strides 1x5)  (2.weight: t view, strides 1x8)  (4.bias: slice3 view, strides 3)"));
  const binding::IValue out = s.forward();
  CHECK(reference::relative_error(out.tensor(), reference_result(s)) <= sequence_tolerance(spec, DType::kF64, false));
  autograd::backward(ops::sum(out.tensor()));
  const auto want = reference_parameter_gradients(s);
  for (size_t p = 0; p < s.parameters.size(); ++p) {
    CAPTURE(parameter_name(p));
    REQUIRE(s.parameters[p].grad().defined());
    CHECK(reference::relative_error(s.parameters[p].grad(), want[p]) <= sequence_gradient_tolerance(spec, DType::kF64, false));
  }
}

TEST_CASE("--view on an mlp: a name that is not one of its tensors is refused with the names, and the nearest") {
  const SequenceSpec spec = parse_sequence_spec("mlp", "4x8x3");
  auto refusal = [&](const std::vector<std::string>& views) {
    Sequence s = prepare_sequence(spec, DType::kF32, kCPU, 1, false, SIZE_MAX);
    try {
      apply_sequence_views(s, views, 1, SIZE_MAX);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("<accepted>");
  };
  CHECK(has(refusal({"fc1.weight=t"}), "NAME one of mlp 4x8x3's tensors: input, 0.weight, 0.bias (the model's input"));
  CHECK_FALSE(has(refusal({"fc1.weight=t"}), "did you mean"));  // nothing within two edits
  CHECK(has(refusal({"0.bais=slice2"}), "did you mean '0.bias'?"));
  CHECK(has(refusal({"input=t", "input=slice2"}), "--view input is given twice"));
  CHECK(has(refusal({"0.weight=flip"}), "unknown view; allowed: t"));
  Sequence program = prepare_sequence(parse_sequence_spec("relu_matmul", "8"), DType::kF32, kCPU, 1, false, SIZE_MAX);
  CHECK_THROWS_WITH_AS(apply_sequence_views(program, {"self=t"}, 1, SIZE_MAX),
                       doctest::Contains("relu_matmul is a named program"), UsageError);
}

TEST_CASE("the engine's gradients of every MLP parameter match the float64 reference on random models") {
  for (const char* dims : {"7x13x5", "16x256x512x10", "3x17x9x11x4"}) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      CAPTURE(std::string(dims));
      CAPTURE(dtype_name(dtype));
      const SequenceSpec spec = parse_sequence_spec("mlp", dims);
      Sequence s = prepare_sequence(spec, dtype, kCPU, 4321 + spec.steps(), /*requires_grad=*/true, SIZE_MAX);
      const binding::IValue out = s.forward();
      autograd::backward(ops::sum(out.tensor()));
      const auto want = reference_parameter_gradients(s);
      for (size_t p = 0; p < s.parameters.size(); ++p) {
        CAPTURE(parameter_name(p));
        const Tensor g = s.parameters[p].grad();
        REQUIRE(g.defined());
        CHECK(g.sizes() == s.parameters[p].sizes());
        CHECK(reference::relative_error(g, want[p]) <= sequence_gradient_tolerance(spec, dtype, false));
      }
      CHECK_FALSE(s.input.grad().defined());  // the input is data: no gradient
    }
  }
}
