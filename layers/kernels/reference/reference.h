// The float64 reference every kernel path is checked against (tests and `--check`): naive loops in
// double precision over host copies of the inputs, deliberately sharing no code with any backend
// (no BLAS, no im2col), so that a bug in a backend cannot hide in its own reference.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lib/tensor.h"

namespace strata::reference {

// Host copy of any tensor's values as doubles (f16/bf16 decoded bit-exactly).
std::vector<double> to_double(const Tensor& t);

std::vector<double> matmul(const Tensor& self, const Tensor& other);
std::vector<double> linear(const Tensor& input, const Tensor& weight, const Tensor& bias);
std::vector<double> conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
                           const Shape& padding, const Shape& dilation, int64_t groups);
std::vector<double> relu(const Tensor& self);
std::vector<double> add(const Tensor& self, const Tensor& other, double alpha);
// x * Phi(x) with the exact normal CDF (PyTorch's gelu with approximate='none').
std::vector<double> gelu(const Tensor& self);
// x * sigmoid(x) (PyTorch's silu).
std::vector<double> silu(const Tensor& self);
// 1 / (1 + exp(-x)) (torch.sigmoid).
std::vector<double> sigmoid(const Tensor& self);
// The tanh GELU's ops (layers/ops/operators.h: mul, mul.Scalar, add.Scalar, sub, sub.Scalar, tanh, pow).
std::vector<double> mul(const Tensor& self, const Tensor& other);
std::vector<double> mul_scalar(const Tensor& self, double other);
// True division in double (IEEE: x / 0 = +-inf, 0 / 0 = NaN).
std::vector<double> div(const Tensor& self, const Tensor& other);
std::vector<double> div_scalar(const Tensor& self, double other);
std::vector<double> add_scalar(const Tensor& self, double other, double alpha);
std::vector<double> sub(const Tensor& self, const Tensor& other, double alpha);
std::vector<double> sub_scalar(const Tensor& self, double other, double alpha);
std::vector<double> tanh(const Tensor& self);
std::vector<double> pow(const Tensor& self, double exponent);
// The input's values: what a cast should give before its own rounding (the tolerance of the target dtype
// bounds that rounding).
std::vector<double> to_copy(const Tensor& self, std::optional<DType> dtype);
// Reductions over dims (PyTorch's sum.dim_IntList, mean.dim, mean): the dims listed (all for an empty list).
std::vector<double> sum_dim(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype);
std::vector<double> mean_dim(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype);
std::vector<double> mean(const Tensor& self, std::optional<DType> dtype);

// The gradient ops (layers/ops/operators.h), the same naive way: each loop is the definition.
std::vector<double> gemm(const Tensor& self, const Tensor& other, int64_t transpose_self, int64_t transpose_other);
std::vector<double> sum(const Tensor& self);
std::vector<double> ones_like(const Tensor& self);
std::vector<double> expand_as(const Tensor& self, const Tensor& other);
std::vector<double> threshold_backward(const Tensor& grad_output, const Tensor& self, double threshold);
std::vector<double> tanh_backward(const Tensor& grad_output, const Tensor& output);
std::vector<double> gelu_backward(const Tensor& grad_output, const Tensor& self);
std::vector<double> silu_backward(const Tensor& grad_output, const Tensor& self);
std::vector<double> sigmoid_backward(const Tensor& grad_output, const Tensor& output);  // grad * y * (1 - y)
std::vector<double> bias_backward(const Tensor& grad_output);
std::vector<double> conv2d_input_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                          const Shape& stride, const Shape& padding, const Shape& dilation,
                                          int64_t groups);
std::vector<double> conv2d_weight_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                           const Shape& stride, const Shape& padding, const Shape& dilation,
                                           int64_t groups);

// Gradients of the differentiable ops: given the gradient of the output (`grad`), the gradient of every
// argument, by argument position (empty for an int, or an absent bias). What the autograd tests and
// `trace --backward --check` compare the engine's results with; the tests check these in turn against
// central finite differences of the forward references above, so no formula is trusted on its own word.
using Grads = std::vector<std::vector<double>>;
Grads matmul_backward(const Tensor& grad, const Tensor& self, const Tensor& other);
Grads linear_backward(const Tensor& grad, const Tensor& input, const Tensor& weight, const Tensor& bias);
Grads conv2d_backward(const Tensor& grad, const Tensor& input, const Tensor& weight, const Tensor& bias,
                      const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups);
Grads relu_backward(const Tensor& grad, const Tensor& self);
Grads add_backward(const Tensor& grad, const Tensor& self, const Tensor& other, double alpha);
Grads gelu_backward_of(const Tensor& grad, const Tensor& self);
Grads silu_backward_of(const Tensor& grad, const Tensor& self);
Grads sigmoid_backward_of(const Tensor& grad, const Tensor& self);
Grads sum_backward(const Tensor& grad, const Tensor& self);
Grads mul_backward(const Tensor& grad, const Tensor& self, const Tensor& other);
Grads mul_scalar_backward(const Tensor& grad, const Tensor& self, double other);
Grads div_backward(const Tensor& grad, const Tensor& self, const Tensor& other);
Grads div_scalar_backward(const Tensor& grad, const Tensor& self, double other);
Grads add_scalar_backward(const Tensor& grad, const Tensor& self, double other, double alpha);
Grads sub_backward(const Tensor& grad, const Tensor& self, const Tensor& other, double alpha);
Grads sub_scalar_backward(const Tensor& grad, const Tensor& self, double other, double alpha);
Grads tanh_backward_of(const Tensor& grad, const Tensor& self);
Grads pow_backward(const Tensor& grad, const Tensor& self, double exponent);
Grads to_copy_backward(const Tensor& grad, const Tensor& self, std::optional<DType> dtype);
Grads sum_dim_backward(const Tensor& grad, const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype);
Grads mean_dim_backward(const Tensor& grad, const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype);
Grads mean_backward(const Tensor& grad, const Tensor& self, std::optional<DType> dtype);

