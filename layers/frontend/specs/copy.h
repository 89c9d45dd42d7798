// The spec of the cast to_copy.
// Part of layers/frontend/specs/specs.h (Note [An op's spec beside the frontend] in spec_format.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "layers/frontend/specs/spec_format.h"

namespace strata::frontend {

template <>
struct OpSpecFormat<ops::ToCopy> {
  static constexpr const char* kHelp = "  to_copy N | shape        a copy (the cast Autocast calls; --dtype sets both sides)  e.g. to_copy 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 1, "");  // dtype keeps its default: a same-dtype copy
  }
};

}  // namespace strata::frontend
