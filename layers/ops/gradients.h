// The gradient ops the backward formulas call (Note [The autograd graph]): gemm, sum, ones_like,
// expand_as, the views' slice_backward and sum_to, threshold_backward, gelu_backward, tanh_backward,
// bias_backward and conv2d's two.
// Part of layers/ops/operators.h (Note [One declaration per operator]): included there, after the
// declaration machinery and in the order the list there gives; not a header to include on its own.
#pragma once

namespace strata::ops {

// ---- Gradient ops ---------------------------------------------------------------------------------------
// What the backward formulas call (Note [The autograd graph], layers/autograd). Each is an operator like
// any other: a schema, kernels on both backends, a float64 reference, a spec so `strata trace` can trace
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
  static constexpr const char* kSpecHelp =
      "gradient ops (what --backward calls; each traces alone too):\n"
      "  gemm MxKxN               op(A) @ op(B), transposes as flags (0 here)   e.g. gemm 3072x32x768\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
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
  // Saves self for its shape only: strata's nodes save tensors, not sizes (docs/autograd.md).
  static constexpr BackwardDecl kBackward{"SumBackward", 0b1};
  // SumBackward: expand_as(grad, self).
  static GradList backward(const RecordedNode& node, const Tensor& grad);
  static constexpr const char* kSpecHelp = "  sum N | shape            all elements -> one (the seed of y.sum().backward())\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    SpecCall c = pointwise_spec(d, 1, "");
    c.outputs = {Shape{}};
    c.elements_moved = spec_text::elements(d) + 1;
    return c;
  }
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
  static constexpr const char* kSpecHelp = "  ones_like N | shape      ones of self's shape (the gradient a backward pass starts from)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    SpecCall c = pointwise_spec(d, 1, "");
    c.flops = 0;
    c.elements_moved = spec_text::elements(d);  // written only
    return c;
  }
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
  static constexpr const char* kSpecHelp = "  expand_as N | shape      one element broadcast to the shape (SumBackward's call)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    SpecCall c;
    const Shape one{1}, s = spec_text::shape(d);
    c.args = {SpecArg::tensor(one), SpecArg::tensor(s)};
    c.outputs = {s};
    c.description = spec_text::bracket(one) + " -> " + spec_text::bracket(s);
    c.elements_moved = spec_text::elements(d) + 1;
    return c;
  }
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
  static constexpr const char* kSpecHelp =
      "  slice_backward shape     grad of `slice shape` written into zeros (SliceBackward's call)\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
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
  static constexpr const char* kSpecHelp =
      "  sum_to shape             summed over dim 0 to [1,...] (ExpandBackward's call)\n";
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
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
inline constexpr EntryPoint<SumTo> sum_to{};  // NOLINT(readability-identifier-naming)

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
  static constexpr const char* kSpecHelp = "  threshold_backward N     grad where self > 0, else 0 (ReluBackward's call)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, ", ");  // threshold keeps its default, 0
  }
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
  static constexpr const char* kSpecHelp = "  gelu_backward N          grad * (Phi(x) + x phi(x)) (GeluBackward's call)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, ", ");
  }
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
  static constexpr const char* kSpecHelp = "  tanh_backward N          grad * (1 - y^2) (TanhBackward's call)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, 2, ", ");
  }
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
  static constexpr const char* kSpecHelp =
      "  bias_backward BxC | NxCxHxW   sum over all dims but C (linear's and conv's bias gradient)\n";

  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions&, std::string_view typed) {
    if (d.size() != 2 && d.size() != 4)
      throw UsageError("bias_backward takes BxC or NxCxHxW, got '" + std::string(typed) + "'");
    SpecCall c = pointwise_spec(d, 1, "");
    c.outputs = {op_shapes::bias_backward(spec_text::shape(d))};
    c.elements_moved = spec_text::elements(d) + double(d[1]);
    return c;
  }
};
inline constexpr EntryPoint<BiasBackward> bias_backward{};  // NOLINT(readability-identifier-naming)

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
  static constexpr const char* kSpecHelp =
      "  conv2d_input_backward NxCxHxW    the input gradient of `conv NxCxHxW` (same options)\n";
  static constexpr bool kReadsConvOptions = true;
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions& conv, std::string_view typed) {
    return conv_backward_spec(d, conv, typed, "input gradient");
  }
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
  static constexpr const char* kSpecHelp =
      "  conv2d_weight_backward NxCxHxW   the weight gradient of `conv NxCxHxW` (same options)\n";
  static constexpr bool kReadsConvOptions = true;
  static SpecCall spec(std::vector<int64_t>& d, const ConvOptions& conv, std::string_view typed) {
    return conv_backward_spec(d, conv, typed, "weight gradient");
  }
};
inline constexpr EntryPoint<Conv2dWeightBackward> conv2d_weight_backward{};  // NOLINT(readability-identifier-naming)

}  // namespace strata::ops