// The normalization ops (layers/kernels/reference/normalization.cpp): softmax and log_softmax over a dim,
// layer_norm and rms_norm over the last dims, their gradient ops, and the gradients of each argument.
std::vector<double> softmax(const Tensor& self, int64_t dim);
std::vector<double> log_softmax(const Tensor& self, int64_t dim);
std::vector<double> softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim);
std::vector<double> log_softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim);
Grads softmax_backward_of(const Tensor& grad, const Tensor& self, int64_t dim);
Grads log_softmax_backward_of(const Tensor& grad, const Tensor& self, int64_t dim);
std::vector<double> layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                               const Tensor& bias, double eps);
std::vector<double> layer_norm_input_backward(const Tensor& grad_output, const Tensor& input,
                                              const Shape& normalized_shape, const Tensor& weight, double eps);
std::vector<double> layer_norm_weight_backward(const Tensor& grad_output, const Tensor& input,
                                               const Shape& normalized_shape, double eps);
Grads layer_norm_backward(const Tensor& grad, const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                          const Tensor& bias, double eps);
std::vector<double> rms_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                             std::optional<double> eps);
std::vector<double> rms_norm_input_backward(const Tensor& grad_output, const Tensor& input,
                                            const Shape& normalized_shape, const Tensor& weight, double eps);
std::vector<double> rms_norm_weight_backward(const Tensor& grad_output, const Tensor& input,
                                             const Shape& normalized_shape, double eps);
Grads rms_norm_backward(const Tensor& grad, const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                        std::optional<double> eps);

// Views (docs/views.md): the values each view shows, row-major, and the gradients scattered back.
std::vector<double> transpose(const Tensor& self, int64_t dim0, int64_t dim1);
std::vector<double> t(const Tensor& self);
std::vector<double> permute(const Tensor& self, const Shape& dims);
std::vector<double> view(const Tensor& self, const Shape& size);
std::vector<double> reshape(const Tensor& self, const Shape& shape);
std::vector<double> expand(const Tensor& self, const Shape& size);
std::vector<double> narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length);
std::vector<double> select(const Tensor& self, int64_t dim, int64_t index);
std::vector<double> slice(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step);
std::vector<double> unsqueeze(const Tensor& self, int64_t dim);
std::vector<double> squeeze(const Tensor& self, int64_t dim);
std::vector<double> contiguous(const Tensor& self);
std::vector<double> slice_backward(const Tensor& grad_output, const Tensor& self, int64_t dim, int64_t start, int64_t step);
std::vector<double> sum_to(const Tensor& grad_output, const Tensor& self);
std::vector<double> as_strided_scatter(const Tensor& self, const Tensor& src, const Shape& size, const Shape& stride,
                                       int64_t storage_offset);
Grads transpose_backward(const Tensor& grad, const Tensor& self, int64_t dim0, int64_t dim1);
Grads t_backward(const Tensor& grad, const Tensor& self);
Grads permute_backward(const Tensor& grad, const Tensor& self, const Shape& dims);
Grads reshape_backward(const Tensor& grad, const Tensor& self, const Shape& shape);  // view's and reshape's
Grads expand_backward(const Tensor& grad, const Tensor& self, const Shape& size);
Grads narrow_backward(const Tensor& grad, const Tensor& self, int64_t dim, int64_t start, int64_t length);
Grads select_backward(const Tensor& grad, const Tensor& self, int64_t dim, int64_t index);
Grads slice_backward_of(const Tensor& grad, const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step);
Grads squeeze_backward(const Tensor& grad, const Tensor& self, int64_t dim);  // unsqueeze's and squeeze's
Grads contiguous_backward(const Tensor& grad, const Tensor& self);

// ||out - ref||_2 / ||max(|ref|, 0.25)||_2: one number that does not blow up on individual near-zero
// entries, nor on an output that cancels to nearly zero (see Note [Error against the inputs' scale]).
// An element whose reference rounds to +-inf or is NaN in out's dtype is exact when out holds that same
// infinity or a NaN, and infinite error otherwise; an infinity where the reference is finite is infinite
// error too, unless that reference rounds to the largest finite value (one ulp off, counted so). See
// Note [A result past the output dtype's range].
double relative_error(const Tensor& out, const std::vector<double>& ref);

// The tolerance on relative_error for results computed in `dtype` (tf32 = f32 with TF32 tensor cores).
double tolerance(DType dtype, bool tf32 = false);

// Half-precision helpers shared by the reference and the frontend's random fill.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace strata::reference
