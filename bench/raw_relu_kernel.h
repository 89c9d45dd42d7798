// The relu floor for raw_graph_bench: a copy of strata's own f32 relu kernel (layers/kernels/cuda/
// pointwise.cu) with the same launch geometry, so that eager vs graph is judged on the very kernel strata
// launches. Kept a copy rather than linked: a baseline must not go through strata's code.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rawbench {

// relu_kernel<float><<<min(ceil(n / 256), 2^20), 256, 0, stream>>>(x, y, n): strata's launch, exactly.
void launch_relu_f32(const float* x, float* y, int64_t n, cudaStream_t stream);

}  // namespace rawbench
