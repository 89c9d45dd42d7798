// The normalization ops' kernels (Note [Normalization ops] in layers/ops/normalization.h): a block per
// row (grid-stride over the rows), the row's sums and max reduced in double over the block's threads
// (block_tree_sum, deterministic), the elementwise math in Math<T>::Acc (f32 for half types and f32,
// f64 for f64), as the CPU loops compute it. The weight gradients: each row's mean and rstd first, then a
// thread per column summing over the rows in double.
#include <cmath>
#include <type_traits>

#include "layers/kernels/cuda/device_common.cuh"
#include "layers/kernels/cuda/normalization_launch.h"

namespace strata::kernels::cuda {
namespace {

inline unsigned int row_blocks(int64_t rows) {
  return static_cast<unsigned int>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
}

// The block's max of its threads' values (NaN wins, as the CPU loop's), in partial[0].
inline __device__ void block_tree_max(double* partial) {
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) {
      const double a = partial[threadIdx.x], b = partial[threadIdx.x + stride];
      partial[threadIdx.x] = isnan(a) || isnan(b) ? nan("") : (b > a ? b : a);
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void softmax_kernel(const T* x, T* y, int64_t outer, int64_t size, int64_t inner, bool log) {
  using M = Math<T>;
  using Acc = typename M::Acc;
  __shared__ double partial[kThreads];
  for (int64_t row = blockIdx.x; row < outer * inner; row += gridDim.x) {
    const int64_t base = (row / inner) * size * inner + row % inner;
    double max = -INFINITY;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
      const double v = double(M::load(x[base + j * inner]));
      max = isnan(v) || v > max ? v : max;
    }
    partial[threadIdx.x] = max;
    block_tree_max(partial);
    const Acc row_max = Acc(partial[0]);
    __syncthreads();
    double sum = 0;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) sum += exp(double(M::load(x[base + j * inner]) - row_max));
    partial[threadIdx.x] = sum;
    block_tree_sum(partial);
    const double total = partial[0];
    __syncthreads();
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
      const Acc v = M::load(x[base + j * inner]) - row_max;
      y[base + j * inner] = M::store(log ? Acc(v - Acc(::log(total))) : Acc(exp(double(v)) / total));
    }
  }
}

template <typename T>
__global__ void softmax_backward_kernel(const T* g, const T* y, T* gi, int64_t outer, int64_t size, int64_t inner,
                                        bool log) {
  using M = Math<T>;
  using Acc = typename M::Acc;
  __shared__ double partial[kThreads];
  for (int64_t row = blockIdx.x; row < outer * inner; row += gridDim.x) {
    const int64_t base = (row / inner) * size * inner + row % inner;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
      const int64_t at = base + j * inner;
      sum += log ? double(M::load(g[at])) : double(M::load(g[at])) * double(M::load(y[at]));
    }
    partial[threadIdx.x] = sum;
    block_tree_sum(partial);
    const double total = partial[0];
    __syncthreads();
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
      const int64_t at = base + j * inner;
      const double gv = double(M::load(g[at])), yv = double(M::load(y[at]));
      gi[at] = M::store(Acc(log ? gv - exp(yv) * total : yv * (gv - total)));
    }
  }
}

// The row's mean (0 for rms_norm) and rstd, in every thread of the block.
template <typename T>
__device__ void row_stats(const T* xr, int64_t cols, double eps, bool rms, double* partial, double& mean,
                          double& rstd) {
  using M = Math<T>;
  double sum = 0;
  if (!rms) {
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += double(M::load(xr[j]));
    partial[threadIdx.x] = sum;
    block_tree_sum(partial);
    sum = partial[0];
    __syncthreads();
  }
  mean = rms ? 0.0 : sum / double(cols);
  double var = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const double d = double(M::load(xr[j])) - mean;
    var += d * d;
  }
  partial[threadIdx.x] = var;
  block_tree_sum(partial);
  rstd = 1.0 / sqrt(partial[0] / double(cols) + eps);
  __syncthreads();
}

template <typename T>
__global__ void norm_kernel(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t cols, double eps,
                            bool rms) {
  using M = Math<T>;
  __shared__ double partial[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    double mean = 0, rstd = 0;
    row_stats(x + row * cols, cols, eps, rms, partial, mean, rstd);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      double v = (double(M::load(x[row * cols + j])) - mean) * rstd;
      if (w != nullptr) v *= double(M::load(w[j]));
      if (b != nullptr) v += double(M::load(b[j]));
      y[row * cols + j] = M::store(typename M::Acc(v));
    }
  }
}

