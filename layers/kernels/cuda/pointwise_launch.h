// Private to layers/kernels/cuda: host launchers of strata's own kernels (pointwise.cu). Kept free of
// lib/zone.h so that nvcc never parses the host clock's intrinsics; the callers put the zones around them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "lib/dtype.h"

namespace strata::kernels::cuda {

// y = Fn::forward(x) for a functor of layers/kernels/pointwise_math.h (Note [Pointwise math written once]),
// computed in f32 for half types and f64 for f64; instantiated in pointwise.cu for every functor there.
template <typename Fn>
void launch_unary(DType dtype, const void* x, void* y, int64_t n, cudaStream_t stream);
// y = Fn::gradient(grad, saved): the functor's gradient op.
template <typename Fn>
void launch_unary_gradient(DType dtype, const void* grad, const void* saved, void* y, int64_t n, cudaStream_t stream);
// y = x converted from `from` to `to` (round to nearest even; f64 -> half through f32, as c10 does).
void launch_cast(DType from, DType to, const void* x, void* y, int64_t n, cudaStream_t stream);
// y = x * other (PyTorch's mul.Scalar: a Python float), in f32 for half types.
void launch_mul_scalar(DType dtype, const void* x, double other, void* y, int64_t n, cudaStream_t stream);
// y = a * b (mul.Tensor).
void launch_mul(DType dtype, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream);
// y = x / other (div.Scalar: true division by the Python float rounded to the computation type, not a
// multiply by its reciprocal); y = a / b (div.Tensor). IEEE: x / 0 = +-inf, 0 / 0 = NaN.
void launch_div_scalar(DType dtype, const void* x, double other, void* y, int64_t n, cudaStream_t stream);
void launch_div(DType dtype, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream);
// y = x + alpha * other with other a Python float (add.Scalar; sub.Scalar with -alpha), other and alpha
// rounded to the computation type first, as the CPU kernel does.
void launch_add_scalar(DType dtype, const void* x, double other, double alpha, void* y, int64_t n,
                       cudaStream_t stream);
// y = pow(x, exponent).
void launch_pow(DType dtype, const void* x, double exponent, void* y, int64_t n, cudaStream_t stream);
// y = a + alpha * b (PyTorch's add(self, other, alpha)).
void launch_add(DType dtype, const void* a, const void* b, double alpha, void* y, int64_t n, cudaStream_t stream);
// y[r, c] = bias[c] for a row-major [rows, cols] y: seeds a GEMM that then accumulates with beta = 1.
void launch_bias_rows(DType dtype, const void* bias, void* y, int64_t rows, int64_t cols, cudaStream_t stream);
// y[n, c, h, w] += bias[c] for an NCHW y with `plane` = h * w.
void launch_bias_channels(DType dtype, const void* bias, void* y, int64_t total, int64_t channels, int64_t plane,
                          cudaStream_t stream);
// y (contiguous) = x read through its strides: the copy behind contiguous() (docs/views.md). Sizes and
// strides are padded in front to 4 dims (size 1); element_size picks the type moved, so every dtype is
// copied as its bits.
struct StridedGeometry {
  int64_t size[4];
  int64_t stride[4];
};
void launch_strided_copy(size_t element_size, const void* x, const StridedGeometry& g, void* y, int64_t n,
                         cudaStream_t stream);

// The gradient ops' kernels.
// y = x <= threshold ? 0 : grad (relu's backward with threshold 0).
void launch_threshold_backward(DType dtype, const void* grad, const void* x, double threshold, void* y, int64_t n,
                               cudaStream_t stream);
// y[i] = source[0] when source is not null (a device pointer), else value.
void launch_fill(DType dtype, const void* source, double value, void* y, int64_t n, cudaStream_t stream);
// y[c] = sum over o, j of x[o, c, j] for x laid out [outer, channels, inner], accumulated in double.
// Each channel is split across channel_sum_parts(...) blocks; when that is more than 1, `partials` is device
// memory for channels * parts doubles (the first pass's sums, added by a second pass), else it may be null.
int64_t channel_sum_parts(int64_t outer, int64_t channels, int64_t inner);
void launch_channel_sum(DType dtype, const void* x, void* y, int64_t outer, int64_t channels, int64_t inner,
                        double* partials, int64_t parts, cudaStream_t stream);

}  // namespace strata::kernels::cuda
