// See raw_relu_kernel.h. Mirrors layers/kernels/cuda/pointwise.cu (relu_kernel, blocks_for, kThreads);
// if that file changes its kernel or launch geometry, change this copy with it.
#include "raw_relu_kernel.h"

#include <algorithm>

namespace rawbench {
namespace {

constexpr int kThreads = 256;

unsigned int blocks_for(int64_t n) {
  return static_cast<unsigned int>(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{1} << 20));
}

__device__ int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;  // NaN stays NaN, as strata's
  }
}

}  // namespace

void launch_relu_f32(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  relu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
}

}  // namespace rawbench
