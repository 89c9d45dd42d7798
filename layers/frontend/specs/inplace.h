// The specs of the in-place operators (Note [In-place operators] in layers/ops/inplace.h).
// Part of layers/frontend/specs/specs.h (Note [An op's spec beside the frontend] in spec_format.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "layers/frontend/specs/spec_format.h"

namespace strata::frontend {

template <>
struct OpSpecFormat<ops::ReluInPlace> {
  static constexpr const char* kHelp = "  relu_ N | shape          relu in place on self                     e.g. relu_ 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 1, "");
  }
};

template <>
struct OpSpecFormat<ops::AddInPlace> {
  static constexpr const char* kHelp = "  add_ N | shape           self += other, same shapes                e.g. add_ 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " += ");
  }
};

template <>
struct OpSpecFormat<ops::MulInPlace> {
  static constexpr const char* kHelp = "  mul_ N | shape           self *= other, same shapes                e.g. mul_ 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " *= ");
  }
};

template <>
struct OpSpecFormat<ops::MulScalarInPlace> {
  // -1: every timed call flips the signs, so thousands of calls neither overflow nor drift to zero.
  static constexpr const char* kHelp = "  mul_.Scalar N | shape    self *= other, a number (-1 here)         e.g. mul_.Scalar 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " *= ", -1);
  }
};

template <>
struct OpSpecFormat<ops::AddScalarInPlace> {
  static constexpr const char* kHelp = "  add_.Scalar N | shape    self += other, a number (1 here)          e.g. add_.Scalar 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " += ", 1);
  }
};

template <>
struct OpSpecFormat<ops::SubInPlace> {
  static constexpr const char* kHelp = "  sub_ N | shape           self -= other, same shapes                e.g. sub_ 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " -= ");
  }
};

template <>
struct OpSpecFormat<ops::SubScalarInPlace> {
  static constexpr const char* kHelp = "  sub_.Scalar N | shape    self -= other, a number (1 here)          e.g. sub_.Scalar 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " -= ", 1);
  }
};

template <>
struct OpSpecFormat<ops::DivInPlace> {
  static constexpr const char* kHelp = "  div_ N | shape           self /= other, same shapes                e.g. div_ 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " /= ");
  }
};

template <>
struct OpSpecFormat<ops::DivScalarInPlace> {
  // -1, as mul_.Scalar's: every timed call flips the signs, so thousands of calls neither overflow nor
  // drift to zero.
  static constexpr const char* kHelp = "  div_.Scalar N | shape    self /= other, a number (-1 here)         e.g. div_.Scalar 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " /= ", -1);
  }
};

}  // namespace strata::frontend
