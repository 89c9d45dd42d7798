// The specs of the views and contiguous: a view moves no data, so no FLOPs and no elements moved.
// Part of layers/frontend/specs/specs.h (Note [An op's spec beside the frontend] in spec_format.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "layers/frontend/specs/spec_format.h"

namespace strata::frontend {

// The spec of a view op ("transpose 5x7x3"): the tensor typed, the ints or int[] the op takes; a view
// moves no data, so no flops and no elements moved.
inline SpecCall view_spec(const std::vector<int64_t>& d, std::vector<SpecArg> extra, const Shape& out,
                          const std::string& what) {
  SpecCall c;
  const Shape s = spec_text::shape(d);
  c.args = {SpecArg::tensor(s)};
  for (SpecArg& a : extra) c.args.push_back(a);
  c.outputs = {out};
  c.output_is_view = true;
  c.description = spec_text::bracket(s) + " " + what + " -> " + spec_text::bracket(out);
  return c;
}
inline std::string int_list_text(const Shape& s) {
  std::string out = "(";
  for (int i = 0; i < s.ndim; ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

// The spec of view and reshape: the last two sizes merged, given as -1 (inferred).
inline SpecCall merge_spec(const char* op, std::vector<int64_t>& d, std::string_view typed) {
  view_spec_dims(op, d, 1, 4, typed);
  Shape size, out;
  if (d.size() == 1) {
    size = Shape{1, -1};
    out = Shape{1, d[0]};
  } else {
    for (size_t i = 0; i + 2 < d.size(); ++i) size[size.ndim++] = d[i];
    out = size;
    size[size.ndim++] = -1;
    out[out.ndim++] = d[d.size() - 2] * d[d.size() - 1];
  }
  SpecCall c = view_spec(d, {SpecArg::int_list(size)}, out, std::string(op) + int_list_text(size));
  c.output_is_view = std::string_view(op) == "view";  // reshape copies a strided input (--view's)
  return c;
}

template <>
struct OpSpecFormat<ops::Transpose> {
  static constexpr const char* kHelp =
      "views (no data moved; docs/views.md):\n"
      "  transpose shape          dims 0 and last swapped                    e.g. transpose 1024x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("transpose", d, 2, 4, typed);
    const auto last = static_cast<int64_t>(d.size() - 1);
    Shape out = spec_text::shape(d);
    std::swap(out[0], out[static_cast<int>(last)]);
    return view_spec(d, {SpecArg::integer(0), SpecArg::integer(last)}, out, "transpose(0, " + std::to_string(last) + ")");
  }
};

template <>
struct OpSpecFormat<ops::TransposeMatrix> {
  static constexpr const char* kHelp = "  t N | MxN                the matrix transposed ([N,N] for N)         e.g. t 1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    if (d.size() == 1) d = {d[0], d[0]};
    view_spec_dims("t", d, 2, 2, typed);
    return view_spec(d, {}, Shape{d[1], d[0]}, "t()");
  }
};

template <>
struct OpSpecFormat<ops::Permute> {
  static constexpr const char* kHelp = "  permute shape            dims reversed                              e.g. permute 32x64x56x56\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("permute", d, 1, 4, typed);
    Shape dims, out;
    for (size_t i = d.size(); i-- > 0;) {
      dims[dims.ndim++] = static_cast<int64_t>(i);
      out[out.ndim++] = d[i];
    }
    return view_spec(d, {SpecArg::int_list(dims)}, out, "permute" + int_list_text(dims));
  }
};

template <>
struct OpSpecFormat<ops::View> {
  static constexpr const char* kHelp = "  view shape               the last two dims merged (-1)              e.g. view 64x1024x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) { return merge_spec("view", d, typed); }
};

template <>
struct OpSpecFormat<ops::Reshape> {
  static constexpr const char* kHelp = "  reshape shape            as view; copies when the strides need it   e.g. reshape 64x1024x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) { return merge_spec("reshape", d, typed); }
};

