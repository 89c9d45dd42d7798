// strata's own CUDA kernels: the unary ops of layers/kernels/pointwise_math.h, add, the tanh GELU's ops (mul, tanh, pow, scalar adds), the cast (to_copy), and the two bias broadcasts (linear's fallback path, conv2d).
// Grid-stride loops over contiguous memory: these ops are bandwidth-bound, so what matters is coalesced
// access and enough blocks in flight, not arithmetic. Half types compute in f32, f64 in f64.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <type_traits>

#include "layers/kernels/cuda/device_common.cuh"
#include "layers/kernels/cuda/pointwise_launch.h"
#include "layers/kernels/cuda/pow_value.h"
#include "layers/kernels/pointwise_math.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"

namespace strata::kernels::cuda {
namespace {

template <typename T>
__global__ void mul_kernel(const T* __restrict__ x, typename Math<T>::Acc other, T* __restrict__ y, int64_t n) {
  using M = Math<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = M::store(M::load(x[i]) * other);
}

template <typename T>
__global__ void mul_tensor_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, int64_t n) {
  using M = Math<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = M::store(M::load(a[i]) * M::load(b[i]));
}

// True division, as the CPU loop: one IEEE division in the computation type (f32 for half types).
template <typename T>
__global__ void div_kernel(const T* __restrict__ x, typename Math<T>::Acc other, T* __restrict__ y, int64_t n) {
  using M = Math<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = M::store(M::load(x[i]) / other);
}

template <typename T>
__global__ void div_tensor_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, int64_t n) {
  using M = Math<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = M::store(M::load(a[i]) / M::load(b[i]));
}

// x + alpha * other with both scalars already in the computation type (the CPU kernel's order).
template <typename T>
__global__ void add_scalar_kernel(const T* __restrict__ x, typename Math<T>::Acc other, typename Math<T>::Acc alpha,
                                  T* __restrict__ y, int64_t n) {
  using M = Math<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = M::store(M::load(x[i]) + alpha * other);
}

// pow_value (pow_value.h): PyTorch's special exponents, chosen on the double exponent as the CPU kernel does.
template <typename T>
__global__ void pow_kernel(const T* __restrict__ x, double exponent, T* __restrict__ y, int64_t n) {
  using M = Math<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    y[i] = M::store(pow_value<typename M::Acc>(M::load(x[i]), exponent));
  }
}

template <typename T>
__global__ void add_kernel(const T* __restrict__ a, const T* __restrict__ b, typename Math<T>::Acc alpha,
                           T* __restrict__ y, int64_t n) {
  using M = Math<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = M::store(M::load(a[i]) + alpha * M::load(b[i]));
}

// The cast: through the source's accumulation type (f32 for half types and f32, f64 for f64), then the
// destination's store; f64 -> half rounds to f32 first, as c10::Half(double) and c10::BFloat16(double) do.
template <typename From, typename To>
__global__ void cast_kernel(const From* __restrict__ x, To* __restrict__ y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    if constexpr (std::is_same_v<To, double>) {
      y[i] = static_cast<double>(Math<From>::load(x[i]));
    } else {
      y[i] = Math<To>::store(static_cast<typename Math<To>::Acc>(static_cast<float>(Math<From>::load(x[i]))));
    }
  }
}

template <typename T>
__global__ void bias_rows_kernel(const T* __restrict__ bias, T* __restrict__ y, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = bias[i % cols];
}

template <typename T>
__global__ void bias_channels_kernel(const T* __restrict__ bias, T* __restrict__ y, int64_t total, int64_t channels,
                                     int64_t plane) {
  using M = Math<T>;
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    y[i] = M::store(M::load(y[i]) + M::load(bias[(i / plane) % channels]));
  }
}

// ---- Gradient ops ------------------------------------------------------------------------------------

template <typename T>
__global__ void threshold_backward_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                          typename Math<T>::Acc threshold, T* __restrict__ y, int64_t n) {
  using M = Math<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    y[i] = M::load(x[i]) <= threshold ? M::store(typename M::Acc(0)) : g[i];
  }
}

// y[i] = value, or y[i] = *source when source is given (expand_as reads its one element on the device).
template <typename T>
__global__ void fill_kernel(const T* __restrict__ source, typename Math<T>::Acc value, T* __restrict__ y, int64_t n) {
  using M = Math<T>;
  const T v = source != nullptr ? source[0] : M::store(value);
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = v;
}

// The reductions (bias_backward, sum): y[c] = the sum over o, j of x[o, c, j] in an [outer, channels,
// inner] layout (bias_backward: [B,C] has inner 1, [N,C,H,W] inner H*W; sum: outer 1, channels 1, inner n).
// Each channel is split into `parts` slices, one block each (pass 1: a grid-stride loop per thread, then a
// shared-memory tree, one partial per block); with more than one part a second pass adds each channel's
// partials in a fixed order. Deterministic, unlike atomics. Every dtype accumulates in double, as the CPU
// kernels do: a long f32 sum in f32 sits at the f32 tolerance of the float64 reference.
using ReduceAcc = double;

