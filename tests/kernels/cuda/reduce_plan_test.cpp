// The launch plans of the CUDA reductions over dims and the in-place ops (layers/kernels/cuda/reduce_plan.h):
// host-only, no GPU needed. Each plan is replayed on the host: every input element must be read exactly
// once, by the output the CPU kernel gives it, and the grid must be one CUDA accepts. The kernels
// themselves are checked on a GPU in inplace_reduce_gpu_test.cpp.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "layers/kernels/cuda/reduce_plan.h"
#include "lib/op_shapes.h"
#include "lib/tensor.h"

using namespace strata;
using strata::kernels::cuda::InPlaceGeometry;
using strata::kernels::cuda::plan_in_place;
using strata::kernels::cuda::plan_reduction;
using strata::kernels::cuda::ReduceLayout;
using strata::kernels::cuda::ReducePlan;

namespace {

// The output each input element (row-major index) belongs to, as the CPU kernel decides it: its
// coordinates in the kept dims, row-major.
std::vector<int64_t> expected_owner(const Shape& s, const op_shapes::Reduction& r) {
  std::vector<int64_t> owner(static_cast<size_t>(s.numel()));
  Shape idx;
  idx.ndim = s.ndim;
  for (auto& o : owner) {
    int64_t out = 0;
    for (int i = 0; i < s.ndim; ++i)
      if (!r.reduced[static_cast<size_t>(i)]) out = out * s[i] + idx[i];
    o = out;
    for (int i = s.ndim - 1; i >= 0 && ++idx[i] == s[i]; --i) idx[i] = 0;
  }
  return owner;
}

// Replays the plan as the kernels walk it (every output, every part's slice) and checks coverage.
void check_plan(const Shape& s, const Shape& dim) {
  CAPTURE(s.str());
  CAPTURE(dim.str());
  const op_shapes::Reduction r = op_shapes::reduce_dims("sum", s, dim, false);
  const ReducePlan plan = plan_reduction(s, r.reduced);
  CHECK(plan.outputs == r.out.numel());
  CHECK(plan.count == r.count);
  if (plan.outputs == 0) return;
  CHECK(plan.parts >= 1);
  CHECK(plan.parts <= 256);
  CHECK(plan.grid_x >= 1);
  CHECK(plan.grid_x < (int64_t{1} << 31));
  CHECK(plan.grid_y <= 65535);
  if (plan.layout == ReduceLayout::kRows) {
    CHECK(plan.grid_x == plan.outputs * plan.parts);
  } else {
    CHECK(plan.grid_x * 256 >= plan.outputs);
    CHECK(plan.grid_y == plan.parts);
  }
  const std::vector<int64_t> owner = expected_owner(s, r);
  std::vector<int> seen(owner.size(), 0);
  for (int64_t o = 0; o < plan.outputs; ++o) {
    const int64_t base = kernels::cuda::offset_of(plan.kept, o);
    for (int64_t e = 0; e < plan.count; ++e) {
      const int64_t at = base + kernels::cuda::offset_of(plan.reduced, e);
      REQUIRE(at >= 0);
      REQUIRE(at < int64_t(owner.size()));
      ++seen[static_cast<size_t>(at)];
      CHECK(owner[static_cast<size_t>(at)] == o);
    }
  }
  for (int count : seen) CHECK(count == 1);
}

}  // namespace

TEST_CASE("plan_reduction: every element read once, by the output the CPU kernel gives it, for every dim set") {
  const Shape shapes[] = {Shape{7}, Shape{5, 7}, Shape{3, 1, 4}, Shape{2, 3, 4, 5}, Shape{1, 6, 1, 3}, Shape{4, 0, 3}};
  for (const Shape& s : shapes) {
    // Every subset of dims (the empty list means every dim, as torch's).
    for (int mask = 0; mask < (1 << s.ndim); ++mask) {
      Shape dim;
      for (int i = 0; i < s.ndim; ++i)
        if (mask & (1 << i)) dim.dims[static_cast<size_t>(dim.ndim++)] = i;
      check_plan(s, dim);
    }
  }
}

