// CPU kernels: OpenBLAS for GEMM (matmul, linear, and conv2d as im2col + GEMM), plain loops the compiler
// vectorises for relu and add. f32 and f64 natively; bf16 and f16 tensors are widened to f32, computed in
// f32 and rounded back (Note [Half types on the CPU] in convert.cpp). Each kernel validates its arguments
// (lib/op_shapes.h), allocates its output, and runs inside a Library-layer zone.
#pragma once

#include <optional>
#include <string>

#include "layers/kernels/pointwise_math.h"
#include "lib/tensor.h"

namespace strata::kernels::cpu {

Tensor matmul(const Tensor& self, const Tensor& other);
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias);  // bias may be undefined
// torch.nn.functional.conv2d: stride, padding and dilation one int or (H, W); weight [K, C/groups, R, S].
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride, const Shape& padding,
              const Shape& dilation, int64_t groups);
// The unary ops of layers/kernels/pointwise_math.h (Note [Pointwise math written once]): one loop,
// instantiated in pointwise.cpp for every functor in math::UnaryMath / math::UnaryGradientMath. The named
// ones below call it, for the callers and tests that name a kernel.
template <typename Fn>
Tensor unary(const Tensor& self);
// grad * f'(x) from the saved tensor (x, or y for an op that saves its result); same shapes only.
template <typename Fn>
Tensor unary_gradient(const Tensor& grad_output, const Tensor& saved);
inline Tensor relu(const Tensor& self) { return unary<math::Relu>(self); }
Tensor add(const Tensor& self, const Tensor& other, double alpha);
inline Tensor gelu(const Tensor& self) { return unary<math::Gelu>(self); }  // exact (erf) form
// The ops of the tanh GELU (0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))), PyTorch's overloads by name:
// mul is aten::mul.Tensor, mul_scalar aten::mul.Scalar (a Python float), and so on. Same shapes only.
Tensor mul(const Tensor& self, const Tensor& other);
Tensor mul_scalar(const Tensor& self, double other);  // also AddBackward's alpha * grad
// True division (aten::div.Tensor / div.Scalar): IEEE, x / 0 = +-inf, 0 / 0 = NaN. div broadcasts as mul.
Tensor div(const Tensor& self, const Tensor& other);
Tensor div_scalar(const Tensor& self, double other);
Tensor add_scalar(const Tensor& self, double other, double alpha);  // self + alpha * other
Tensor sub(const Tensor& self, const Tensor& other, double alpha);   // self - alpha * other
Tensor sub_scalar(const Tensor& self, double other, double alpha);
inline Tensor tanh(const Tensor& self) { return unary<math::Tanh>(self); }
Tensor pow(const Tensor& self, double exponent);
// A copy converted to `dtype` (the input's own when empty): PyTorch's _to_copy, the cast Autocast calls.
Tensor to_copy(const Tensor& self, std::optional<DType> dtype);
// Reductions over dims (layers/kernels/cpu/reduce.cpp), PyTorch's sum.dim_IntList, mean.dim and mean: the
// listed dims (all for an empty list) summed in a double accumulator, the output in `dtype` when given.
Tensor sum_dim(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype);
Tensor mean_dim(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype);
Tensor mean(const Tensor& self, std::optional<DType> dtype);
// The normalization ops (layers/kernels/cpu/normalization.cpp, Note [Normalization ops] in
// layers/ops/normalization.h): softmax and log_softmax over one dim, layer_norm and rms_norm over the
// last dims (weight and bias may be undefined; rms_norm's eps None is finfo(dtype).eps).
Tensor softmax(const Tensor& self, int64_t dim);
Tensor log_softmax(const Tensor& self, int64_t dim);
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps);
Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps);
// Their gradient ops: softmax's and log_softmax's from the saved output (torch's _softmax_backward_data,
// _log_softmax_backward_data); the norms' input and weight gradients from the saved input (mean and rstd
// recomputed per row).
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
Tensor sum(const Tensor& self);                         // all elements -> a 0-dim tensor
Tensor ones_like(const Tensor& self);                   // the seed of a backward pass
Tensor expand_as(const Tensor& self, const Tensor& other);  // one element broadcast to other's shape
Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, double threshold);  // relu's
inline Tensor tanh_backward(const Tensor& grad_output, const Tensor& output) {  // grad * (1 - y^2)
  return unary_gradient<math::Tanh>(grad_output, output);
}
inline Tensor gelu_backward(const Tensor& grad_output, const Tensor& self) {
  return unary_gradient<math::Gelu>(grad_output, self);
}
Tensor bias_backward(const Tensor& grad_output);  // sum over every dim but 1: linear's and conv2d's bias
Tensor conv2d_input_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                             const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups);  // input: only its shape is read
Tensor conv2d_weight_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                             const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups);  // weight: only its shape is read

// What the environment report prints: OpenBLAS's own config string and thread count.
// Views (docs/views.md): the copy behind contiguous() and reshape, and the two gradient ops views need.
Tensor contiguous(const Tensor& self);  // self itself when contiguous (nothing allocated), else a strided copy
// dst's elements = src's (one shape, one dtype, any strides on either side): the loop behind contiguous(),
// callable into an existing destination (the benchmark times it apart from the allocation).
void strided_copy(const Tensor& dst, const Tensor& src);
// Zeros of self's shape with grad written into slice(dim, start, start + len * step, step) of it: the
// gradient of slice, narrow and select (start already wrapped into [0, size]).
Tensor slice_backward(const Tensor& grad_output, const Tensor& self, int64_t dim, int64_t start, int64_t step);
// grad_output summed down to self's shape (the dims expand added or broadcast): expand's gradient.
Tensor sum_to(const Tensor& grad_output, const Tensor& self);
// A copy of self with src written where as_strided(size, stride, storage_offset) of it lies (inplace.cpp).
Tensor as_strided_scatter(const Tensor& self, const Tensor& src, const Shape& size, const Shape& stride,
                          int64_t storage_offset);

// In-place ops (layers/kernels/cpu/inplace.cpp): self written through its strides and returned. `other`
// arrives contiguous and in self's dtype (the registration's doing); self may be any view.
Tensor relu_inplace(const Tensor& self);
Tensor add_inplace(const Tensor& self, const Tensor& other, double alpha);
Tensor mul_inplace(const Tensor& self, const Tensor& other);
Tensor mul_scalar_inplace(const Tensor& self, double other);
Tensor add_scalar_inplace(const Tensor& self, double other, double alpha);
Tensor sub_inplace(const Tensor& self, const Tensor& other, double alpha);
Tensor sub_scalar_inplace(const Tensor& self, double other, double alpha);
Tensor div_inplace(const Tensor& self, const Tensor& other);
Tensor div_scalar_inplace(const Tensor& self, double other);

std::string blas_config();
int blas_threads();
void set_blas_threads(int n);
// The pointwise loops this process runs (vectorized/loops.h): "AVX-512 + SLEEF", "AVX2 + SLEEF" or
// "portable, libm".
std::string cpu_loops();
// The width in bytes of the vectors those loops use: 64 (AVX-512), 32 (AVX2), 0 (portable). The compiled
// path's generated code calls SLEEF at the same width (Note [Vector math] in layers/compiler/codegen.cpp).
int cpu_vector_bytes();
// "" or one line: OpenBLAS runs pre-AVX kernels on a CPU with AVX2/AVX-512 (its CPU detection did not
// recognise the CPU, common in VMs), so the library row measures slower kernels than the CPU could run.
std::string blas_kernel_warning();

}  // namespace strata::kernels::cpu
