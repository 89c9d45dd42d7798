// Named programs (layers/frontend/programs.cpp): specs, the step links of Sequence::run_step (an output
// handed to every later reader, then let go), and each program's forward through the real stack against
// its float64 reference and against the same ops called directly.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>

#include "layers/frontend/frontend.h"
#include "layers/frontend/sequence.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "tests/kernels/fresh_seed.h"

using namespace strata;
using namespace strata::frontend;

TEST_CASE("program specs: sizes from the GEMM's spec, messages that name the program and its format") {
  SequenceSpec s = parse_sequence_spec("relu_matmul", "64");
  CHECK(s.sizes == std::vector<int64_t>{64, 64, 64});
  CHECK(s.gemms == 1);
  s = parse_sequence_spec("linear_gelu", "8x16x32");
  CHECK(s.sizes == std::vector<int64_t>{8, 16, 32});
  s = parse_sequence_spec("gelu_tanh", "3x5");
  CHECK(s.sizes == std::vector<int64_t>{3, 5});
  CHECK(s.gemms == 0);
  for (const char* p : {"relu_matmul", "linear_gelu", "gelu_tanh"}) CHECK(is_sequence(p));
  CHECK_THROWS_WITH_AS(parse_sequence_spec("linear_gelu", "8x16"),
                       doctest::Contains("linear_gelu takes BxINxOUT"), UsageError);
  CHECK_THROWS_WITH_AS(parse_sequence_spec("relu_matmul", "0"),
                       doctest::Contains("relu_matmul takes N or MxKxN"), UsageError);
  // f32: a [4,8] @ [8,2] GEMM: a, b, and two [4,2] outputs.
  CHECK(required_bytes(parse_sequence_spec("relu_matmul", "4x8x2"), DType::kF32) == (32 + 16 + 2 * 8) * 4);
  CHECK_THROWS_AS(
      prepare_sequence(parse_sequence_spec("relu_matmul", "4096"), DType::kF32, kCPU, 1, false, 1000),
      UsageError);
}

TEST_CASE("programs compute what their ops compute, and match the float64 reference") {
  const uint64_t seed = strata::testing::run_seed();  // STRATA_TEST_SEED replays it
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  auto size = [&] { return std::to_string(1 + rng() % 23); };
  for (DType dtype : {DType::kF32, DType::kF64}) {
    CAPTURE(dtype_name(dtype));
    for (const char* name : {"relu_matmul", "linear_gelu", "gelu_tanh"}) {
      CAPTURE(std::string(name));
      const std::string dims = size() + "x" + size() + (std::string(name) == "gelu_tanh" ? "" : "x" + size());
      CAPTURE(dims);
      Sequence s = prepare_sequence(parse_sequence_spec(name, dims), dtype, kCPU, seed, false, SIZE_MAX);
      const Tensor out = s.forward().tensor();
      const double tol = sequence_tolerance(s.spec, dtype, false);
      CHECK(reference::relative_error(out, reference_result(s)) <= tol);
      // The same ops called directly: the step links fed every argument.
      const Tensor& x = s.input;
      Tensor direct;
      if (std::string(name) == "relu_matmul") direct = ops::relu(ops::matmul(x, s.parameters[0]));
      if (std::string(name) == "linear_gelu")
        direct = ops::gelu(ops::linear(x, s.parameters[0], s.parameters[1]));
      if (std::string(name) == "gelu_tanh") {
        const Tensor inner =
            ops::mul(ops::add(x, ops::mul(ops::pow(x, 3.0), 0.044715), 1.0), std::sqrt(2.0 / M_PI));
        direct = ops::mul(ops::mul(x, 0.5), ops::add(ops::tanh(inner), 1.0, 1.0));
      }
      CHECK(reference::relative_error(out, reference::to_double(direct)) == 0.0);
      // After a forward no step holds an input, and no output is kept past its last reader.
      for (const SequenceStep& step : s.steps)
        for (const auto& [arg, from] : step.from) CHECK(step.args[arg].is_none());
      for (const binding::IValue& kept : s.outputs) CHECK(kept.is_none());
    }
  }
}
