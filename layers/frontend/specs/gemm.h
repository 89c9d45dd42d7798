// The specs of the GEMM-like operators: matmul and linear (gemm, their gradient op, is in gradients.h).
// Part of layers/frontend/specs/specs.h (Note [An op's spec beside the frontend] in spec_format.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "layers/frontend/specs/spec_format.h"

namespace strata::frontend {

template <>
struct OpSpecFormat<ops::Matmul> {
  static constexpr const char* kHelp = "  matmul N | MxKxN         [M,K] @ [K,N]            e.g. matmul 1024, matmul 512x1024x256\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    if (d.size() == 1) d = {d[0], d[0], d[0]};
    else if (d.size() != 3) throw UsageError("matmul takes N (square) or MxKxN, got '" + std::string(typed) + "'");
    SpecCall c;
    const Shape a{d[0], d[1]}, b{d[1], d[2]};
    c.args = {SpecArg::tensor(a), SpecArg::tensor(b)};
    c.outputs = {op_shapes::matmul(a, b)};
    c.description = spec_text::bracket(a) + " @ " + spec_text::bracket(b);
    c.gemm_shape = spec_text::dims(d, 0, 3);
    c.flops = 2.0 * spec_text::elements(d);
    return c;
  }
};

template <>
struct OpSpecFormat<ops::Linear> {
  static constexpr const char* kHelp = "  linear BxINxOUT          input [B,IN], weight [OUT,IN], bias [OUT]   e.g. linear 32x768x3072\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    if (d.size() != 3)
      throw UsageError("linear takes BxINxOUT (batch, in features, out features), got '" + std::string(typed) + "'");
    SpecCall c;
    const Shape input{d[0], d[1]}, weight{d[2], d[1]}, bias{d[2]};
    c.args = {SpecArg::tensor(input), SpecArg::tensor(weight), SpecArg::tensor(bias)};
    c.outputs = {op_shapes::linear(input, weight, &bias)};
    c.description = "input " + spec_text::bracket(input) + " weight " + spec_text::bracket(weight) + " bias " +
                    spec_text::bracket(bias);
    c.gemm_shape = spec_text::dims(d, 0, 3);
    c.flops = 2.0 * spec_text::elements(d) + double(d[0]) * double(d[2]);
    return c;
  }
};

}  // namespace strata::frontend