TEST_CASE("plan_reduction: the innermost dim picks the layout - neighbours merge - size-1 dims drop out") {
  std::array<bool, Shape::kMaxDims> last{false, true, false, false};
  ReducePlan p = plan_reduction(Shape{64, 128}, last);  // x.sum(-1): rows
  CHECK(p.layout == ReduceLayout::kRows);
  CHECK(p.reduced.count == 1);
  CHECK(p.reduced.stride[0] == 1);
  std::array<bool, Shape::kMaxDims> first{true, false, false, false};
  p = plan_reduction(Shape{1000, 3}, first);  // x.sum(0): columns, few outputs, split along the grid's y
  CHECK(p.layout == ReduceLayout::kColumns);
  CHECK(p.parts > 1);
  CHECK(p.count == 1000);
  std::array<bool, Shape::kMaxDims> outer_two{true, true, false, false};
  p = plan_reduction(Shape{4, 5, 1, 6}, outer_two);  // [4,5] merge into one reduced dim of 20
  CHECK(p.reduced.count == 1);
  CHECK(p.reduced.size[0] == 20);
  CHECK(p.reduced.stride[0] == 6);
  CHECK(p.kept.count == 1);
  std::array<bool, Shape::kMaxDims> middle{false, true, false, false};
  p = plan_reduction(Shape{3, 1, 5}, middle);  // reducing a size-1 dim: one element per output
  CHECK(p.layout == ReduceLayout::kColumns);
  CHECK(p.count == 1);
  CHECK(p.kept.count == 1);  // [3] and [5] merge across the dropped dim
  CHECK(p.kept.size[0] == 15);
}

TEST_CASE("plan_reduction: long rows split into parts of 4096 elements, at most 256, in a grid CUDA accepts") {
  const std::array<bool, Shape::kMaxDims> all{true, true, true, true};
  CHECK(plan_reduction(Shape{4096}, all).parts == 1);
  CHECK(plan_reduction(Shape{4097}, all).parts == 2);
  CHECK(plan_reduction(Shape{int64_t{1} << 30}, all).parts == 256);
  const std::array<bool, Shape::kMaxDims> last{false, true, false, false};
  const ReducePlan many = plan_reduction(Shape{int64_t{1} << 29, 1 << 13}, last);
  CHECK(many.grid_x < (int64_t{1} << 31));
  CHECK(many.parts >= 1);
  // More outputs than CUDA's grid takes blocks: one thread per output instead.
  const ReducePlan huge = plan_reduction(Shape{int64_t{1} << 31, 2}, last);
  CHECK(huge.layout == ReduceLayout::kColumns);
  CHECK(huge.grid_x < (int64_t{1} << 31));
}

TEST_CASE("plan_in_place: contiguous pairs need no division - views and broadcasts keep their strides") {
  InPlaceGeometry g = plan_in_place(Shape{4, 5}, Shape{5, 1}, Shape{5, 1});
  CHECK(g.contiguous);
  CHECK(g.self.count == 1);
  g = plan_in_place(Shape{4, 5}, Shape{1, 4}, Shape{5, 1});  // a transposed self
  CHECK_FALSE(g.contiguous);
  CHECK(g.self.count == 2);
  g = plan_in_place(Shape{4, 5}, Shape{5, 1}, Shape{0, 1});  // other broadcast along dim 0
  CHECK_FALSE(g.contiguous);
  CHECK(g.other.stride[0] == 0);
  // Every element of self's index space maps to self's and other's offsets as strides say.
  const Shape sizes{3, 4, 2}, self_strides{1, 6, 3}, other_strides{0, 2, 1};
  g = plan_in_place(sizes, self_strides, other_strides);
  int64_t i = 0;
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t c = 0; c < 2; ++c, ++i) {
        CHECK(kernels::cuda::offset_of(g.self, i) == a * 1 + b * 6 + c * 3);
        CHECK(kernels::cuda::offset_of(g.other, i) == b * 2 + c * 1);
      }
  g = plan_in_place(Shape{}, Shape{}, Shape{});  // a 0-dim tensor: one element at offset 0
  CHECK(g.contiguous);
}

TEST_CASE("has_internal_overlap: expanded and overlapping views are found, ordinary views are not") {
  using kernels::cuda::has_internal_overlap;
  CHECK_FALSE(has_internal_overlap(Shape{4, 5}, Shape{5, 1}));
  CHECK_FALSE(has_internal_overlap(Shape{4, 5}, Shape{1, 4}));   // transposed
  CHECK_FALSE(has_internal_overlap(Shape{4, 5}, Shape{10, 2}));  // stepped
  CHECK_FALSE(has_internal_overlap(Shape{1, 5}, Shape{0, 1}));   // a size-1 dim's stride is never used
  CHECK(has_internal_overlap(Shape{3, 5}, Shape{0, 1}));         // expanded
  CHECK(has_internal_overlap(Shape{4, 5}, Shape{2, 1}));         // rows that overlap
  // An empty tensor writes nothing: Tensor::empty's own strides for [4, 0] and [3, 0, 2] hold a stride 0
  // on a dim of size > 1, and relu_ of such a tensor is a no-op, not a refusal.
  CHECK(Tensor::empty(Shape{4, 0}, DType::kF32, kCPU).strides() == Shape{0, 1});
  CHECK_FALSE(has_internal_overlap(Shape{4, 0}, Shape{0, 1}));
  CHECK_FALSE(has_internal_overlap(Shape{3, 0, 2}, Shape{0, 2, 1}));
  CHECK_FALSE(has_internal_overlap(Shape{0, 5}, Shape{1, 0}));
}