// Element i of channel c's slice of `per_channel` elements. The two common layouts need no division:
// inner 1 (a [B,C] gradient) strides by `channels`, outer 1 (sum, or one image) is contiguous.
template <typename T>
__device__ ReduceAcc channel_element(const T* __restrict__ x, int64_t c, int64_t i, int64_t channels, int64_t outer,
                                     int64_t inner) {
  using M = Math<T>;
  if (inner == 1) return ReduceAcc(M::load(x[i * channels + c]));
  if (outer == 1) return ReduceAcc(M::load(x[c * inner + i]));
  const int64_t o = i / inner, j = i - o * inner;
  return ReduceAcc(M::load(x[(o * channels + c) * inner + j]));
}

// Pass 1: block b sums slice (b % parts) of channel (b / parts). With parts == 1 it writes y[c] directly;
// otherwise partials[c * parts + part].
template <typename T>
__global__ void channel_sum_kernel(const T* __restrict__ x, T* __restrict__ y, ReduceAcc* __restrict__ partials,
                                   int64_t outer, int64_t channels, int64_t inner, int64_t parts) {
  __shared__ ReduceAcc partial[kThreads];
  const int64_t c = blockIdx.x / parts, part = blockIdx.x - c * parts, per_channel = outer * inner;
  ReduceAcc acc = 0;
  for (int64_t i = part * kThreads + threadIdx.x; i < per_channel; i += parts * kThreads) {
    acc += channel_element(x, c, i, channels, outer, inner);
  }
  partial[threadIdx.x] = acc;
  block_tree_sum(partial);
  if (threadIdx.x != 0) return;
  if (parts == 1) {
    y[c] = Math<T>::store(typename Math<T>::Acc(partial[0]));
  } else {
    partials[c * parts + part] = partial[0];
  }
}

// Pass 2: block c adds channel c's `parts` partials.
template <typename T>
__global__ void channel_partials_kernel(const ReduceAcc* __restrict__ partials, T* __restrict__ y, int64_t parts) {
  __shared__ ReduceAcc partial[kThreads];
  const int64_t c = blockIdx.x;
  ReduceAcc acc = 0;
  for (int64_t i = threadIdx.x; i < parts; i += kThreads) acc += partials[c * parts + i];
  partial[threadIdx.x] = acc;
  block_tree_sum(partial);
  if (threadIdx.x == 0) y[c] = Math<T>::store(typename Math<T>::Acc(partial[0]));
}

// The unary ops of layers/kernels/pointwise_math.h (Note [Pointwise math written once]): the functor's math
// in Acc (f32 for half types), one grid-stride loop for all of them.
template <typename Fn, typename T>
__global__ void unary_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  using M = Math<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = M::store(Fn::forward(M::load(x[i])));
}

template <typename Fn, typename T>
__global__ void unary_gradient_kernel(const T* __restrict__ g, const T* __restrict__ saved, T* __restrict__ y,
                                      int64_t n) {
  using M = Math<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride())
    y[i] = M::store(Fn::gradient(M::load(g[i]), M::load(saved[i])));
}

}  // namespace

