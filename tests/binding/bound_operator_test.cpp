// Matching boxed arguments against a schema (layers/binding/bound_operator.cpp): type and arity
// mismatches quote the schema, keyword arguments and defaults work as in Python.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "layers/binding/binding.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"

using namespace strata;
using namespace strata::binding;

namespace {

Tensor rnd(const Shape& s, uint64_t seed) { return frontend::random_tensor(s, DType::kF64, kCPU, seed); }

std::string call_error(const BoundOperator& op, std::vector<IValue> args, std::vector<Kwarg> kwargs = {}) {
  try {
    op.call(args, kwargs);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<accepted>";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("IValue: type names and reprs") {
  CHECK(IValue().type_name() == "None");
  CHECK(IValue(3).type_name() == "int");
  CHECK(IValue(int64_t{3}).repr() == "3");
  CHECK(IValue(2.5).type_name() == "float");
  CHECK(IValue(true).repr() == "True");
  CHECK(IValue(rnd(Shape{2, 3}, 1)).repr() == "Tensor[2x3] f64 cpu");
  CHECK(IValue(3).to_double() == 3.0);  // int -> float promotion, as in Python
}

TEST_CASE("find_operator knows every operator and lists them when asked for another") {
  // Derived from the one list (Note [One declaration per operator]), so a new operator needs no edit here.
  std::string known;
  size_t count = 0;
  ops::AllOps::for_each([&](auto decl) {
    using Op = decltype(decl);
    CHECK(find_operator(Op::kName).schema().name == Op::kName);
    known += (count++ > 0 ? ", " : "") + std::string(Op::kName);
  });
  CHECK(count >= 24);  // at least the operators there were when this test was written
  CHECK(all_operators().size() == count);
  CHECK(find_operator("mul.Scalar").schema().text == "mul.Scalar(Tensor self, float other=1) -> Tensor");
  CHECK_THROWS_WITH_AS(find_operator("frobnicate"), ("unknown operator 'frobnicate'; known operators: " + known).c_str(),
                       UsageError);
  // A typo (strata._strata.call("sliu", ...) from Python) is answered with the nearest name.
  CHECK_THROWS_WITH_AS(find_operator("sliu"),
                       ("unknown operator 'sliu': did you mean 'silu'? known operators: " + known).c_str(), UsageError);
}

TEST_CASE("type mismatches name the argument, its position and the schema") {
  const BoundOperator& mm = find_operator("matmul");
  const std::string msg = call_error(mm, {rnd(Shape{2, 2}, 1), IValue(3)});
  CHECK(msg ==
        "matmul(): argument 'other' (position 2) must be Tensor, not int\n"
        "  schema: matmul(Tensor self, Tensor other) -> Tensor");
  CHECK(contains(call_error(mm, {IValue(), rnd(Shape{2, 2}, 1)}),
                 "argument 'self' (position 1) must be Tensor, not None"));
  const BoundOperator& conv = find_operator("conv2d");
  Tensor x = rnd(Shape{1, 1, 4, 4}, 1), w = rnd(Shape{1, 1, 3, 3}, 2);
  CHECK(contains(call_error(conv, {x, w, IValue(), IValue(1.5)}),
                 "argument 'stride' (position 4) must be int or int[2], not float"));
  CHECK(contains(call_error(conv, {x, w, IValue(), IValue(1), IValue(0), IValue(1), IValue(Shape{1})}),
                 "argument 'groups' (position 7) must be int, not int[]"));
  CHECK(
      contains(call_error(conv, {x, w, IValue(3)}), "argument 'bias' (position 3) must be Tensor?, not int"));
}

TEST_CASE("arity mismatches: too many positionals, missing required arguments") {
  const BoundOperator& mm = find_operator("matmul");
  Tensor a = rnd(Shape{2, 2}, 1);
  CHECK(contains(call_error(mm, {a, a, a}), "takes 2 positional arguments but 3 were given"));
  CHECK(contains(call_error(mm, {a}), "missing required argument 'other' (position 2)"));
  CHECK(contains(call_error(mm, {}), "missing required argument 'self' (position 1)"));
  CHECK(contains(call_error(find_operator("relu"), {a, a}), "takes 1 positional argument but 2 were given"));
  // alpha is keyword-only: passing it positionally is one positional too many.
  CHECK(contains(call_error(find_operator("add"), {a, a, IValue(2.0)}),
                 "takes 2 positional arguments but 3 were given"));
  CHECK(contains(call_error(mm, {a}), "schema: matmul(Tensor self, Tensor other) -> Tensor"));
}

TEST_CASE("keyword arguments: by name, unknown names, duplicates") {
  const BoundOperator& add = find_operator("add");
  Tensor a = rnd(Shape{3, 4}, 1), b = rnd(Shape{3, 4}, 2);
  CHECK(contains(call_error(add, {a, b}, {{"beta", IValue(1.0)}}),
                 "got an unexpected keyword argument 'beta'"));
  CHECK(contains(call_error(add, {a, b}, {{"other", b}}), "got multiple values for argument 'other'"));
  CHECK(contains(call_error(add, {a, b}, {{"alpha", IValue(true)}}),
                 "argument 'alpha' (position 3) must be float, not bool"));
  // Positional arguments may also be passed by keyword, as in Python.
  IValue out = add.call(std::vector<IValue>{a}, std::vector<Kwarg>{{"other", b}, {"alpha", IValue(-2.0)}});
  const auto expected = reference::add(a, b, -2.0);
  CHECK(reference::relative_error(out.tensor(), expected) <= reference::tolerance(DType::kF64));
  // An int alpha is promoted to float.
  out = add.call(std::vector<IValue>{a, b}, std::vector<Kwarg>{{"alpha", IValue(3)}});
  CHECK(reference::relative_error(out.tensor(), reference::add(a, b, 3.0)) <=
        reference::tolerance(DType::kF64));
}

TEST_CASE("defaults fill what the caller left out") {
  Tensor x = rnd(Shape{2, 3}, 1), w = rnd(Shape{4, 3}, 2);
  // linear's bias defaults to None: no bias added.
  IValue out = find_operator("linear").call(std::vector<IValue>{x, w});
  CHECK(reference::relative_error(out.tensor(), reference::linear(x, w, Tensor())) <=
        reference::tolerance(DType::kF64));
  // conv2d's stride=1, padding=0 defaults: a 5x5 input and 3x3 kernel give 3x3.
  Tensor ci = rnd(Shape{1, 2, 5, 5}, 3), cw = rnd(Shape{3, 2, 3, 3}, 4);
  out = find_operator("conv2d").call(std::vector<IValue>{ci, cw});
  CHECK(out.tensor().sizes() == Shape{1, 3, 3, 3});
  // An int for an int[2] argument stands for both dims, as in torch; so does a list of one.
  out = find_operator("conv2d").call(std::vector<IValue>{ci, cw, IValue(), IValue(2), IValue(Shape{1}), IValue(Shape{1, 2})});
  CHECK(out.tensor().sizes() == Shape{1, 3, 3, 2});
  const Kwarg groups{"groups", IValue(1)}, stride{"stride", IValue(Shape{2, 1})};
  out = find_operator("conv2d").call(std::vector<IValue>{ci, cw}, std::vector<Kwarg>{groups, stride});
  CHECK(out.tensor().sizes() == Shape{1, 3, 2, 3});
  // add's alpha defaults to 1.
  out = find_operator("add").call(std::vector<IValue>{x, x});
  CHECK(reference::relative_error(out.tensor(), reference::add(x, x, 1.0)) <=
        reference::tolerance(DType::kF64));
}

TEST_CASE("shape errors from the kernel come through the binding as UsageErrors") {
  Tensor a = rnd(Shape{2, 3}, 1), b = rnd(Shape{4, 5}, 2);
  CHECK(contains(call_error(find_operator("matmul"), {a, b}), "mat1 and mat2 shapes cannot be multiplied"));
}

TEST_CASE("a BoundOperator refuses a schema with more arguments than the binding can hold") {
  // The binding matches into a fixed array of 8 slots; a longer schema must be refused when bound, not
  // overflow that array when called.
  Schema nine = parse_schema("f(int a, int b, int c, int d, int e, int f, int g, int h, int i) -> Tensor");
  auto invoke = [](const IValue* const*) { return IValue(); };
  CHECK_THROWS_WITH_AS(BoundOperator(nine, invoke), doctest::Contains("more than 8 arguments"), Error);
  Schema eight = parse_schema("f(int a, int b, int c, int d, int e, int f, int g, int h) -> Tensor");
  BoundOperator ok(eight, invoke);
  std::vector<IValue> args(8, IValue(1));
  CHECK(ok.call(args).is_none());
}