template <>
struct OpSpecFormat<ops::Expand> {
  static constexpr const char* kHelp = "  expand shape             [1,...] expanded to the shape (last as -1)  e.g. expand 1024x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("expand", d, 1, 4, typed);
    std::vector<int64_t> in = d;
    in[0] = 1;
    Shape size = spec_text::shape(d);
    if (d.size() > 1) size[size.ndim - 1] = -1;
    return view_spec(in, {SpecArg::int_list(size)}, spec_text::shape(d), "expand" + int_list_text(size));
  }
};

template <>
struct OpSpecFormat<ops::Narrow> {
  static constexpr const char* kHelp = "  narrow shape             the last dim from 1, two fewer             e.g. narrow 1024x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("narrow", d, 1, 4, typed);
    if (d.back() < 3) throw UsageError("narrow: the last size must be at least 3, got '" + std::string(typed) + "'");
    const auto last = static_cast<int64_t>(d.size() - 1);
    Shape out = spec_text::shape(d);
    out[static_cast<int>(last)] -= 2;
    return view_spec(d, {SpecArg::integer(last), SpecArg::integer(1), SpecArg::integer(d.back() - 2)}, out,
                     "narrow(" + std::to_string(last) + ", 1, " + std::to_string(d.back() - 2) + ")");
  }
};

template <>
struct OpSpecFormat<ops::Select> {
  static constexpr const char* kHelp = "  select shape             index -1 of the last dim                   e.g. select 1024x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("select", d, 1, 4, typed);
    const auto last = static_cast<int64_t>(d.size() - 1);
    Shape out;
    for (size_t i = 0; i + 1 < d.size(); ++i) out[out.ndim++] = d[i];
    return view_spec(d, {SpecArg::integer(last), SpecArg::integer(-1)}, out, "select(" + std::to_string(last) + ", -1)");
  }
};

template <>
struct OpSpecFormat<ops::Slice> {
  static constexpr const char* kHelp = "  slice shape              the last dim [1::2] (every second, from 1)  e.g. slice 1024x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("slice", d, 1, 4, typed);
    if (d.back() < 2) throw UsageError("slice: the last size must be at least 2, got '" + std::string(typed) + "'");
    const auto last = static_cast<int64_t>(d.size() - 1);
    Shape out = spec_text::shape(d);
    out[static_cast<int>(last)] = d.back() / 2;
    return view_spec(d, {SpecArg::integer(last), SpecArg::integer(1), SpecArg::integer(d.back()), SpecArg::integer(2)},
                     out, "slice(" + std::to_string(last) + ", 1, " + std::to_string(d.back()) + ", 2)");
  }
};

template <>
struct OpSpecFormat<ops::Unsqueeze> {
  static constexpr const char* kHelp = "  unsqueeze shape          a dim of size 1 at 1 (at most 3 sizes)     e.g. unsqueeze 1024x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("unsqueeze", d, 1, 3, typed);
    std::vector<int64_t> out = d;
    out.insert(out.begin() + 1, 1);
    return view_spec(d, {SpecArg::integer(1)}, spec_text::shape(out), "unsqueeze(1)");
  }
};

template <>
struct OpSpecFormat<ops::Squeeze> {
  static constexpr const char* kHelp = "  squeeze shape            [a,1,b...] squeezed at 1 (at most 3 sizes)  e.g. squeeze 1024x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("squeeze", d, 1, 3, typed);
    std::vector<int64_t> in = d;
    in.insert(in.begin() + 1, 1);
    return view_spec(in, {SpecArg::integer(1)}, spec_text::shape(d), "squeeze(1)");
  }
};

template <>
struct OpSpecFormat<ops::Contiguous> {
  static constexpr const char* kHelp = "  contiguous N | shape     the tensor itself: the spec's input is contiguous (copies: docs/views.md)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    SpecCall c = pointwise_spec(d, 1, "");
    c.flops = 0;
    c.elements_moved = 0;  // a contiguous input: nothing is copied
    return c;
  }
};

}  // namespace strata::frontend