template <typename T>
__global__ void norm_input_backward_kernel(const T* g, const T* x, const T* w, T* gi, int64_t rows, int64_t cols,
                                           double eps, bool rms) {
  using M = Math<T>;
  __shared__ double partial[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    const T* gr = g + row * cols;
    double mean = 0, rstd = 0;
    row_stats(xr, cols, eps, rms, partial, mean, rstd);
    double sum_gw = 0, sum_gw_xhat = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double gw = double(M::load(gr[j])) * (w != nullptr ? double(M::load(w[j])) : 1.0);
      sum_gw += gw;
      sum_gw_xhat += gw * (double(M::load(xr[j])) - mean) * rstd;
    }
    partial[threadIdx.x] = sum_gw;
    block_tree_sum(partial);
    const double mean_gw = rms ? 0.0 : partial[0] / double(cols);
    __syncthreads();
    partial[threadIdx.x] = sum_gw_xhat;
    block_tree_sum(partial);
    const double mean_gw_xhat = partial[0] / double(cols);
    __syncthreads();
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double gw = double(M::load(gr[j])) * (w != nullptr ? double(M::load(w[j])) : 1.0);
      const double xhat = (double(M::load(xr[j])) - mean) * rstd;
      gi[row * cols + j] = M::store(typename M::Acc(rstd * (gw - mean_gw - xhat * mean_gw_xhat)));
    }
  }
}

template <typename T>
__global__ void norm_stats_kernel(const T* x, double* stats, int64_t rows, int64_t cols, double eps, bool rms) {
  __shared__ double partial[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    double mean = 0, rstd = 0;
    row_stats(x + row * cols, cols, eps, rms, partial, mean, rstd);
    if (threadIdx.x == 0) {
      stats[2 * row] = mean;
      stats[2 * row + 1] = rstd;
    }
  }
}

template <typename T>
__global__ void norm_weight_backward_kernel(const T* g, const T* x, T* gw, const double* stats, int64_t rows,
                                            int64_t cols) {
  using M = Math<T>;
  for (int64_t j = first_index(); j < cols; j += grid_stride()) {
    double sum = 0;
    for (int64_t r = 0; r < rows; ++r) {
      sum += double(M::load(g[r * cols + j])) * (double(M::load(x[r * cols + j])) - stats[2 * r]) * stats[2 * r + 1];
    }
    gw[j] = M::store(typename M::Acc(sum));
  }
}

}  // namespace

void launch_softmax(DType dtype, const void* x, void* y, int64_t outer, int64_t size, int64_t inner, bool log,
                    cudaStream_t stream) {
  with_type(dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    softmax_kernel<T><<<row_blocks(outer * inner), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                                          outer, size, inner, log);
  });
}

void launch_softmax_backward(DType dtype, const void* g, const void* y, void* gi, int64_t outer, int64_t size,
                             int64_t inner, bool log, cudaStream_t stream) {
  with_type(dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    softmax_backward_kernel<T><<<row_blocks(outer * inner), kThreads, 0, stream>>>(
        static_cast<const T*>(g), static_cast<const T*>(y), static_cast<T*>(gi), outer, size, inner, log);
  });
}

void launch_norm(DType dtype, const void* x, const void* w, const void* b, void* y, int64_t rows, int64_t cols,
                 double eps, bool rms, cudaStream_t stream) {
  with_type(dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    norm_kernel<T><<<row_blocks(rows), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                                              static_cast<const T*>(b), static_cast<T*>(y), rows, cols,
                                                              eps, rms);
  });
}

void launch_norm_input_backward(DType dtype, const void* g, const void* x, const void* w, void* gi, int64_t rows,
                                int64_t cols, double eps, bool rms, cudaStream_t stream) {
  with_type(dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    norm_input_backward_kernel<T><<<row_blocks(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(g), static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(gi), rows, cols,
        eps, rms);
  });
}

void launch_norm_weight_backward(DType dtype, const void* g, const void* x, void* gw, double* stats, int64_t rows,
                                 int64_t cols, double eps, bool rms, cudaStream_t stream) {
  with_type(dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    norm_stats_kernel<T><<<row_blocks(rows), kThreads, 0, stream>>>(static_cast<const T*>(x), stats, rows, cols, eps,
                                                                     rms);
    norm_weight_backward_kernel<T><<<blocks_for(cols), kThreads, 0, stream>>>(
        static_cast<const T*>(g), static_cast<const T*>(x), static_cast<T*>(gw), stats, rows, cols);
  });
}

}  // namespace strata::kernels::cuda
