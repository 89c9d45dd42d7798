// The specs of the normalization ops (Note [Normalization ops] in layers/ops/normalization.h) and their
// gradient ops: every one works over the last dim of the typed shape (softmax's dim=-1, the norms'
// normalized_shape = [last size], with a weight, and layer_norm a bias, of that size: the model's case).
// Part of layers/frontend/specs/specs.h (Note [An op's spec beside the frontend] in spec_format.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "layers/frontend/specs/spec_format.h"

namespace strata::frontend {

// `tensors` tensors of the typed shape (1 to 4 sizes), then what `rest` appends. flops: `per_element`
// operations per element (exp and log count as one, as for the pointwise ops); memory-bound.
inline SpecCall rows_spec(const char* op, std::vector<int64_t>& d, std::string_view typed, int tensors,
                          double per_element, const char* words) {
  view_spec_dims(op, d, 1, 4, typed);
  SpecCall c;
  const Shape s = spec_text::shape(d);
  for (int i = 0; i < tensors; ++i) c.args.push_back(SpecArg::tensor(s));
  c.outputs = {s};
  c.description = spec_text::bracket(s) + words;
  c.flops = per_element * spec_text::elements(d);
  c.elements_moved = double(tensors + 1) * spec_text::elements(d);
  return c;
}

// softmax and log_softmax, and their gradient ops (grad, output): over dim -1.
inline SpecCall softmax_spec(const char* op, std::vector<int64_t>& d, std::string_view typed, int tensors) {
  SpecCall c = rows_spec(op, d, typed, tensors, 4, " over dim -1");
  c.args.push_back(SpecArg::integer(-1));
  return c;
}

// The norms: normalized_shape [C] (the last size) and the weight [C] (and for layer_norm the bias) after
// the tensors; the weight gradient ops' output is [C].
inline SpecCall norm_spec(const char* op, std::vector<int64_t>& d, std::string_view typed, int tensors, int params,
                          bool weight_gradient) {
  SpecCall c = rows_spec(op, d, typed, tensors, 8, " over the last dim");
  const Shape last{d.back()};
  c.args.push_back(SpecArg::int_list(last));
  for (int i = 0; i < params; ++i) c.args.push_back(SpecArg::tensor(last));
  c.elements_moved += double(params) * double(d.back());
  if (weight_gradient) c.outputs = {last};
  return c;
}

template <>
struct OpSpecFormat<ops::Softmax> {
  static constexpr const char* kHelp =
      "normalization (docs/python.md):\n"
      "  softmax shape            over the last dim (dim=-1), max subtracted   e.g. softmax 32x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return softmax_spec("softmax", d, typed, 1);
  }
};

template <>
struct OpSpecFormat<ops::LogSoftmax> {
  static constexpr const char* kHelp =
      "  log_softmax shape        over the last dim (dim=-1)                   e.g. log_softmax 32x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return softmax_spec("log_softmax", d, typed, 1);
  }
};

template <>
struct OpSpecFormat<ops::LayerNorm> {
  static constexpr const char* kHelp =
      "  layer_norm shape         over the last dim C, weight and bias [C]     e.g. layer_norm 32x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return norm_spec("layer_norm", d, typed, 1, 2, false);
  }
};

template <>
struct OpSpecFormat<ops::RmsNorm> {
  static constexpr const char* kHelp =
      "  rms_norm shape           over the last dim C, weight [C], eps=None    e.g. rms_norm 32x1024\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return norm_spec("rms_norm", d, typed, 1, 1, false);
  }
};

template <>
struct OpSpecFormat<ops::SoftmaxBackwardData> {
  static constexpr const char* kHelp =
      "  _softmax_backward_data shape      y * (g - sum(g * y)) (SoftmaxBackward's call)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return softmax_spec("_softmax_backward_data", d, typed, 2);
  }
};

template <>
struct OpSpecFormat<ops::LogSoftmaxBackwardData> {
  static constexpr const char* kHelp =
      "  _log_softmax_backward_data shape  g - exp(y) * sum(g) (LogSoftmaxBackward's call)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return softmax_spec("_log_softmax_backward_data", d, typed, 2);
  }
};

template <>
struct OpSpecFormat<ops::LayerNormInputBackward> {
  static constexpr const char* kHelp =
      "  layer_norm_input_backward shape   the input's gradient (NativeLayerNormBackward's call)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return norm_spec("layer_norm_input_backward", d, typed, 2, 1, false);
  }
};

template <>
struct OpSpecFormat<ops::LayerNormWeightBackward> {
  static constexpr const char* kHelp =
      "  layer_norm_weight_backward shape  the weight's gradient [C] (NativeLayerNormBackward's call)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return norm_spec("layer_norm_weight_backward", d, typed, 2, 0, true);
  }
};

template <>
struct OpSpecFormat<ops::RmsNormInputBackward> {
  static constexpr const char* kHelp =
      "  rms_norm_input_backward shape     the input's gradient (RmsNormBackward's call)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return norm_spec("rms_norm_input_backward", d, typed, 2, 1, false);
  }
};

template <>
struct OpSpecFormat<ops::RmsNormWeightBackward> {
  static constexpr const char* kHelp =
      "  rms_norm_weight_backward shape    the weight's gradient [C] (RmsNormBackward's call)\n";
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    return norm_spec("rms_norm_weight_backward", d, typed, 2, 0, true);
  }
};

}  // namespace strata::frontend
