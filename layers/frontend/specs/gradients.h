// The specs of the gradient ops (what --backward calls; each traces alone too). gelu_backward and
// tanh_backward have none here: a functor op's spec is the default one (spec_format.h).
// Part of layers/frontend/specs/specs.h (Note [An op's spec beside the frontend] in spec_format.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "layers/frontend/specs/spec_format.h"
#include "layers/frontend/specs/conv.h"

namespace strata::frontend {

// The spec of a conv2d gradient: the conv's own spec, with the gradient of its output in front.
inline SpecCall conv_backward_spec(std::vector<int64_t>& d, const ConvOptions& options, std::string_view typed,
                                   const char* what) {
  SpecCall conv = conv_spec(d, options, typed);
  SpecCall c;
  c.args = {SpecArg::tensor(conv.outputs.front()), conv.args[0], conv.args[1], conv.args[3], conv.args[4],
            conv.args[5], conv.args[6]};
  c.outputs = {what[0] == 'i' ? conv.args[0].shape : conv.args[1].shape};
  c.description = std::string(what) + " of conv2d " + conv.description;
  c.gemm_shape = conv.gemm_shape;
  // Each gradient is one GEMM of the forward's size, with no bias add.
  const Shape& out = conv.outputs.front();
  c.flops = conv.flops - double(out.dims[0]) * double(out.dims[1]) * double(out.dims[2]) * double(out.dims[3]);
  c.workspace_dims = conv.workspace_dims;
  return c;
}

template <>
struct OpSpecFormat<ops::Gemm> {
  static constexpr const char* kHelp =
      "gradient ops (what --backward calls; each traces alone too):\n"
      "  gemm MxKxN               op(A) @ op(B), transposes as flags (0 here)   e.g. gemm 3072x32x768\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    if (d.size() != 3) throw UsageError("gemm takes MxKxN, got '" + std::string(typed) + "'");
    SpecCall c;
    const Shape a{d[0], d[1]}, b{d[1], d[2]};
    c.args = {SpecArg::tensor(a), SpecArg::tensor(b), SpecArg::integer(0), SpecArg::integer(0)};
    c.outputs = {op_shapes::gemm(a, b, 0, 0)};
    c.description = spec_text::bracket(a) + " @ " + spec_text::bracket(b);
    c.gemm_shape = spec_text::dims(d, 0, 3);
    c.flops = 2.0 * spec_text::elements(d);
    return c;
  }
};

template <>
struct OpSpecFormat<ops::Sum> {
  static constexpr const char* kHelp = "  sum N | shape            all elements -> one (the seed of y.sum().backward())\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    SpecCall c = pointwise_spec(d, 1, "");
    c.outputs = {Shape{}};
    c.elements_moved = spec_text::elements(d) + 1;
    return c;
  }
};

template <>
struct OpSpecFormat<ops::OnesLike> {
  static constexpr const char* kHelp = "  ones_like N | shape      ones of self's shape (the gradient a backward pass starts from)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    SpecCall c = pointwise_spec(d, 1, "");
    c.flops = 0;
    c.elements_moved = spec_text::elements(d);  // written only
    return c;
  }
};

template <>
struct OpSpecFormat<ops::ExpandAs> {
  static constexpr const char* kHelp = "  expand_as N | shape      one element broadcast to the shape (SumBackward's call)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    SpecCall c;
    const Shape one{1}, s = spec_text::shape(d);
    c.args = {SpecArg::tensor(one), SpecArg::tensor(s)};
    c.outputs = {s};
    c.description = spec_text::bracket(one) + " -> " + spec_text::bracket(s);
    c.elements_moved = spec_text::elements(d) + 1;
    return c;
  }
};

template <>
struct OpSpecFormat<ops::SliceBackward> {
  static constexpr const char* kHelp =
      "  slice_backward shape     grad of `slice shape` written into zeros (SliceBackward's call)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("slice_backward", d, 1, 4, typed);
    if (d.back() < 2) throw UsageError("slice_backward: the last size must be at least 2, got '" + std::string(typed) + "'");
    const auto last = static_cast<int64_t>(d.size() - 1);
    SpecCall c;
    Shape grad = spec_text::shape(d);
    grad[static_cast<int>(last)] = d.back() / 2;
    c.args = {SpecArg::tensor(grad), SpecArg::tensor(spec_text::shape(d)), SpecArg::integer(last), SpecArg::integer(1),
              SpecArg::integer(2)};
    c.outputs = {spec_text::shape(d)};
    c.description = spec_text::bracket(grad) + " into zeros " + spec_text::bracket(spec_text::shape(d));
    c.elements_moved = spec_text::elements(d) + double(grad.numel());
    return c;
  }
};

