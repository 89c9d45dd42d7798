// The launch plans of the CUDA reductions over dims and the in-place ops (reduce_plan.h); host code only.
#include "layers/kernels/cuda/reduce_plan.h"

#include <algorithm>
#include <utility>

namespace strata::kernels::cuda {
namespace {

void push(DimList& dims, int64_t size, int64_t stride) {
  dims.size[dims.count] = size;
  dims.stride[dims.count] = stride;
  ++dims.count;
}

int64_t product(const DimList& dims) {
  int64_t n = 1;
  for (int k = 0; k < dims.count; ++k) n *= dims.size[k];
  return n;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Each slice of a reduction gets at least this many elements per thread, so that the second pass stays
// small; the grid aims at enough blocks to fill any GPU strata supports several times over.
constexpr int64_t kElementsPerThread = 16;
constexpr int64_t kMaxParts = 256;
constexpr int64_t kWantedBlocks = 2048;
constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxGridY = 65535;

}  // namespace

ReducePlan plan_reduction(const Shape& sizes, const std::array<bool, Shape::kMaxDims>& reduced) {
  ReducePlan plan;
  // Row-major strides of the contiguous input; dims walked outermost first, so a dim merges into the
  // previous one of its kind when they are neighbours (after size-1 dims are dropped).
  int64_t strides[Shape::kMaxDims] = {};
  int64_t stride = 1;
  for (int i = sizes.ndim - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= sizes[i];
  }
  bool last_reduced = false, any = false;  // the kind of the innermost dim kept so far
  for (int i = 0; i < sizes.ndim; ++i) {
    const bool is_reduced = reduced[static_cast<size_t>(i)];
    if (sizes[i] == 1) continue;
    DimList& dims = is_reduced ? plan.reduced : plan.kept;
    if (any && last_reduced == is_reduced) {
      dims.size[dims.count - 1] *= sizes[i];  // the neighbour of its kind: one dim
      dims.stride[dims.count - 1] = strides[i];
    } else {
      push(dims, sizes[i], strides[i]);
    }
    last_reduced = is_reduced;
    any = true;
  }
  plan.outputs = product(plan.kept);
  plan.count = product(plan.reduced);
  // The innermost dim decides; with nothing left to reduce (reduced dims of size 1) each output is one
  // element, one thread's work (kColumns).
  plan.layout = plan.reduced.count == 0 || !last_reduced ? ReduceLayout::kColumns : ReduceLayout::kRows;
  if (plan.outputs == 0) return plan;
  // kRows needs a block per output; past CUDA's grid limit the columns layout (a thread per output) is
  // still correct, only its reads are not coalesced.
  if (plan.outputs > kMaxGridX) plan.layout = ReduceLayout::kColumns;
  const int64_t wanted = ceil_div(plan.count, int64_t{kReduceThreads} * kElementsPerThread);
  if (plan.layout == ReduceLayout::kRows) {
    const int64_t grid_cap = std::max<int64_t>(1, kMaxGridX / plan.outputs);
    plan.parts = std::clamp<int64_t>(std::min(wanted, grid_cap), 1, kMaxParts);
    plan.grid_x = plan.outputs * plan.parts;
  } else {
    plan.grid_x = ceil_div(plan.outputs, kReduceThreads);
    // Split the reduced elements only as far as the grid needs more blocks, each thread keeping at least
    // kElementsPerThread of them.
    const int64_t by_elements = ceil_div(plan.count, kElementsPerThread);
    const int64_t by_blocks = ceil_div(kWantedBlocks, plan.grid_x);
    plan.parts = std::clamp<int64_t>(std::min(by_elements, by_blocks), 1, std::min(kMaxParts, kMaxGridY));
    plan.grid_y = plan.parts;
  }
  return plan;
}

InPlaceGeometry plan_in_place(const Shape& sizes, const Shape& self_strides, const Shape& other_strides) {
  InPlaceGeometry g;
  for (int i = 0; i < sizes.ndim; ++i) {
    if (sizes[i] == 1) continue;
    const int last = g.self.count - 1;
    // Merge with the previous dim when, for both tensors, one step of it equals a full run of this one.
    if (last >= 0 && g.self.stride[last] == self_strides[i] * sizes[i] &&
        g.other.stride[last] == other_strides[i] * sizes[i]) {
      g.self.size[last] *= sizes[i];
      g.other.size[last] *= sizes[i];
      g.self.stride[last] = self_strides[i];
      g.other.stride[last] = other_strides[i];
      continue;
    }
    push(g.self, sizes[i], self_strides[i]);
    push(g.other, sizes[i], other_strides[i]);
  }
  g.contiguous = g.self.count == 0 || (g.self.count == 1 && g.self.stride[0] == 1 && g.other.stride[0] == 1);
  return g;
}

bool has_internal_overlap(const Shape& sizes, const Shape& strides) {
  // A tensor with no element writes nothing, whatever its strides: an empty [4, 0] has row-major strides
  // [0, 1] (strata's, lib/tensor.cpp), and its in-place ops are no-ops on the CPU and in torch.
  for (int i = 0; i < sizes.ndim; ++i)
    if (sizes[i] == 0) return false;
  // Dims of size > 1 by increasing stride: the tensor names each location once when every stride is past
  // the furthest element the smaller dims reach. Sufficient, not exact: interleaved strides that never
  // collide (only as_strided makes them) are refused too; torch refuses only the stride-0 case and lets
  // the other overlaps race.
  std::array<std::pair<int64_t, int64_t>, Shape::kMaxDims> dims{};  // (stride, size)
  int n = 0;
  for (int i = 0; i < sizes.ndim; ++i) {
    if (sizes[i] <= 1) continue;
    if (strides[i] == 0) return true;
    dims[static_cast<size_t>(n++)] = {strides[i], sizes[i]};
  }
  // At most four: an insertion sort (std::sort's unrolled threshold trips -Warray-bounds on four elements).
  for (int k = 1; k < n; ++k)
    for (int j = k; j > 0 && dims[static_cast<size_t>(j)] < dims[static_cast<size_t>(j - 1)]; --j)
      std::swap(dims[static_cast<size_t>(j)], dims[static_cast<size_t>(j - 1)]);
  int64_t reach = 0;  // the largest offset the dims so far reach
  for (int k = 0; k < n; ++k) {
    const auto [stride, size] = dims[static_cast<size_t>(k)];
    if (stride <= reach) return true;
    reach += (size - 1) * stride;
  }
  return false;
}

}  // namespace strata::kernels::cuda
