// Every operator in layers/ops/operators.h, through its own declaration: the spec builds a call, the
// binding layer accepts it (its schema matches its Signature), the CPU kernel agrees with the float64
// reference on fresh random inputs in every dtype, and the Autograd key records the node the declaration names. A new
// operator is covered here the moment it is added to AllOps.
#include <doctest/doctest.h>

#include <string>

#include "layers/frontend/frontend.h"
#include "layers/frontend/specs/specs.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"

using namespace strata;

namespace {

// A small spec each op accepts: the first of these shapes its spec parser takes.
frontend::OpSpec small_spec(const char* name) {
  for (const char* dims : {"2x3x6x6", "5x7x3", "33"}) {
    try {
      return frontend::parse_op_spec(name, dims);
    } catch (const UsageError&) {
    }
  }
  FAIL("no small spec fits " << name);
  return {};
}

}  // namespace

TEST_CASE("every declared operator: spec, binding, CPU kernel against the reference, Autograd node") {
  size_t seen = 0;
  ops::AllOps::for_each([&](auto decl) {
    using Op = decltype(decl);
    CAPTURE(Op::kName);
    ++seen;
    const frontend::OpSpec spec = small_spec(Op::kName);
    CHECK(spec.op == Op::kName);
    CHECK(spec.op_index == ops::op_index<Op>());
    CHECK(frontend::spec_help().find(frontend::help_line<Op>()) != std::string::npos);
    // Every dtype on the CPU: f16/bf16 are widened to f32 (Note [Half types on the CPU]) and checked at
    // their own tolerance.
    for (DType dtype : kAllDTypes) {
      CAPTURE(dtype_name(dtype));
      for (bool grad : {false, true}) {
        CAPTURE(grad);
        const frontend::PreparedCall call =
            frontend::prepare_call(spec, dtype, kCPU, 7, grad, frontend::available_host_bytes());
        CHECK(call.op->schema().name == Op::kName);
        if constexpr (ops::kInPlace<Op>) {
          // An in-place op writes its inputs: the reference is taken first. On a leaf that requires grad
          // it is refused, as torch refuses it (Note [In-place operators]).
          if (grad) {
            CHECK_THROWS_WITH_AS(call.op->call(call.args),
                                 doctest::Contains("a leaf Variable that requires grad is being used in an in-place operation."),
                                 UsageError);
            continue;
          }
          const std::vector<double> expected = frontend::reference_result(spec, call);
          const uint32_t before = call.args.front().tensor().storage()->version();
          const binding::IValue out = call.op->call(call.args);
          REQUIRE(out.is_tensor());
          CHECK(out.tensor().storage() == call.args.front().tensor().storage());  // self, returned
          CHECK(out.tensor().storage()->version() == before + 1);
          CHECK(reference::relative_error(out.tensor(), expected) <= reference::tolerance(dtype));
          CHECK(out.tensor().grad_fn() == nullptr);
          continue;
        }
        const binding::IValue out = call.op->call(call.args);
        REQUIRE(out.is_tensor());
        CHECK(out.tensor().sizes() == spec.call.outputs.front());
        CHECK(reference::relative_error(out.tensor(), frontend::reference_result(spec, call)) <=
              reference::tolerance(dtype));
        if (grad) {
          REQUIRE(out.tensor().grad_fn() != nullptr);
          CHECK(std::string(out.tensor().grad_fn()->name()) == Op::kBackward.node);
        } else {
          CHECK(out.tensor().grad_fn() == nullptr);
        }
      }
    }
    // Each op's CPU kernel sits in its dispatcher entry under the text the declaration gives.
    CHECK(ops::entry<Op>().registered_by(DispatchKey::kCPU) == Op::kCpu.where);
    CHECK(std::string(ops::entry<Op>().name()) == Op::kName);
  });
  CHECK(seen == ops::AllOps::kSize);
  CHECK(Dispatcher::instance().operators().size() == ops::AllOps::kSize);
}

TEST_CASE("an operator is found by its name and by its alias, and the CLI's spelling maps to one name") {
  CHECK(frontend::parse_op_spec("conv", "1x3x8x8").op == "conv2d");
  CHECK(frontend::parse_op_spec("conv2d", "1x3x8x8").op == "conv2d");
  CHECK(frontend::parse_op_spec("mm", "4").op == "matmul");
  CHECK(frontend::parse_op_spec("gelu", "4").op == "gelu");
}