template <typename Fn>
void launch_unary(DType dtype, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    unary_kernel<Fn, T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

template <typename Fn>
void launch_unary_gradient(DType dtype, const void* grad, const void* saved, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    unary_gradient_kernel<Fn, T><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<const T*>(grad), static_cast<const T*>(saved), static_cast<T*>(y), n);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

// Every functor's launcher, instantiated (the addresses in a table with external linkage make nvcc emit
// each launcher and its kernels here, for pointwise_ops.cpp to call).
using UnaryLauncher = void (*)(DType, const void*, void*, int64_t, cudaStream_t);
using GradientLauncher = void (*)(DType, const void*, const void*, void*, int64_t, cudaStream_t);
template <typename... Fns>
constexpr std::array<UnaryLauncher, sizeof...(Fns)> unary_launchers(math::MathList<Fns...>) {
  return {&launch_unary<Fns>...};
}
template <typename... Fns>
constexpr std::array<GradientLauncher, sizeof...(Fns)> gradient_launchers(math::MathList<Fns...>) {
  return {&launch_unary_gradient<Fns>...};
}
extern const decltype(unary_launchers(math::UnaryMath{})) kUnaryLaunchers;
extern const decltype(gradient_launchers(math::UnaryGradientMath{})) kGradientLaunchers;
const decltype(unary_launchers(math::UnaryMath{})) kUnaryLaunchers = unary_launchers(math::UnaryMath{});
const decltype(gradient_launchers(math::UnaryGradientMath{})) kGradientLaunchers =
    gradient_launchers(math::UnaryGradientMath{});

void launch_cast(DType from, DType to, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_type(from, [&](auto* from_tag) {
    with_type(to, [&](auto* to_tag) {
      using From = std::remove_pointer_t<decltype(from_tag)>;
      using To = std::remove_pointer_t<decltype(to_tag)>;
      cast_kernel<From, To><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const From*>(x), static_cast<To*>(y), n);
    });
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

void launch_mul_scalar(DType dtype, const void* x, double other, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    using Acc = typename Math<T>::Acc;
    mul_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<Acc>(other),
                                                          static_cast<T*>(y), n);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

void launch_mul(DType dtype, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    mul_tensor_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(b),
                                                                 static_cast<T*>(y), n);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

void launch_div_scalar(DType dtype, const void* x, double other, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    using Acc = typename Math<T>::Acc;
    div_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<Acc>(other),
                                                          static_cast<T*>(y), n);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

void launch_div(DType dtype, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    div_tensor_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(b),
                                                                 static_cast<T*>(y), n);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

void launch_add_scalar(DType dtype, const void* x, double other, double alpha, void* y, int64_t n,
                       cudaStream_t stream) {
  if (n == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    using Acc = typename Math<T>::Acc;
    add_scalar_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<Acc>(other),
                                                                 static_cast<Acc>(alpha), static_cast<T*>(y), n);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

void launch_pow(DType dtype, const void* x, double exponent, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    pow_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), exponent, static_cast<T*>(y), n);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

void launch_add(DType dtype, const void* a, const void* b, double alpha, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    using Acc = typename Math<T>::Acc;
    add_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(b),
                                                          static_cast<Acc>(alpha), static_cast<T*>(y), n);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

void launch_bias_rows(DType dtype, const void* bias, void* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    bias_rows_kernel<T><<<blocks_for(rows * cols), kThreads, 0, stream>>>(static_cast<const T*>(bias),
                                                                          static_cast<T*>(y), rows, cols);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

void launch_bias_channels(DType dtype, const void* bias, void* y, int64_t total, int64_t channels, int64_t plane,
                          cudaStream_t stream) {
  if (total == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    bias_channels_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(bias),
                                                                        static_cast<T*>(y), total, channels, plane);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

void launch_threshold_backward(DType dtype, const void* grad, const void* x, double threshold, void* y, int64_t n,
                               cudaStream_t stream) {
  if (n == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    using Acc = typename Math<T>::Acc;
    threshold_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<const T*>(grad), static_cast<const T*>(x), static_cast<Acc>(threshold), static_cast<T*>(y), n);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

void launch_fill(DType dtype, const void* source, double value, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    using Acc = typename Math<T>::Acc;
    fill_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(source), static_cast<Acc>(value),
                                                           static_cast<T*>(y), n);
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

// One thread per output element: its row-major index split into 4 coordinates, then the input read
// through the strides (so consecutive threads write consecutive elements; the reads gather).
template <typename T>
__global__ void strided_copy_kernel(const T* __restrict__ x, StridedGeometry g, T* __restrict__ y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    int64_t rest = i, at = 0;
    for (int d = 3; d >= 0; --d) {
      at += (rest % g.size[d]) * g.stride[d];
      rest /= g.size[d];
    }
    y[i] = x[at];
  }
}

void launch_strided_copy(size_t element_size, const void* x, const StridedGeometry& g, void* y, int64_t n,
                         cudaStream_t stream) {
  if (n == 0) return;
  auto launch = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    strided_copy_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), g, static_cast<T*>(y), n);
  };
  if (element_size == 2) launch(static_cast<uint16_t*>(nullptr));
  else if (element_size == 4) launch(static_cast<uint32_t*>(nullptr));
  else launch(static_cast<uint64_t*>(nullptr));
  STRATA_CUDA_CHECK(cudaGetLastError());
}

int64_t channel_sum_parts(int64_t outer, int64_t channels, int64_t inner) {
  if (channels == 0) return 1;
  // Enough elements per thread (16) that the second pass stays small, at most kThreads parts per channel
  // (one pass-2 block reads them all in one step), and a grid within CUDA's 2^31 - 1 blocks.
  const int64_t per_channel = outer * inner;
  const int64_t wanted = (per_channel + int64_t{kThreads} * 16 - 1) / (int64_t{kThreads} * 16);
  const int64_t grid_cap = std::max<int64_t>(1, ((int64_t{1} << 31) - 1) / channels);
  return std::clamp<int64_t>(std::min(wanted, grid_cap), 1, kThreads);
}

void launch_channel_sum(DType dtype, const void* x, void* y, int64_t outer, int64_t channels, int64_t inner,
                        double* partials, int64_t parts, cudaStream_t stream) {
  if (channels == 0) return;
  const auto blocks = static_cast<unsigned int>(channels * parts);
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    channel_sum_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), partials,
                                                           outer, channels, inner, parts);
    if (parts > 1) {
      channel_partials_kernel<T><<<static_cast<unsigned int>(channels), kThreads, 0, stream>>>(
          partials, static_cast<T*>(y), parts);
    }
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace strata::kernels::cuda
