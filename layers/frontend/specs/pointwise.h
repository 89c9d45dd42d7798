// The specs of the pointwise operators. gelu, silu and silu_backward have none here: a functor op's spec
// is the default one (spec_format.h).
// Part of layers/frontend/specs/specs.h (Note [An op's spec beside the frontend] in spec_format.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "layers/frontend/specs/spec_format.h"

namespace strata::frontend {

template <>
struct OpSpecFormat<ops::Relu> {
  static constexpr const char* kHelp = "  relu N | shape           N elements (or a shape like 1024x1024)   e.g. relu 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 1, "");
  }
};

template <>
struct OpSpecFormat<ops::Add> {
  static constexpr const char* kHelp = "  add N | shape            a + b, same shapes                         e.g. add 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " + ");  // alpha keeps its default, 1
  }
};

template <>
struct OpSpecFormat<ops::Mul> {
  static constexpr const char* kHelp = "  mul N | shape            a * b, same shapes                         e.g. mul 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " * ");
  }
};

template <>
struct OpSpecFormat<ops::MulScalar> {
  static constexpr const char* kHelp = "  mul.Scalar N | shape     self * other, a number (2 here)           e.g. mul.Scalar 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " * ", 2);
  }
};

template <>
struct OpSpecFormat<ops::Div> {
  static constexpr const char* kHelp = "  div N | shape            a / b, same shapes                         e.g. div 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " / ");
  }
};

template <>
struct OpSpecFormat<ops::DivScalar> {
  static constexpr const char* kHelp = "  div.Scalar N | shape     self / other, a number (2 here)           e.g. div.Scalar 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " / ", 2);
  }
};

template <>
struct OpSpecFormat<ops::AddScalar> {
  static constexpr const char* kHelp = "  add.Scalar N | shape     self + other, a number (1 here)           e.g. add.Scalar 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " + ", 1);
  }
};

template <>
struct OpSpecFormat<ops::Sub> {
  static constexpr const char* kHelp = "  sub N | shape            a - b, same shapes                         e.g. sub 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, " - ");  // alpha keeps its default, 1
  }
};

template <>
struct OpSpecFormat<ops::SubScalar> {
  static constexpr const char* kHelp = "  sub.Scalar N | shape     self - other, a number (1 here)           e.g. sub.Scalar 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " - ", 1);
  }
};

template <>
struct OpSpecFormat<ops::Tanh> {
  static constexpr const char* kHelp = "  tanh N | shape           N elements, tanh(x)                        e.g. tanh 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 1, "");  // flops: one per element, as gelu (tanh is a library call)
  }
};

template <>
struct OpSpecFormat<ops::Pow> {
  static constexpr const char* kHelp = "  pow N | shape            x ^ exponent (3 here, the tanh GELU's cube) e.g. pow 1048576\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return scalar_spec(d, " ^ ", 3);
  }
};

}  // namespace strata::frontend
