// The normalization ops the model fusions need: softmax and log_softmax over a dim, layer_norm and
// rms_norm over the last dims, and their gradient ops.
// Part of layers/ops/operators.h (Note [One declaration per operator]): included there, after the
// declaration machinery and in the order the list there gives; not a header to include on its own.
#pragma once

#include <cmath>

namespace strata::ops {

// Note [Normalization ops]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// torch.softmax / log_softmax (aten::softmax.int without its dtype=, aten::log_softmax.int),
// torch.nn.functional.layer_norm and rms_norm, with torch's shape rules (lib/op_shapes.h: rows_around,
// norm_rows): a dim out of range is an IndexRangeError; a normalized_shape that is not the input's last
// dims, or a weight or bias of another shape, a UsageError naming both shapes. softmax subtracts each row's
// max before exp, so huge logits do not overflow; a row of -inf (or one holding NaN or +inf) gives NaN,
// as torch's. eps = 0 is allowed: a constant row then divides 0 by 0 (NaN), as torch does.
//
// Gradients. softmax and log_softmax save their output (torch's SoftmaxBackward0 / LogSoftmaxBackward0)
// and call _softmax_backward_data / _log_softmax_backward_data (torch's names; without torch's input_dtype
// argument, which strata's ops do not need: the output has the input's dtype). torch's native_layer_norm
// returns the rows' mean and rstd as two more outputs and native_layer_norm_backward returns the three
// gradients at once; a strata op returns one tensor, so LayerNormBackward saves the input and weight and
// calls one gradient op per gradient: layer_norm_input_backward and layer_norm_weight_backward recompute
// each row's mean and rstd (a pass over the row more than torch's), and the bias's gradient is a
// sum.dim_IntList over the leading dims. rms_norm likewise (rms_norm_input_backward,
// rms_norm_weight_backward). The gradient ops' kernels take eps resolved (rms_norm's None is
// finfo(dtype).eps, op_shapes::rms_norm_eps).
//
// Autocast: no policy yet, so the key falls through. torch autocasts softmax, log_softmax and layer_norm
// to f32 on CUDA (its fp32 list) and leaves them alone on the CPU; strata's Autocast key has one
// lower-precision policy for both devices and no fp32 one (docs/autocast.md).

struct Softmax {
  static constexpr const char* kName = "softmax";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "softmax(Tensor self, int dim) -> Tensor";
  static constexpr const char* kTorchName = "torch.softmax";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, int64_t dim);
  static constexpr KernelDecl kCpu{&kernels::cpu::softmax, "layers/kernels/cpu/normalization.cpp (row loop, f64 sum)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::softmax, "layers/kernels/cuda/normalization.cu (strata's own kernel, a block per row)"};
  static constexpr auto kReference = &reference::softmax;
  static constexpr auto kReferenceBackward = &reference::softmax_backward_of;  // float64 gradients
  static constexpr BackwardDecl kBackward{"SoftmaxBackward", 0, /*saves_result=*/true};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<Softmax> softmax{};  // NOLINT(readability-identifier-naming): called like a function

struct LogSoftmax {
  static constexpr const char* kName = "log_softmax";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "log_softmax(Tensor self, int dim) -> Tensor";
  static constexpr const char* kTorchName = "torch.log_softmax";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& self, int64_t dim);
  static constexpr KernelDecl kCpu{&kernels::cpu::log_softmax, "layers/kernels/cpu/normalization.cpp (row loop, f64 sum)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::log_softmax, "layers/kernels/cuda/normalization.cu (strata's own kernel, a block per row)"};
  static constexpr auto kReference = &reference::log_softmax;
  static constexpr auto kReferenceBackward = &reference::log_softmax_backward_of;  // float64 gradients
  static constexpr BackwardDecl kBackward{"LogSoftmaxBackward", 0, /*saves_result=*/true};
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<LogSoftmax> log_softmax{};  // NOLINT(readability-identifier-naming)

struct LayerNorm {
  static constexpr const char* kName = "layer_norm";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor";
  static constexpr const char* kTorchName = "torch.nn.functional.layer_norm";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                           double eps);
  static constexpr KernelDecl kCpu{&kernels::cpu::layer_norm, "layers/kernels/cpu/normalization.cpp (row loop, f64 statistics)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::layer_norm, "layers/kernels/cuda/normalization.cu (strata's own kernel, a block per row)"};
  static constexpr auto kReference = &reference::layer_norm;
  static constexpr auto kReferenceBackward = &reference::layer_norm_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"NativeLayerNormBackward", 0b101};  // input and weight
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<LayerNorm> layer_norm{};  // NOLINT(readability-identifier-naming)

struct RmsNorm {
  static constexpr const char* kName = "rms_norm";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor";
  static constexpr const char* kTorchName = "torch.nn.functional.rms_norm";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                           std::optional<double> eps);
  static constexpr KernelDecl kCpu{&kernels::cpu::rms_norm, "layers/kernels/cpu/normalization.cpp (row loop, f64 statistics)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::rms_norm, "layers/kernels/cuda/normalization.cu (strata's own kernel, a block per row)"};
  static constexpr auto kReference = &reference::rms_norm;
  static constexpr auto kReferenceBackward = &reference::rms_norm_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"RmsNormBackward", 0b101};  // input and weight
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<RmsNorm> rms_norm{};  // NOLINT(readability-identifier-naming)

// ---- Their gradient ops ----------------------------------------------------------------------------------

struct SoftmaxBackwardData {
  static constexpr const char* kName = "_softmax_backward_data";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "_softmax_backward_data(Tensor grad_output, Tensor output, int dim) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& output, int64_t dim);
  static constexpr KernelDecl kCpu{&kernels::cpu::softmax_backward_data, "layers/kernels/cpu/normalization.cpp (row loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::softmax_backward_data, "layers/kernels/cuda/normalization.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::softmax_backward_data;
  static constexpr BackwardDecl kBackward{"SoftmaxBackwardDataBackward", 0};
};
inline constexpr EntryPoint<SoftmaxBackwardData> softmax_backward_data{};  // NOLINT(readability-identifier-naming)

struct LogSoftmaxBackwardData {
  static constexpr const char* kName = "_log_softmax_backward_data";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& output, int64_t dim);
  static constexpr KernelDecl kCpu{&kernels::cpu::log_softmax_backward_data, "layers/kernels/cpu/normalization.cpp (row loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::log_softmax_backward_data, "layers/kernels/cuda/normalization.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::log_softmax_backward_data;
  static constexpr BackwardDecl kBackward{"LogSoftmaxBackwardDataBackward", 0};
};
inline constexpr EntryPoint<LogSoftmaxBackwardData> log_softmax_backward_data{};  // NOLINT(readability-identifier-naming)

struct LayerNormInputBackward {
  static constexpr const char* kName = "layer_norm_input_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "layer_norm_input_backward(Tensor grad_output, Tensor input, int[] normalized_shape, Tensor? weight=None, float eps=1e-05) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                           const Tensor& weight, double eps);
  static constexpr KernelDecl kCpu{&kernels::cpu::layer_norm_input_backward, "layers/kernels/cpu/normalization.cpp (row loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::layer_norm_input_backward, "layers/kernels/cuda/normalization.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::layer_norm_input_backward;
  static constexpr BackwardDecl kBackward{"LayerNormInputBackwardBackward", 0};
};
inline constexpr EntryPoint<LayerNormInputBackward> layer_norm_input_backward{};  // NOLINT(readability-identifier-naming)

struct LayerNormWeightBackward {
  static constexpr const char* kName = "layer_norm_weight_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "layer_norm_weight_backward(Tensor grad_output, Tensor input, int[] normalized_shape, float eps=1e-05) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape, double eps);
  static constexpr KernelDecl kCpu{&kernels::cpu::layer_norm_weight_backward, "layers/kernels/cpu/normalization.cpp (row loop, f64 accumulator)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::layer_norm_weight_backward, "layers/kernels/cuda/normalization.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::layer_norm_weight_backward;
  static constexpr BackwardDecl kBackward{"LayerNormWeightBackwardBackward", 0};
};
inline constexpr EntryPoint<LayerNormWeightBackward> layer_norm_weight_backward{};  // NOLINT(readability-identifier-naming)

struct RmsNormInputBackward {
  static constexpr const char* kName = "rms_norm_input_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "rms_norm_input_backward(Tensor grad_output, Tensor input, int[] normalized_shape, Tensor? weight=None, float eps=1e-06) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                           const Tensor& weight, double eps);
  static constexpr KernelDecl kCpu{&kernels::cpu::rms_norm_input_backward, "layers/kernels/cpu/normalization.cpp (row loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::rms_norm_input_backward, "layers/kernels/cuda/normalization.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::rms_norm_input_backward;
  static constexpr BackwardDecl kBackward{"RmsNormInputBackwardBackward", 0};
};
inline constexpr EntryPoint<RmsNormInputBackward> rms_norm_input_backward{};  // NOLINT(readability-identifier-naming)

struct RmsNormWeightBackward {
  static constexpr const char* kName = "rms_norm_weight_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "rms_norm_weight_backward(Tensor grad_output, Tensor input, int[] normalized_shape, float eps=1e-06) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape, double eps);
  static constexpr KernelDecl kCpu{&kernels::cpu::rms_norm_weight_backward, "layers/kernels/cpu/normalization.cpp (row loop, f64 accumulator)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::rms_norm_weight_backward, "layers/kernels/cuda/normalization.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::rms_norm_weight_backward;
  static constexpr BackwardDecl kBackward{"RmsNormWeightBackwardBackward", 0};
};
inline constexpr EntryPoint<RmsNormWeightBackward> rms_norm_weight_backward{};  // NOLINT(readability-identifier-naming)

inline GradList Softmax::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::softmax_backward_data(grad, node.result(), static_cast<int64_t>(node.scalar(1)));
  return g;
}

inline GradList LogSoftmax::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  g[0] = ops::log_softmax_backward_data(grad, node.result(), static_cast<int64_t>(node.scalar(1)));
  return g;
}

// The bias's gradient: the output's gradient summed over the dims before normalized_shape.
inline Tensor norm_bias_gradient(const Tensor& grad, int normalized_dims) {
  Shape lead;
  for (int i = 0; i < grad.dim() - normalized_dims; ++i) lead[lead.ndim++] = i;
  return lead.ndim == 0 ? grad : ops::sum_dim(grad, lead, false, std::nullopt);
}

inline GradList LayerNorm::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  const Shape& normalized_shape = node.int_list(1);
  const double eps = node.scalar(4);
  if (node.needs_grad(0)) g[0] = ops::layer_norm_input_backward(grad, node.input(0), normalized_shape, node.input(2), eps);
  if (node.needs_grad(2)) g[2] = ops::layer_norm_weight_backward(grad, node.input(0), normalized_shape, eps);
  if (node.needs_grad(3)) g[3] = norm_bias_gradient(grad, normalized_shape.ndim);
  return g;
}

inline GradList RmsNorm::backward(const RecordedNode& node, const Tensor& grad) {
  GradList g;
  const Shape& normalized_shape = node.int_list(1);
  // eps None was saved as NaN (record_arg): resolved as the kernel resolved it.
  const double saved = node.scalar(3);
  const double eps = op_shapes::rms_norm_eps(node.input_dtype(0), !std::isnan(saved) ? std::optional<double>(saved) : std::nullopt);
  if (node.needs_grad(0)) g[0] = ops::rms_norm_input_backward(grad, node.input(0), normalized_shape, node.input(2), eps);
  if (node.needs_grad(2)) g[2] = ops::rms_norm_weight_backward(grad, node.input(0), normalized_shape, eps);
  return g;
}

// The normalization ops in `strata ops` order: they follow the in-place ops in AllOps.
using NormalizationOps = OpList<Softmax, LogSoftmax, LayerNorm, RmsNorm, SoftmaxBackwardData, LogSoftmaxBackwardData,
                                LayerNormInputBackward, LayerNormWeightBackward, RmsNormInputBackward,
                                RmsNormWeightBackward>;

}  // namespace strata::ops
