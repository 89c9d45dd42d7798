// The gradient ops the backward formulas call (Note [The autograd graph]): gemm, sum, ones_like,
// expand_as, the views' slice_backward and sum_to, as_strided_scatter (CopySlices'), threshold_backward,
// gelu_backward, tanh_backward, bias_backward and conv2d's two.
// Part of layers/ops/operators.h (Note [One declaration per operator]): included there, after the
// declaration machinery and in the order the list there gives; not a header to include on its own.
#pragma once

namespace strata::ops {

// ---- Gradient ops ---------------------------------------------------------------------------------------
// What the backward formulas call (Note [The autograd graph], layers/autograd). Each is an operator like
// any other: schema, kernels on both backends, float64 reference, a spec (layers/frontend/specs) to trace
// it alone. Their own Autograd nodes have no formula: strata computes first derivatives only.

struct Gemm {
  static constexpr const char* kName = "gemm";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "gemm(Tensor self, Tensor other, int transpose_self=0, int transpose_other=0) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Tensor& other, int64_t transpose_self, int64_t transpose_other);
  static constexpr KernelDecl kCpu{&kernels::cpu::gemm, "layers/kernels/cpu/gemm.cpp (OpenBLAS gemm with Trans flags)"};
  static constexpr bool kGemmOperands = true;  // a transposed view is read as it lies (Note [Transposed GEMM operands])
  static constexpr KernelDecl kCuda{&kernels::cuda::gemm, "layers/kernels/cuda/cublas_gemm.cpp (cublasGemmEx with op flags)"};
  static constexpr bool kCudaGemmOperands = true;  // cublasGemmEx reads a transposed view with an op flag
  static constexpr auto kReference = &reference::gemm;
  static constexpr BackwardDecl kBackward{"GemmBackward", 0};
};
inline constexpr EntryPoint<Gemm> gemm{};  // NOLINT(readability-identifier-naming): called like a function

struct Sum {
  static constexpr const char* kName = "sum";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "sum(Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::sum, "layers/kernels/cpu/pointwise.cpp (loop, f64 accumulator)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::sum, "layers/kernels/cuda/pointwise.cu (strata's own reduction)"};
  static constexpr auto kReference = &reference::sum;
  static constexpr auto kReferenceBackward = &reference::sum_backward;  // float64 gradients
  static constexpr BackwardDecl kBackward{"SumBackward", 0};  // self's sizes are kept anyway
  // SumBackward: expand_as(grad, self).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
};
inline constexpr EntryPoint<Sum> sum{};  // NOLINT(readability-identifier-naming): called like a function

struct OnesLike {
  static constexpr const char* kName = "ones_like";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "ones_like(Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::ones_like, "layers/kernels/cpu/pointwise.cpp (fill loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::ones_like, "layers/kernels/cuda/pointwise.cu (strata's own fill kernel)"};
  static constexpr auto kReference = &reference::ones_like;
  static constexpr BackwardDecl kBackward{"OnesLikeBackward", 0};
};
inline constexpr EntryPoint<OnesLike> ones_like{};  // NOLINT(readability-identifier-naming): called like a function

