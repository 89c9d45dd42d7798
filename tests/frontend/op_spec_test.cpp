// The op spec grammar (layers/frontend/op_spec.cpp): every malformed form is a UsageError whose message
// says what was wrong and what is allowed.
#include <doctest/doctest.h>

#include <string>

#include "layers/frontend/frontend.h"
#include "layers/ops/operators.h"
#include "lib/error.h"

using namespace strata;
using namespace strata::frontend;

namespace {

std::string dims_error(std::string_view text) {
  try {
    parse_dims(text);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<accepted>";
}

std::string spec_error(std::string_view op, std::string_view dims, const ConvOptions& conv = {}) {
  try {
    parse_op_spec(op, dims, conv);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<accepted>";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("parse_dims accepts positive integers joined by x") {
  CHECK(parse_dims("1024") == std::vector<int64_t>{1024});
  CHECK(parse_dims("512x1024x256") == std::vector<int64_t>{512, 1024, 256});
  CHECK(parse_dims("1x1x1x1") == std::vector<int64_t>{1, 1, 1, 1});
  CHECK(parse_dims("2147483647") == std::vector<int64_t>{2147483647});
  CHECK(parse_dims("007") == std::vector<int64_t>{7});  // leading zeros are still a whole number
  // Binary suffixes, as sweep ranges read them (`strata trace relu 1M`).
  CHECK(parse_dims("1M") == std::vector<int64_t>{1 << 20});
  CHECK(parse_dims("4x1k") == std::vector<int64_t>{4, 1024});
  CHECK(parse_dims("2K") == std::vector<int64_t>{2048});
  CHECK(parse_dims("1G") == std::vector<int64_t>{1 << 30});
}

TEST_CASE("parse_dims: a suffix needs digits before it and keeps the BLAS limit") {
  CHECK(contains(dims_error("k"), "'k' has no digits"));
  CHECK(contains(dims_error("4xM"), "'M' has no digits"));
  CHECK(contains(dims_error("2G"), "'2G' is too large"));
  CHECK(contains(dims_error("1kk"), "the character 'k'"));
  CHECK(contains(dims_error("1m"), "the character 'm'"));  // M only: m is not a binary size
  CHECK(contains(dims_error("-1k"), "negative"));
}

TEST_CASE("parse_dims refuses every malformed size with the reason") {
  const std::string allowed = "sizes are positive integers joined by 'x'";
  CHECK(contains(dims_error(""), "missing size"));
  CHECK(contains(dims_error("1024x"), "empty field at the end"));
  CHECK(contains(dims_error("x1024"), "empty field at the start"));
  CHECK(contains(dims_error("2xx3"), "empty field"));
  CHECK(contains(dims_error("x"), "empty field"));
  CHECK(contains(dims_error("0"), "contains 0"));
  CHECK(contains(dims_error("4x0x4"), "contains 0"));
  CHECK(contains(dims_error("-5"), "negative"));
  CHECK(contains(dims_error("+5"), "sign"));
  CHECK(contains(dims_error("1e3"), "not a whole number"));
  CHECK(contains(dims_error("1.5"), "not a whole number"));
  CHECK(contains(dims_error("99999999999999999999"), "too large"));
  CHECK(contains(dims_error("2147483648"), "at most 2147483647"));
  CHECK(contains(dims_error("1x2x3x4x5"), "more than 4 fields"));
  CHECK(contains(dims_error("abc"), "the character 'a'"));
  CHECK(contains(dims_error("10 24"), "the character ' '"));
  CHECK(contains(dims_error("1024 "), "the character ' '"));
  CHECK(contains(dims_error("1,024"), "the character ','"));
  CHECK(contains(dims_error("1024X1024"), "the character 'X'"));
  CHECK(contains(dims_error(std::string_view("12\0"
                                             "3",
                                             4)),
                 "has the character '\\x00'"));
  for (const char* bad : {"abc", "-5", "1e3", "1024 ", "+5"}) {
    CAPTURE(std::string(bad));
    CHECK(contains(dims_error(bad), allowed));
  }
}

TEST_CASE("parse_op_spec: ops, aliases and the dims each takes") {
  OpSpec mm = parse_op_spec("matmul", "1024");
  CHECK(mm.op_index == ops::op_index<ops::Matmul>());
  CHECK(mm.op == "matmul");
  CHECK(mm.dims == std::vector<int64_t>{1024, 1024, 1024});  // N means N x N x N
  CHECK(mm.text == "matmul 1024");
  CHECK(parse_op_spec("mm", "2x3x4").dims == std::vector<int64_t>{2, 3, 4});
  CHECK(parse_op_spec("linear", "32x768x3072").op == "linear");
  CHECK(parse_op_spec("conv2d", "1x3x8x8").op == "conv2d");
  CHECK(parse_op_spec("relu", "1048576").dims == std::vector<int64_t>{1048576});
  CHECK(parse_op_spec("add", "4x4").dims == std::vector<int64_t>{4, 4});

  CHECK(contains(spec_error("matmul", "1x1"), "matmul takes N (square) or MxKxN"));
  CHECK(contains(spec_error("matmul", "1x2x3x4"), "matmul takes"));
  CHECK(contains(spec_error("linear", "32"), "linear takes BxINxOUT"));
  CHECK(contains(spec_error("conv", "1x3x8"), "conv takes NxCxHxW"));
  const std::string unknown = spec_error("frobnicate", "1024");
  CHECK(contains(unknown, "unknown operator 'frobnicate'; strata traces:"));  // nothing near it to suggest
  CHECK(contains(unknown, "matmul N | MxKxN"));  // the refusal lists what is accepted
  // A typo gets the nearest name (within two edits), then the same list.
  const std::string typo = spec_error("sliu", "1024");
  CHECK(contains(typo, "unknown operator 'sliu': did you mean 'silu'? strata traces:"));
  CHECK(contains(typo, "matmul N | MxKxN"));
  CHECK(contains(spec_error("Matmul", "1024"), "did you mean 'matmul'?"));
  CHECK(contains(spec_error("mmm", "1024"), "did you mean 'mm'?"));  // aliases are names too
  CHECK(contains(spec_error("", "1024"), "unknown operator ''; strata traces:"));
}

TEST_CASE("conv options: defaults and refusals") {
  OpSpec c = parse_op_spec("conv", "2x16x8x8");
  CHECK(c.conv.out_channels == 16);  // default: the input's channel count
  CHECK(c.conv.kernel == 3);
  CHECK(c.conv.stride == 1);
  CHECK(c.conv.pad == 0);

  ConvOptions o;
  o.out_channels = 0;
  CHECK(contains(spec_error("conv", "1x3x8x8", o), "--out-channels must be between 1"));
  o = {};
  o.stride = 0;
  CHECK(contains(spec_error("conv", "1x3x8x8", o), "--stride must be between 1 and 2147483647, got 0"));
  o = {};
  o.pad = -1;
  CHECK(contains(spec_error("conv", "1x3x8x8", o), "--pad must be between 0 and 2147483647, got -1"));
  o = {};
  o.kernel = 0;
  CHECK(contains(spec_error("conv", "1x3x8x8", o), "--kernel must be between 1 and 2147483647"));
  o = {};
  o.kernel = 9;
  CHECK(contains(spec_error("conv", "1x3x8x8", o), "--kernel 9 is larger than the padded input 8x8"));
  o.pad = 1;  // 8 + 2 = 10 >= 9: now it fits
  CHECK(spec_error("conv", "1x3x8x8", o) == "<accepted>");
  o = {};
  o.kernel = 5;  // H = 8 fits, W = 4 does not: the check is on both sides
  CHECK(contains(spec_error("conv", "1x3x8x4", o), "larger than the padded input 8x4"));
}

TEST_CASE("parse_device") {
  CHECK(parse_device("auto").automatic);
  CHECK(parse_device("cpu").device == kCPU);
  DeviceRequest cuda = parse_device("cuda");
  CHECK(cuda.any_cuda);
  CHECK(cuda.device.is_cuda());
  CHECK(parse_device("cuda:3").device == Device{DeviceType::kCUDA, 3});
  CHECK_FALSE(parse_device("cuda:3").any_cuda);
  for (const char* bad : {"cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda:99999"}) {
    CAPTURE(std::string(bad));
    CHECK_THROWS_AS(parse_device(bad), UsageError);
  }
  CHECK_THROWS_WITH_AS(parse_device("foo"), doctest::Contains("unknown device 'foo'"), UsageError);
  CHECK_THROWS_AS(parse_device(""), UsageError);
  CHECK_THROWS_AS(parse_device("CPU"), UsageError);
}
