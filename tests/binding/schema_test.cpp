// The schema parser (layers/binding/schema_parser.cpp): what it accepts, and that every refusal names
// the column and what was expected there.
#include <doctest/doctest.h>

#include <string>

#include "layers/binding/binding.h"
#include "lib/error.h"

using namespace strata;
using namespace strata::binding;

namespace {

std::string schema_error(std::string_view text) {
  try {
    parse_schema(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "<accepted>";
}

}  // namespace

TEST_CASE("a full schema: types, defaults, keyword-only arguments, return type") {
  const Schema s = parse_schema(
      "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int stride=1, int padding=0, *, float "
      "alpha=0.5, "
      "bool flag=True) -> Tensor");
  CHECK(s.name == "conv2d");
  CHECK(s.returns == "Tensor");
  REQUIRE(s.arguments.size() == 7);
  CHECK(s.arguments[0].name == "input");
  CHECK(s.arguments[0].type == ArgType::kTensor);
  CHECK_FALSE(s.arguments[0].default_value.has_value());
  CHECK(s.arguments[2].type == ArgType::kOptionalTensor);
  CHECK(s.arguments[2].default_value->is_none());
  CHECK(s.arguments[3].type == ArgType::kInt);
  CHECK(s.arguments[3].default_value->to_int() == 1);
  CHECK_FALSE(s.arguments[4].keyword_only);
  CHECK(s.arguments[5].keyword_only);
  CHECK(s.arguments[5].type == ArgType::kFloat);
  CHECK(s.arguments[5].default_value->to_double() == 0.5);
  CHECK(s.arguments[6].default_value->to_bool());
  CHECK(s.text.find("conv2d(") == 0);
}

TEST_CASE("int[N] takes one int as its default, for each of the N, as torch's int[2] stride=1 does") {
  const Schema s = parse_schema("conv2d(Tensor input, int[] dims, int[2] stride=1, int[2] padding=0) -> Tensor");
  CHECK(s.arguments[2].type == ArgType::kIntList);
  CHECK(s.arguments[2].list_size == 2);
  CHECK(s.arguments[2].default_value->to_int_list() == Shape{1, 1});
  CHECK(s.arguments[3].default_value->to_int_list() == Shape{0, 0});
  CHECK(s.arguments[1].list_size == 0);
  CHECK_FALSE(s.arguments[1].default_value.has_value());
  CHECK(schema_error("f(int[5] x) -> Tensor").find("a list size of at most 4") != std::string::npos);
  CHECK(schema_error("f(int[] x=1) -> Tensor").find("nor an int[] without a size") != std::string::npos);
}

TEST_CASE("whitespace is free, an empty argument list is fine, negative defaults parse") {
  CHECK(parse_schema("  f( )->Tensor  ").arguments.empty());
  CHECK(parse_schema("f()->Tensor").name == "f");
  const Schema s = parse_schema("g(int   a = -3 , float b=-1e-3)   ->   int");
  CHECK(s.arguments[0].default_value->to_int() == -3);
  CHECK(s.arguments[1].default_value->to_double() == doctest::Approx(-1e-3));
  CHECK(s.returns == "int");
}

TEST_CASE("every schema the dispatcher registers parses") {
  for (const BoundOperator* op : all_operators()) {
    CAPTURE(op->schema().text);
    CHECK(parse_schema(op->schema().text).name == op->schema().name);
  }
}

TEST_CASE("malformed schemas: the message names the column and what was expected") {
  CHECK(schema_error("") == "bad schema \"\": expected operator name at column 1, found the end");
  CHECK(schema_error("1f() -> Tensor").find("expected operator name at column 1, found '1'") !=
        std::string::npos);
  CHECK(schema_error("f -> Tensor").find("expected '(' at column 2, found ' '") != std::string::npos);
  CHECK(schema_error("f(Tensor) -> Tensor").find("expected argument name at column 9, found ')'") !=
        std::string::npos);
  CHECK(schema_error("f(Tensr a) -> Tensor")
            .find("expected a type (Tensor, Tensor?, int, int[], int[N], float, float?, bool, ScalarType, ScalarType?) at column 3") != std::string::npos);
  CHECK(schema_error("f(int? a) -> Tensor").find("'?' only after Tensor") != std::string::npos);
  CHECK(schema_error("f(Tensor a, Tensor a) -> Tensor").find("a second argument named 'a'") !=
        std::string::npos);
  CHECK(schema_error("f(int a=1, int b) -> Tensor").find("'b' without a default after one with a default") !=
        std::string::npos);
  CHECK(schema_error("f(*, int a, *, int b) -> Tensor").find("a second '*'") != std::string::npos);
  CHECK(schema_error("f(int a=x) -> Tensor").find("an integer default at column 9, found 'x'") !=
        std::string::npos);
  CHECK(schema_error("f(int a=1.5) -> Tensor").find("an integer default") != std::string::npos);
  CHECK(schema_error("f(float a=one) -> Tensor").find("a number default") != std::string::npos);
  CHECK(schema_error("f(bool a=1) -> Tensor").find("True or False") != std::string::npos);
  CHECK(schema_error("f(int a=None) -> Tensor").find("None is for Tensor?") != std::string::npos);
  CHECK(schema_error("f(Tensor a=None) -> Tensor").find("None is for Tensor?") != std::string::npos);
  CHECK(schema_error("f(Tensor? a=3) -> Tensor").find("a Tensor cannot have one") != std::string::npos);
  CHECK(schema_error("f(Tensor a) Tensor").find("expected '-'") != std::string::npos);
  CHECK(schema_error("f(Tensor a) -> ").find("expected return type") != std::string::npos);
  CHECK(schema_error("f(Tensor a) -> Tensor extra").find("expected end of schema") != std::string::npos);
  CHECK(schema_error("f(Tensor a").find("expected ','") != std::string::npos);
  CHECK(schema_error("f(Tensor a,) -> Tensor").find("expected argument type") != std::string::npos);
}

TEST_CASE("int[] arguments: a list of ints, held as a Shape, with no default") {
  const Schema s = parse_schema("view(Tensor self, int[] size) -> Tensor");
  REQUIRE(s.arguments.size() == 2);
  CHECK(s.arguments[1].type == ArgType::kIntList);
  CHECK(std::string(arg_type_name(s.arguments[1].type)) == "int[]");
  CHECK(schema_error("f(Tensor a, int[] b=3) -> Tensor").find("nor an int[]") != std::string::npos);
  CHECK(schema_error("f(Tensor a, int[ b) -> Tensor").find("expected ']'") != std::string::npos);
  const IValue list(Shape{2, -1});
  CHECK(list.is_int_list());
  CHECK(list.type_name() == "int[]");
  CHECK(list.repr() == "[2, -1]");
}

TEST_CASE("ScalarType arguments: required, optional with a None default, or a dtype default") {
  const Schema s = parse_schema("f(Tensor self, *, ScalarType? dtype=None, ScalarType to=bf16) -> Tensor");
  REQUIRE(s.arguments.size() == 3);
  CHECK(s.arguments[1].type == ArgType::kOptionalScalarType);
  CHECK(s.arguments[1].keyword_only);
  CHECK(s.arguments[1].default_value->is_none());
  CHECK(s.arguments[2].type == ArgType::kScalarType);
  CHECK(s.arguments[2].default_value->to_dtype() == DType::kBF16);
  CHECK(schema_error("f(ScalarType d=f8) -> Tensor").find("a dtype default (f32, f64, f16, bf16) at column 16") !=
        std::string::npos);
  CHECK(schema_error("f(ScalarType d=None) -> Tensor").find("None is for Tensor?, ScalarType? and float?") != std::string::npos);
}

TEST_CASE("float? arguments: None or a number, as rms_norm's eps") {
  const Schema s = parse_schema("f(Tensor self, float? eps=None, float? scale=0.5) -> Tensor");
  REQUIRE(s.arguments.size() == 3);
  CHECK(s.arguments[1].type == ArgType::kOptionalFloat);
  CHECK(s.arguments[1].default_value->is_none());
  CHECK(s.arguments[2].default_value->to_double() == 0.5);
  CHECK(std::string(arg_type_name(ArgType::kOptionalFloat)) == "float?");
  CHECK(schema_error("f(int? a) -> Tensor").find("'?' only after Tensor, ScalarType or float") != std::string::npos);
}

TEST_CASE("control bytes in a schema are shown escaped, and do not cut the message short") {
  // Found by fuzz/schema_fuzz.cpp: a NUL in the text ended what() before the column was named.
  const std::string text("f(int a, int b)\0\0 -> Tensor", 27);
  const std::string msg = schema_error(text);
  CHECK(msg ==
        "bad schema \"f(int a, int b)\\x00\\x00 -> Tensor\": expected '-' at column 16, found '\\x00'");
}

TEST_CASE("a '*' with no keyword-only argument after it is refused") {
  CHECK_THROWS_WITH_AS(strata::binding::parse_schema("f(Tensor self, *) -> Tensor"),
                       doctest::Contains("a keyword-only argument after '*'"), strata::Error);
  CHECK_THROWS_WITH_AS(strata::binding::parse_schema("f(*) -> Tensor"),
                       doctest::Contains("a keyword-only argument after '*'"), strata::Error);
  CHECK(strata::binding::parse_schema("f(Tensor self, *, float alpha=1) -> Tensor").arguments.back().keyword_only);
}

TEST_CASE("an alias annotation: Tensor(a!) marks the tensor an in-place op writes, and the return aliases it") {
  const Schema s = parse_schema("add_(Tensor(a!) self, Tensor other, *, float alpha=1) -> Tensor(a!)");
  CHECK(s.name == "add_");
  CHECK(s.returns == "Tensor");
  REQUIRE(s.arguments.size() == 3);
  CHECK(s.arguments[0].type == ArgType::kTensor);
  CHECK(s.arguments[0].writes);
  CHECK_FALSE(s.arguments[1].writes);
  CHECK_FALSE(parse_schema("f(Tensor(a) self) -> Tensor(a)").arguments[0].writes);  // aliases, not written
  CHECK_THROWS_WITH_AS(parse_schema("f(Tensor(a! self) -> Tensor"), doctest::Contains("expected ')'"), strata::Error);
  CHECK_THROWS_WITH_AS(parse_schema("f(Tensor(!) self) -> Tensor"), doctest::Contains("an alias set"), strata::Error);
}
