// Private to layers/kernels/cuda, included by its .cu files only: what strata's own kernels share (the
// computation type of each dtype, the grid-stride loop's geometry, the switch over dtypes).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "lib/dtype.h"

namespace strata::kernels::cuda {

// Half types compute in f32, f32 in f32 and f64 in f64.
template <typename T>
struct Math {
  using Acc = T;
  static __device__ Acc load(T v) { return v; }
  static __device__ T store(Acc v) { return v; }
};
template <>
struct Math<__half> {
  using Acc = float;
  static __device__ Acc load(__half v) { return __half2float(v); }
  static __device__ __half store(Acc v) { return __float2half_rn(v); }
};
template <>
struct Math<__nv_bfloat16> {
  using Acc = float;
  static __device__ Acc load(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __nv_bfloat16 store(Acc v) { return __float2bfloat16_rn(v); }
};

inline constexpr int kThreads = 256;

// Enough blocks to fill any GPU strata supports many times over; the loops stride past the rest.
inline unsigned int blocks_for(int64_t n) {
  return static_cast<unsigned int>(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{1} << 20));
}

inline __device__ int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
inline __device__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// The block's threads' values summed into partial[0] (a tree over shared memory of kThreads doubles):
// the reductions' deterministic in-block step.
inline __device__ void block_tree_sum(double* partial) {
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
}

// Calls f with a null pointer of the element type of `dtype`, so one switch serves every launcher.
template <typename F>
void with_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: f(static_cast<float*>(nullptr)); break;
    case DType::kF64: f(static_cast<double*>(nullptr)); break;
    case DType::kF16: f(static_cast<__half*>(nullptr)); break;
    case DType::kBF16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
  }
}

}  // namespace strata::kernels::cuda