template <>
struct OpSpecFormat<ops::SumTo> {
  static constexpr const char* kHelp =
      "  sum_to shape             summed over dim 0 to [1,...] (ExpandBackward's call)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("sum_to", d, 1, 4, typed);
    std::vector<int64_t> small = d;
    small[0] = 1;
    SpecCall c;
    c.args = {SpecArg::tensor(spec_text::shape(d)), SpecArg::tensor(spec_text::shape(small))};
    c.outputs = {spec_text::shape(small)};
    c.description = spec_text::bracket(spec_text::shape(d)) + " -> " + spec_text::bracket(spec_text::shape(small));
    c.flops = spec_text::elements(d);
    c.elements_moved = spec_text::elements(d) + spec_text::elements(small);
    return c;
  }
};

template <>
struct OpSpecFormat<ops::AsStridedScatter> {
  static constexpr const char* kHelp =
      "  as_strided_scatter shape every other element of the last dim written (CopySlices' call)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    view_spec_dims("as_strided_scatter", d, 1, 4, typed);
    if (d.back() < 2) {
      throw UsageError("as_strided_scatter: the last size must be at least 2, got '" + std::string(typed) + "'");
    }
    // The region x[..., 1::2] of a contiguous self: self's strides, the last one doubled, offset 1.
    const Shape self = spec_text::shape(d);
    Shape size = self, stride = self;
    int64_t step = 1;
    for (int i = self.ndim - 1; i >= 0; --i) {
      stride[i] = step;
      step *= self[i];
    }
    size[self.ndim - 1] = d.back() / 2;
    stride[self.ndim - 1] = 2;
    SpecCall c;
    c.args = {SpecArg::tensor(self), SpecArg::tensor(size), SpecArg::int_list(size), SpecArg::int_list(stride),
              SpecArg::integer(1)};
    c.outputs = {self};
    c.description = spec_text::bracket(size) + " into " + spec_text::bracket(self) + " at [..., 1::2]";
    c.elements_moved = 2 * spec_text::elements(d) + double(size.numel());
    return c;
  }
};

template <>
struct OpSpecFormat<ops::ThresholdBackward> {
  static constexpr const char* kHelp = "  threshold_backward N     grad where self > 0, else 0 (ReluBackward's call)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, ", ");  // threshold keeps its default, 0
  }
};

template <>
struct OpSpecFormat<ops::BiasBackward> {
  static constexpr const char* kHelp =
      "  bias_backward BxC | NxCxHxW   sum over all dims but C (linear's and conv's bias gradient)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    if (d.size() != 2 && d.size() != 4)
      throw UsageError("bias_backward takes BxC or NxCxHxW, got '" + std::string(typed) + "'");
    SpecCall c = pointwise_spec(d, 1, "");
    c.outputs = {op_shapes::bias_backward(spec_text::shape(d))};
    c.elements_moved = spec_text::elements(d) + double(d[1]);
    return c;
  }
};

template <>
struct OpSpecFormat<ops::Conv2dInputBackward> {
  static constexpr const char* kHelp =
      "  conv2d_input_backward NxCxHxW    the input gradient of `conv NxCxHxW` (same options)\n";
  static constexpr bool kReadsConvOptions = true;
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions& conv, std::string_view typed) {
    return conv_backward_spec(d, conv, typed, "input gradient");
  }
};

template <>
struct OpSpecFormat<ops::Conv2dWeightBackward> {
  static constexpr const char* kHelp =
      "  conv2d_weight_backward NxCxHxW   the weight gradient of `conv NxCxHxW` (same options)\n";
  static constexpr bool kReadsConvOptions = true;
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions& conv, std::string_view typed) {
    return conv_backward_spec(d, conv, typed, "weight gradient");
  }
};

}  // namespace strata::frontend
