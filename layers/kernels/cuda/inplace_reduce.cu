// strata's own CUDA kernels for the in-place ops (relu_, add_, mul_, mul_.Scalar, add_.Scalar, sub_,
// sub_.Scalar, div_, div_.Scalar) and the reductions over
// dims (sum.dim_IntList, mean.dim, mean). Both read their layouts from the plans of reduce_plan.h, which
// the host builds (and tests) without a GPU.
#include <type_traits>

#include "layers/kernels/cuda/device_common.cuh"
#include "layers/kernels/cuda/inplace_reduce_launch.h"
#include "layers/kernels/pointwise_math.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"

namespace strata::kernels::cuda {
namespace {

// ---- In-place ops ------------------------------------------------------------------------------------

template <InPlaceMath kMath, typename Acc>
__device__ Acc in_place_value(Acc self, Acc other, Acc scalar) {
  if constexpr (kMath == InPlaceMath::kRelu) {
    return math::Relu::forward(self);
  } else if constexpr (kMath == InPlaceMath::kAdd) {
    return self + scalar * other;
  } else if constexpr (kMath == InPlaceMath::kMul) {
    return self * other;
  } else if constexpr (kMath == InPlaceMath::kMulScalar) {
    return self * scalar;
  } else if constexpr (kMath == InPlaceMath::kAddScalar) {
    return self + scalar;
  } else if constexpr (kMath == InPlaceMath::kDiv) {
    return self / other;
  } else {
    return self / scalar;
  }
}

// No __restrict__ on self: it is read and written at the same element (and other may be self itself,
// x.add_(x), read at the same element too).
template <InPlaceMath kMath, typename T>
__global__ void in_place_kernel(T* self, const T* other, typename Math<T>::Acc scalar, InPlaceGeometry g,
                                int64_t n) {
  using M = Math<T>;
  using Acc = typename M::Acc;
  constexpr bool kBinary = kMath == InPlaceMath::kAdd || kMath == InPlaceMath::kMul || kMath == InPlaceMath::kDiv;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t at = g.contiguous ? i : offset_of(g.self, i);
    Acc operand = Acc(0);
    if constexpr (kBinary) operand = M::load(other[g.contiguous ? i : offset_of(g.other, i)]);
    self[at] = M::store(in_place_value<kMath>(M::load(self[at]), operand, scalar));
  }
}

template <InPlaceMath kMath>
void launch_in_place_math(DType dtype, void* self, const void* other, double scalar, const InPlaceGeometry& g,
                          int64_t n, cudaStream_t stream) {
  with_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    using Acc = typename Math<T>::Acc;
    in_place_kernel<kMath, T><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<T*>(self), static_cast<const T*>(other), static_cast<Acc>(scalar), g, n);
  });
}

// ---- Reductions over dims (Note [CUDA reductions over dims] in reduce_plan.h) ---------------------------

// The plan sizes kColumns' grid in blocks of kReduceThreads outputs; the kernels index them by kThreads.
static_assert(kReduceThreads == kThreads, "reduce_plan.h's block size must be the kernels' own");

// The offset of reduced element r: one multiply in the common case of one reduced dim, else the general
// decomposition.
__device__ int64_t reduced_offset(const DimList& reduced, int64_t r) {
  return reduced.count == 1 ? r * reduced.stride[0] : offset_of(reduced, r);
}

// The output's value from its double sum: divided by the count for mean (0 / 0 = NaN, as torch's mean of
// nothing), then stored as the CPU kernel stores it (f64 as is; f32, and half types through f32).
template <typename Out>
__device__ void store_result(Out* y, int64_t o, double sum, int64_t count, bool mean) {
  const double value = mean ? sum / double(count) : sum;
  if constexpr (std::is_same_v<Out, double>) {
    y[o] = value;
  } else {
    y[o] = Math<Out>::store(static_cast<typename Math<Out>::Acc>(static_cast<float>(value)));
  }
}

// kRows, pass 1: block b sums part (b % parts) of output (b / parts), its threads striding along the
// reduced elements.
template <typename T, typename Out>
__global__ void reduce_rows_kernel(const T* __restrict__ x, Out* __restrict__ y, double* __restrict__ partials,
                                   ReducePlan plan, bool mean) {
  __shared__ double partial[kThreads];
  const int64_t o = blockIdx.x / plan.parts, part = blockIdx.x - o * plan.parts;
  const T* base = x + offset_of(plan.kept, o);
  double acc = 0;
  for (int64_t r = part * kThreads + threadIdx.x; r < plan.count; r += plan.parts * kThreads) {
    acc += double(Math<T>::load(base[reduced_offset(plan.reduced, r)]));
  }
  partial[threadIdx.x] = acc;
  block_tree_sum(partial);
  if (threadIdx.x != 0) return;
  if (plan.parts == 1) {
    store_result(y, o, partial[0], plan.count, mean);
  } else {
    partials[o * plan.parts + part] = partial[0];
  }
}

