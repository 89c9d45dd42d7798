// conv2d. Its gradient ops are in gradients.h; its spec, the options only it reads, in layers/frontend/specs/conv.h.
// Part of layers/ops/operators.h (Note [One declaration per operator]): included there, after the
// declaration machinery and in the order the list there gives; not a header to include on its own.
#pragma once

namespace strata::ops {

struct Conv2d {
  static constexpr const char* kName = "conv2d";
  static constexpr std::string_view kAlias = "conv";
  static constexpr const char* kSchema =
      "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, int[2] dilation=1, "
      "int groups=1) -> Tensor";
  static constexpr const char* kTorchName = "torch.nn.functional.conv2d";  // the --peer torch counterpart
  using Signature = Tensor(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
                           const Shape& padding, const Shape& dilation, int64_t groups);
  static constexpr KernelDecl kCpu{&kernels::cpu::conv2d, "layers/kernels/cpu/conv.cpp (im2col + OpenBLAS gemm)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::conv2d, "layers/kernels/cuda/cudnn_conv.cpp (cuDNN)"};
  static constexpr auto kReference = &reference::conv2d;
  static constexpr auto kReferenceBackward = &reference::conv2d_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"ConvolutionBackward", 0b11};
  // ConvolutionBackward: conv2d_input_backward, conv2d_weight_backward, bias_backward (defined below AllOps: it calls other operators).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr AutocastPolicy kAutocast = AutocastPolicy::kLowerPrecision;
};
inline constexpr EntryPoint<Conv2d> conv2d{};  // NOLINT(readability-identifier-naming): called like a function


}  // namespace strata::ops