struct ExpandAs {
  static constexpr const char* kName = "expand_as";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "expand_as(Tensor self, Tensor other) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Tensor& other);
  static constexpr KernelDecl kCpu{&kernels::cpu::expand_as, "layers/kernels/cpu/pointwise.cpp (fill loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::expand_as, "layers/kernels/cuda/pointwise.cu (strata's own fill kernel)"};
  static constexpr auto kReference = &reference::expand_as;
  static constexpr BackwardDecl kBackward{"ExpandBackward", 0};
};
inline constexpr EntryPoint<ExpandAs> expand_as{};  // NOLINT(readability-identifier-naming): called like a function


// The gradient ops of views (Note [Views through the dispatcher]).
struct SliceBackward {
  static constexpr const char* kName = "slice_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "slice_backward(Tensor grad_output, Tensor self, int dim, int start, int step=1) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& self, int64_t dim, int64_t start, int64_t step);
  static constexpr KernelDecl kCpu{&kernels::cpu::slice_backward, "layers/kernels/cpu/copy.cpp (zero fill + strided copy)"};
  static constexpr NoKernel kCuda{};
  static constexpr auto kReference = &reference::slice_backward;
  static constexpr BackwardDecl kBackward{"SliceBackwardBackward", 0};
};
inline constexpr EntryPoint<SliceBackward> slice_backward{};  // NOLINT(readability-identifier-naming)

struct SumTo {
  static constexpr const char* kName = "sum_to";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "sum_to(Tensor grad_output, Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::sum_to, "layers/kernels/cpu/copy.cpp (loop, f64 accumulator)"};
  static constexpr NoKernel kCuda{};
  static constexpr auto kReference = &reference::sum_to;
  static constexpr BackwardDecl kBackward{"SumToBackward", 0};
};
inline constexpr EntryPoint<SumTo> sum_to{};  // NOLINT(readability-identifier-naming)

// The gradient op of an in-place write through a view (Note [CopySlices] in layers/ops/copy_slices.h):
// PyTorch's as_strided_scatter, a copy of self with src written into the elements a view of self's
// sizes `size`, strides `stride` and offset `storage_offset` (in elements from self's first) addresses.
// CopySlices calls it to put the in-place op's gradient into the view's region of the base's gradient,
// and the node a view regenerates after its base's history changed (AsStridedBackward) to write the
// view's gradient into zeros. A write, not a sum: the region must address each element once.
struct AsStridedScatter {
  static constexpr const char* kName = "as_strided_scatter";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "as_strided_scatter(Tensor self, Tensor src, int[] size, int[] stride, int storage_offset=0) -> Tensor";
  using Signature = Tensor(const Tensor& self, const Tensor& src, const Shape& size, const Shape& stride,
                           int64_t storage_offset);
  static constexpr KernelDecl kCpu{&kernels::cpu::as_strided_scatter, "layers/kernels/cpu/inplace.cpp (copy + strided write)"};
  static constexpr NoKernel kCuda{};
  static constexpr auto kReference = &reference::as_strided_scatter;
  static constexpr BackwardDecl kBackward{"AsStridedScatterBackward", 0};
};
inline constexpr EntryPoint<AsStridedScatter> as_strided_scatter{};  // NOLINT(readability-identifier-naming)

struct ThresholdBackward {
  static constexpr const char* kName = "threshold_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "threshold_backward(Tensor grad_output, Tensor self, float threshold=0) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& self, double threshold);
  static constexpr KernelDecl kCpu{&kernels::cpu::threshold_backward, "layers/kernels/cpu/pointwise.cpp (vectorised loop)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::threshold_backward, "layers/kernels/cuda/pointwise.cu (strata's own kernel)"};
  static constexpr auto kReference = &reference::threshold_backward;
  static constexpr BackwardDecl kBackward{"ThresholdBackwardBackward", 0};
};
inline constexpr EntryPoint<ThresholdBackward> threshold_backward{};  // NOLINT(readability-identifier-naming)

struct GeluBackward {
  static constexpr const char* kName = "gelu_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "gelu_backward(Tensor grad_output, Tensor self) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& self);
  static constexpr KernelDecl kCpu{&kernels::cpu::gelu_backward, "layers/kernels/cpu/pointwise.cpp (gradient loop over math::Gelu)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::gelu_backward, "layers/kernels/cuda/pointwise.cu (unary_gradient_kernel<math::Gelu>)"};
  static constexpr auto kReference = &reference::gelu_backward;
  static constexpr BackwardDecl kBackward{"GeluBackwardBackward", 0};
};
inline constexpr EntryPoint<GeluBackward> gelu_backward{};  // NOLINT(readability-identifier-naming)

struct TanhBackward {
  static constexpr const char* kName = "tanh_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "tanh_backward(Tensor grad_output, Tensor output) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& output);
  static constexpr KernelDecl kCpu{&kernels::cpu::tanh_backward, "layers/kernels/cpu/pointwise.cpp (gradient loop over math::Tanh)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::tanh_backward, "layers/kernels/cuda/pointwise.cu (unary_gradient_kernel<math::Tanh>)"};
  static constexpr auto kReference = &reference::tanh_backward;
  static constexpr BackwardDecl kBackward{"TanhBackwardBackward", 0};
};
inline constexpr EntryPoint<TanhBackward> tanh_backward{};  // NOLINT(readability-identifier-naming)

struct BiasBackward {
  static constexpr const char* kName = "bias_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema = "bias_backward(Tensor grad_output) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output);
  static constexpr KernelDecl kCpu{&kernels::cpu::bias_backward, "layers/kernels/cpu/pointwise.cpp (loop, f64 accumulator)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::bias_backward, "layers/kernels/cuda/pointwise.cu (strata's own reduction)"};
  static constexpr auto kReference = &reference::bias_backward;
  static constexpr BackwardDecl kBackward{"BiasBackwardBackward", 0};
};
inline constexpr EntryPoint<BiasBackward> bias_backward{};  // NOLINT(readability-identifier-naming)

struct Conv2dInputBackward {
  static constexpr const char* kName = "conv2d_input_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "conv2d_input_backward(Tensor grad_output, Tensor input, Tensor weight, int[2] stride=1, int[2] padding=0, "
      "int[2] dilation=1, int groups=1) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& input, const Tensor& weight, const Shape& stride,
                           const Shape& padding, const Shape& dilation, int64_t groups);
  static constexpr KernelDecl kCpu{&kernels::cpu::conv2d_input_backward, "layers/kernels/cpu/conv.cpp (OpenBLAS gemm + col2im)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::conv2d_input_backward, "layers/kernels/cuda/cudnn_conv.cpp (cuDNN backward data)"};
  static constexpr auto kReference = &reference::conv2d_input_backward;
  static constexpr BackwardDecl kBackward{"ConvolutionBackwardBackward", 0};
};
inline constexpr EntryPoint<Conv2dInputBackward> conv2d_input_backward{};  // NOLINT(readability-identifier-naming)

struct Conv2dWeightBackward {
  static constexpr const char* kName = "conv2d_weight_backward";
  static constexpr std::string_view kAlias = "";
  static constexpr const char* kSchema =
      "conv2d_weight_backward(Tensor grad_output, Tensor input, Tensor weight, int[2] stride=1, int[2] padding=0, "
      "int[2] dilation=1, int groups=1) -> Tensor";
  using Signature = Tensor(const Tensor& grad_output, const Tensor& input, const Tensor& weight, const Shape& stride,
                           const Shape& padding, const Shape& dilation, int64_t groups);
  static constexpr KernelDecl kCpu{&kernels::cpu::conv2d_weight_backward, "layers/kernels/cpu/conv.cpp (im2col + OpenBLAS gemm)"};
  static constexpr KernelDecl kCuda{&kernels::cuda::conv2d_weight_backward, "layers/kernels/cuda/cudnn_conv.cpp (cuDNN backward filter)"};
  static constexpr auto kReference = &reference::conv2d_weight_backward;
  static constexpr BackwardDecl kBackward{"ConvolutionBackwardBackward", 0};
};
inline constexpr EntryPoint<Conv2dWeightBackward> conv2d_weight_backward{};  // NOLINT(readability-identifier-naming)

}  // namespace strata::ops
