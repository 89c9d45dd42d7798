// Private to layers/kernels/cuda: host launchers of the normalization ops' kernels (normalization.cu).
// Kept free of lib/zone.h, as pointwise_launch.h is; the callers (normalization_ops.cpp) put the zones
// around.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "lib/dtype.h"

namespace strata::kernels::cuda {

// softmax (log: log_softmax) of x over rows of `size` elements `inner` apart, outer * inner rows.
void launch_softmax(DType dtype, const void* x, void* y, int64_t outer, int64_t size, int64_t inner, bool log,
                    cudaStream_t stream);
// Their gradients from the output y: y * (g - sum(g * y)), or with log g - exp(y) * sum(g).
void launch_softmax_backward(DType dtype, const void* g, const void* y, void* gi, int64_t outer, int64_t size,
                             int64_t inner, bool log, cudaStream_t stream);
// layer_norm (rms: rms_norm) of x as [rows, cols]; w and b may be null.
void launch_norm(DType dtype, const void* x, const void* w, const void* b, void* y, int64_t rows, int64_t cols,
                 double eps, bool rms, cudaStream_t stream);
// The input's gradient; w may be null.
void launch_norm_input_backward(DType dtype, const void* g, const void* x, const void* w, void* gi, int64_t rows,
                                int64_t cols, double eps, bool rms, cudaStream_t stream);
// The weight's gradient [cols]: `stats` is device memory for 2 * rows doubles (each row's mean and rstd).
void launch_norm_weight_backward(DType dtype, const void* g, const void* x, void* gw, double* stats, int64_t rows,
                                 int64_t cols, double eps, bool rms, cudaStream_t stream);

}  // namespace strata::kernels::cuda
