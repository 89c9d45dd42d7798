// The specs of the reductions over dims and mean.
// Part of layers/frontend/specs/specs.h (Note [An op's spec beside the frontend] in spec_format.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "layers/frontend/specs/spec_format.h"

namespace strata::frontend {

// The spec of `strata trace` reduces the last dim (dim=[-1], keepdim=False): `sum.dim_IntList 64x128`
// is [64,128] -> [64]. The CLI has no option for other dims yet.
inline SpecCall reduction_spec(const char* op, std::vector<int64_t>& d, std::string_view typed, bool last_dim) {
  view_spec_dims(op, d, 1, 4, typed);
  SpecCall c;
  const Shape s = spec_text::shape(d);
  const Shape dim = last_dim ? Shape{-1} : Shape{};
  const Shape out = op_shapes::reduce_dims(op, s, dim, false).out;
  c.args = {SpecArg::tensor(s)};
  if (last_dim) c.args.push_back(SpecArg::int_list(dim));
  c.outputs = {out};
  c.description = spec_text::bracket(s) + (last_dim ? " over dim -1 -> " : " -> ") + spec_text::bracket(out);
  c.flops = spec_text::elements(d);
  c.elements_moved = spec_text::elements(d) + double(out.numel());
  return c;
}

template <>
struct OpSpecFormat<ops::SumDim> {
  static constexpr const char* kHelp =
      "reductions (docs/python.md):\n"
      "  sum.dim_IntList shape    summed over the last dim (dim=[-1])          e.g. sum.dim_IntList 64x128\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return reduction_spec("sum.dim_IntList", d, typed, true);
  }
};

template <>
struct OpSpecFormat<ops::MeanDim> {
  static constexpr const char* kHelp =
      "  mean.dim shape           the mean over the last dim (dim=[-1])        e.g. mean.dim 64x128\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return reduction_spec("mean.dim", d, typed, true);
  }
};

template <>
struct OpSpecFormat<ops::Mean> {
  static constexpr const char* kHelp =
      "  mean N | shape           the mean of all elements -> one              e.g. mean 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return reduction_spec("mean", d, typed, false);
  }
};

}  // namespace strata::frontend
