// The CUDA backend: cuBLAS for matmul (cublasGemmEx) and linear (cuBLASLt with a bias epilogue), cuDNN for
// conv2d (algorithm picked by cuDNN's own timed search, once per shape), strata's own CUDA kernels for
// relu, add, the conv bias, the in-place ops and the reductions. f32, f64, f16 and bf16; f16/bf16 GEMMs and convs run on tensor cores with
// f32 accumulation. Same signatures as layers/kernels/cpu/cpu_kernels.h. Every kernel validates its
// arguments (lib/op_shapes.h), allocates its output from the caching allocator, and queues its work on
// strata's stream of the tensors' device; host work sits in Library-layer zones named after the call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "layers/kernels/cuda/gemm_candidates.h"
#include "layers/kernels/pointwise_math.h"
#include "lib/tensor.h"

namespace strata::kernels::cuda {

Tensor matmul(const Tensor& self, const Tensor& other);
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias);  // bias may be undefined
// torch.nn.functional.conv2d: stride, padding and dilation one int or (H, W); weight [K, C/groups, R, S].
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride, const Shape& padding,
              const Shape& dilation, int64_t groups);
// The unary ops of layers/kernels/pointwise_math.h (Note [Pointwise math written once]): one host side and
// one kernel, instantiated in pointwise_ops.cpp / pointwise.cu for every functor in math::UnaryMath and
// math::UnaryGradientMath. relu, gelu, tanh and their gradients below are these, by name.
template <typename Fn>
Tensor unary(const Tensor& self);
template <typename Fn>
Tensor unary_gradient(const Tensor& grad_output, const Tensor& saved);  // grad * f'(x), same shapes only
Tensor relu(const Tensor& self);
Tensor add(const Tensor& self, const Tensor& other, double alpha);
Tensor gelu(const Tensor& self);  // exact (erf) form, strata's own kernel
// The ops of the tanh GELU (0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))), PyTorch's overloads by name:
// mul is aten::mul.Tensor, mul_scalar aten::mul.Scalar (a Python float), and so on. Same shapes only.
Tensor mul(const Tensor& self, const Tensor& other);
Tensor mul_scalar(const Tensor& self, double other);  // also AddBackward's alpha * grad
// True division (aten::div.Tensor / div.Scalar): IEEE, x / 0 = +-inf, 0 / 0 = NaN. Same shapes only.
Tensor div(const Tensor& self, const Tensor& other);
Tensor div_scalar(const Tensor& self, double other);
Tensor add_scalar(const Tensor& self, double other, double alpha);  // self + alpha * other
Tensor sub(const Tensor& self, const Tensor& other, double alpha);   // self - alpha * other
Tensor sub_scalar(const Tensor& self, double other, double alpha);
Tensor tanh(const Tensor& self);
Tensor pow(const Tensor& self, double exponent);
// The in-place ops (Note [In-place operators] in layers/ops/inplace.h): self written through its strides
// and returned; other is broadcast to self's shape (never growing it) and read through its strides. A self
// that names one location twice (an expanded view) is refused: the GPU's writes would race. The version
// bump is the registration's. strata's own kernels (inplace_reduce.cu).
Tensor relu_inplace(const Tensor& self);
Tensor add_inplace(const Tensor& self, const Tensor& other, double alpha);  // self += alpha * other
Tensor mul_inplace(const Tensor& self, const Tensor& other);
Tensor mul_scalar_inplace(const Tensor& self, double other);
Tensor add_scalar_inplace(const Tensor& self, double other, double alpha);  // self += alpha * other
Tensor sub_inplace(const Tensor& self, const Tensor& other, double alpha);         // self += -alpha * other
Tensor sub_scalar_inplace(const Tensor& self, double other, double alpha);
Tensor div_inplace(const Tensor& self, const Tensor& other);
Tensor div_scalar_inplace(const Tensor& self, double other);
// The reductions over dims (Note [Reductions over dims] in layers/ops/reductions.h) of a contiguous self,
// accumulated in double across many blocks (Note [CUDA reductions over dims] in reduce_plan.h).
Tensor sum_dim(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype);
Tensor mean_dim(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype);
Tensor mean(const Tensor& self, std::optional<DType> dtype);
// A copy converted to `dtype` (the input's own when empty): the cast Autocast calls; strata's own kernel.
Tensor to_copy(const Tensor& self, std::optional<DType> dtype);
// The normalization ops and their gradient ops (Note [Normalization ops] in layers/ops/normalization.h):
// strata's own kernels (normalization.cu), a block per row, sums in the f32 or f64 accumulator of the
// dtype (Math<T>::Acc) reduced over the block's threads.
Tensor softmax(const Tensor& self, int64_t dim);
Tensor log_softmax(const Tensor& self, int64_t dim);
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps);
Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps);
Tensor softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim);
Tensor log_softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim);
Tensor layer_norm_input_backward(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                                 const Tensor& weight, double eps);
Tensor layer_norm_weight_backward(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                                  double eps);
Tensor rms_norm_input_backward(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                               const Tensor& weight, double eps);
Tensor rms_norm_weight_backward(const Tensor& grad_output, const Tensor& input, const Shape& normalized_shape,
                                double eps);

