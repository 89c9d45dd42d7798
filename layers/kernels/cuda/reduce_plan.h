// Private to layers/kernels/cuda: how the CUDA reductions over dims (sum.dim_IntList, mean.dim, mean) and the
// in-place ops lay out their work. Plain host code with no CUDA header, so that the planning is built and
// tested on a machine without a GPU (tests/kernels/cuda/reduce_plan_test.cpp); the kernels in
// inplace_reduce.cu read the same structs, and offset_of is compiled for both sides.
#pragma once

#include <array>
#include <cstdint>

#include "layers/kernels/pointwise_math.h"  // STRATA_HOST_DEVICE
#include "lib/tensor.h"

namespace strata::kernels::cuda {

// Up to four (size, stride) pairs, outermost first: an index in [0, product of sizes) in row-major order
// maps to the element offset sum(coordinate[k] * stride[k]).
struct DimList {
  int count = 0;
  int64_t size[Shape::kMaxDims] = {1, 1, 1, 1};
  int64_t stride[Shape::kMaxDims] = {0, 0, 0, 0};
};

STRATA_HOST_DEVICE inline int64_t offset_of(const DimList& dims, int64_t index) {
  int64_t offset = 0;
  for (int k = dims.count - 1; k >= 0; --k) {
    const int64_t size = dims.size[k];
    offset += (index % size) * dims.stride[k];
    index /= size;
  }
  return offset;
}

// Note [CUDA reductions over dims]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The input is contiguous (the registration copies a view first, Note [Contiguous inputs]). Its dims are
// split into the kept ones (one output element per coordinate, row-major: the output's own order, with or
// without keepdim) and the reduced ones; size-1 dims are dropped and neighbours of one kind merged, so at
// most two of each remain. Which one is innermost decides the layout:
//   - kRows (the innermost dim is reduced: x.sum(-1)): `parts` blocks per output, the block's threads
//     striding along the reduced elements, which lie next to each other (coalesced reads);
//   - kColumns (the innermost dim is kept: x.sum(0)): one thread per output, neighbouring threads reading
//     neighbouring elements, the reduced elements split into `parts` slices along the grid's y.
// With parts > 1 each (output, part) writes a double partial and a second pass adds them in a fixed order:
// deterministic, unlike atomics, and the sum of each output runs across many blocks. Every dtype
// accumulates in double, as the CPU kernel does.
enum class ReduceLayout { kRows, kColumns };

struct ReducePlan {
  DimList kept;     // the output's index space, with the input's strides
  DimList reduced;  // each output's reduced elements, with the input's strides
  int64_t outputs = 1;
  int64_t count = 1;  // elements per output (0 when a reduced dim is empty)
  ReduceLayout layout = ReduceLayout::kRows;
  int64_t parts = 1;  // slices of each output's elements, one block (kRows) or one grid row (kColumns) each
  // The grid: kRows uses grid_x = outputs * parts blocks; kColumns grid_x = ceil(outputs / threads) and
  // grid_y = parts. Both within CUDA's limits (2^31 - 1 for x, 65535 for y).
  int64_t grid_x = 1;
  int64_t grid_y = 1;
};

inline constexpr int kReduceThreads = 256;

// The plan for reducing a contiguous tensor of `sizes` over the dims marked in `reduced`.
ReducePlan plan_reduction(const Shape& sizes, const std::array<bool, Shape::kMaxDims>& reduced);

// The in-place ops' index space: self's sizes (size-1 dims dropped, neighbours merged where both self's
// and other's strides allow), with self's strides and the operand's (0 along a broadcast dim).
struct InPlaceGeometry {
  DimList self;
  DimList other;           // other.size == self.size
  bool contiguous = false;  // both are row-major with unit inner stride: offset = index, no division
};

InPlaceGeometry plan_in_place(const Shape& sizes, const Shape& self_strides, const Shape& other_strides);

// Whether a tensor of these sizes and strides names one memory location twice (a dim of size > 1 with
// stride 0, or strides that make rows overlap). In-place writes to such a tensor race on the GPU.
bool has_internal_overlap(const Shape& sizes, const Shape& strides);

}  // namespace strata::kernels::cuda
