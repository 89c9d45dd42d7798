// Private to layers/kernels/cuda: host launchers of the in-place ops' and the reductions over dims' kernels
// (inplace_reduce.cu). Kept free of lib/zone.h, as pointwise_launch.h is; the callers put the zones around.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "layers/kernels/cuda/reduce_plan.h"
#include "lib/dtype.h"

namespace strata::kernels::cuda {

// What an in-place kernel computes at each element of self (the CPU kernels' expressions, in f32 for half
// types): relu_ (relu's math: NaN and -0.0 kept), add_ (self + scalar * other, scalar = alpha; sub_ with
// -alpha), mul_ (self * other), mul_.Scalar (self * scalar), add_.Scalar (self + scalar, scalar = alpha *
// other already rounded in the computation type; sub_.Scalar with -alpha), div_ (self / other) and
// div_.Scalar (self / scalar).
enum class InPlaceMath { kRelu, kAdd, kMul, kMulScalar, kAddScalar, kDiv, kDivScalar };

// self[i] = f(self[i], other[i]) over the n elements of the geometry's index space, each tensor read and
// written through its own strides (other is null for relu_ and the .Scalar ops). Each element is read
// and written by one thread: an operand that overlaps self other than element for element must be
// copied first (the caller's job).
void launch_in_place(InPlaceMath math, DType dtype, void* self, const void* other, double scalar,
                     const InPlaceGeometry& geometry, int64_t n, cudaStream_t stream);

// y[o] = the sum (or, with mean, the mean) of x's elements for output o under the plan, accumulated in
// double and stored in `to`. `partials` is device memory for plan.outputs * plan.parts doubles when
// plan.parts > 1, else it may be null.
void launch_reduce(DType from, DType to, const void* x, void* y, const ReducePlan& plan, bool mean,
                   double* partials, cudaStream_t stream);

}  // namespace strata::kernels::cuda