// ---- Gradient ops: what the backward formulas (layers/ops/operators.h) call -------------------------
// op(self) @ op(other), op = transpose where the flag is 1 (cblas_?gemm's Trans flags): MmBackward's and
// AddmmBackward's products without materialising a transpose.
Tensor gemm(const Tensor& self, const Tensor& other, int64_t transpose_self, int64_t transpose_other);
Tensor contiguous(const Tensor& self);  // self when contiguous, else a strided copy (strata's own kernel)
Tensor sum(const Tensor& self);                         // all elements -> a 0-dim tensor
Tensor ones_like(const Tensor& self);                   // the seed of a backward pass
Tensor expand_as(const Tensor& self, const Tensor& other);  // one element broadcast to other's shape
Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, double threshold);  // relu's
Tensor tanh_backward(const Tensor& grad_output, const Tensor& output);  // grad * (1 - y^2)
Tensor gelu_backward(const Tensor& grad_output, const Tensor& self);
Tensor bias_backward(const Tensor& grad_output);  // sum over every dim but 1: linear's and conv2d's bias
Tensor conv2d_input_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                             const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups);  // input: only its shape is read
Tensor conv2d_weight_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                             const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups);  // weight: only its shape is read

// f32 matmul / linear / conv2d on TF32 tensor cores (--tf32). Off by default: f32 means f32 math.
// The compiled path's GEMM with a cuBLASLt epilogue (Note [Which cuBLASLt epilogue] in
// layers/compiler/gemm_epilogue.cpp): out [M, N] = epilogue(a @ op(b) + bias), one cublasLtMatmul. a is
// [M, K]; b is [K, N], or [N, K] with b_transposed (linear's weight); bias is [N] or undefined; `epilogue`
// is a cublasLtEpilogue_t. lt_epilogue_available builds the shape's plan (the heuristic's pick, cached: the
// cold cost) and says whether cuBLASLt has a kernel; lt_matmul_epilogue runs it (throws when it has none).
// Plans are per operand alignment (Note [cuBLASLt operand alignment] in gemm_candidates.h): available
// answers for operands and an output at the caching allocator's alignment; operands that lie elsewhere
// (views at an offset) get a plan of their own, or an UnavailableError naming their alignments.
bool lt_epilogue_available(const Tensor& a, const Tensor& b, bool b_transposed, const Tensor& bias, int epilogue);
void lt_matmul_epilogue(const Tensor& a, const Tensor& b, bool b_transposed, const Tensor& bias, int epilogue,
                        Tensor& out);

void set_tf32(bool enabled);
bool tf32_enabled();

// --algos N / --algo K / --time for matmul and linear (Note [Which cuBLASLt algorithm] in gemm_candidates.h):
// set once per run by the CUDA module's session, as set_tf32. take_gemm_candidate_lists returns the
// candidate lists of the plans used since it was last called, in order, and forgets them.
void set_gemm_algo_request(const GemmAlgoRequest& request);
std::vector<GemmCandidateList> take_gemm_candidate_lists();

// What the libraries decide for a shape (cuDNN's chosen algorithm, math type, workspace and how many
// candidates it measured; whether cuBLASLt's heuristic gave linear a bias-epilogue kernel) is written
// once per plan, in the call that made it, as an AnnotationKind::kPlan annotation on the active timeline
// (Note [Annotations on the timeline]): the kernel names alone do not say which algorithm a search picked.

// The versions of the libraries these kernels call, "13.0.2" style, for the report's environment. Throws
// Error when cuBLAS cannot say (the runtime layer does not link these libraries, so it cannot answer).
struct LibraryVersions {
  std::string cublas, cublaslt, cudnn;
};
LibraryVersions library_versions();

}  // namespace strata::kernels::cuda