// kRows, pass 2: block o adds output o's parts.
template <typename Out>
__global__ void reduce_rows_partials_kernel(const double* __restrict__ partials, Out* __restrict__ y, ReducePlan plan,
                                            bool mean) {
  __shared__ double partial[kThreads];
  const int64_t o = blockIdx.x;
  double acc = 0;
  for (int64_t i = threadIdx.x; i < plan.parts; i += kThreads) acc += partials[o * plan.parts + i];
  partial[threadIdx.x] = acc;
  block_tree_sum(partial);
  if (threadIdx.x == 0) store_result(y, o, partial[0], plan.count, mean);
}

// kColumns, pass 1: thread o of the grid's x sums slice blockIdx.y of output o's reduced elements;
// neighbouring threads read neighbouring elements.
template <typename T, typename Out>
__global__ void reduce_columns_kernel(const T* __restrict__ x, Out* __restrict__ y, double* __restrict__ partials,
                                      ReducePlan plan, bool mean) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (o >= plan.outputs) return;
  const int64_t part = blockIdx.y, per_part = (plan.count + plan.parts - 1) / plan.parts;
  const int64_t begin = part * per_part, end = begin + per_part < plan.count ? begin + per_part : plan.count;
  const T* base = x + offset_of(plan.kept, o);
  double acc = 0;
  for (int64_t r = begin; r < end; ++r) acc += double(Math<T>::load(base[reduced_offset(plan.reduced, r)]));
  if (plan.parts == 1) {
    store_result(y, o, acc, plan.count, mean);
  } else {
    partials[part * plan.outputs + o] = acc;
  }
}

// kColumns, pass 2: thread o adds output o's parts in order.
template <typename Out>
__global__ void reduce_columns_partials_kernel(const double* __restrict__ partials, Out* __restrict__ y,
                                               ReducePlan plan, bool mean) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (o >= plan.outputs) return;
  double acc = 0;
  for (int64_t part = 0; part < plan.parts; ++part) acc += partials[part * plan.outputs + o];
  store_result(y, o, acc, plan.count, mean);
}

template <typename T, typename Out>
void launch_reduce_typed(const T* x, Out* y, const ReducePlan& plan, bool mean, double* partials,
                         cudaStream_t stream) {
  if (plan.layout == ReduceLayout::kRows) {
    reduce_rows_kernel<T, Out><<<static_cast<unsigned int>(plan.grid_x), kThreads, 0, stream>>>(x, y, partials, plan,
                                                                                                mean);
    if (plan.parts > 1) {
      reduce_rows_partials_kernel<Out><<<static_cast<unsigned int>(plan.outputs), kThreads, 0, stream>>>(
          partials, y, plan, mean);
    }
    return;
  }
  const dim3 grid(static_cast<unsigned int>(plan.grid_x), static_cast<unsigned int>(plan.grid_y));
  reduce_columns_kernel<T, Out><<<grid, kThreads, 0, stream>>>(x, y, partials, plan, mean);
  if (plan.parts > 1) {
    reduce_columns_partials_kernel<Out><<<static_cast<unsigned int>(plan.grid_x), kThreads, 0, stream>>>(
        partials, y, plan, mean);
  }
}

}  // namespace

void launch_in_place(InPlaceMath math, DType dtype, void* self, const void* other, double scalar,
                     const InPlaceGeometry& geometry, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  switch (math) {
    case InPlaceMath::kRelu: launch_in_place_math<InPlaceMath::kRelu>(dtype, self, other, scalar, geometry, n, stream); break;
    case InPlaceMath::kAdd: launch_in_place_math<InPlaceMath::kAdd>(dtype, self, other, scalar, geometry, n, stream); break;
    case InPlaceMath::kMul: launch_in_place_math<InPlaceMath::kMul>(dtype, self, other, scalar, geometry, n, stream); break;
    case InPlaceMath::kMulScalar:
      launch_in_place_math<InPlaceMath::kMulScalar>(dtype, self, other, scalar, geometry, n, stream);
      break;
    case InPlaceMath::kAddScalar:
      launch_in_place_math<InPlaceMath::kAddScalar>(dtype, self, other, scalar, geometry, n, stream);
      break;
    case InPlaceMath::kDiv: launch_in_place_math<InPlaceMath::kDiv>(dtype, self, other, scalar, geometry, n, stream); break;
    case InPlaceMath::kDivScalar:
      launch_in_place_math<InPlaceMath::kDivScalar>(dtype, self, other, scalar, geometry, n, stream);
      break;
  }
  STRATA_CUDA_CHECK(cudaGetLastError());
}

void launch_reduce(DType from, DType to, const void* x, void* y, const ReducePlan& plan, bool mean,
                   double* partials, cudaStream_t stream) {
  if (plan.outputs == 0) return;
  with_type(from, [&](auto* from_tag) {
    with_type(to, [&](auto* to_tag) {
      using T = std::remove_pointer_t<decltype(from_tag)>;
      using Out = std::remove_pointer_t<decltype(to_tag)>;
      launch_reduce_typed(static_cast<const T*>(x), static_cast<Out*>(y), plan, mean, partials, stream);
    });
  });
  STRATA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace strata::kernels::cuda
