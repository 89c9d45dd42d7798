// The strided copy behind contiguous() (layers/kernels/cpu/copy.cpp, Note [The strided copy]) against a
// naive element-by-element loop: random shapes, permutations, steps, expanded dims and storage offsets,
// every dtype compared bit for bit (the copy moves bits, so NaN payloads must survive too). The fast
// paths (memcpy runs, SSE transposes, the step-2 shuffle) are each hit by sizes around their block edges.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/error.h"
#include "lib/tensor.h"

using namespace strata;

namespace {

// A view of a fresh buffer filled with random bits: dims laid out in the order `order` (outermost first),
// each with its own step, or stride 0 where `expanded`, starting `offset` elements in.
Tensor random_view(std::mt19937_64& rng, const Shape& sizes, const std::vector<int>& order,
                   const std::vector<int64_t>& steps, const std::vector<bool>& expanded, int64_t offset, DType dtype) {
  Shape strides;
  strides.ndim = sizes.ndim;
  int64_t span = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int d = *it;
    if (expanded[static_cast<size_t>(d)]) {
      strides.dims[static_cast<size_t>(d)] = 0;
      continue;
    }
    strides.dims[static_cast<size_t>(d)] = span * steps[static_cast<size_t>(d)];
    span = strides[d] * std::max<int64_t>(sizes[d], 1);
  }
  Tensor base = Tensor::empty(Shape{span + offset}, dtype, kCPU);
  auto* bytes = static_cast<unsigned char*>(base.data_ptr());
  for (size_t i = 0; i < base.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(rng());
  return base.as_strided(sizes, strides, offset);
}

// Whether dst holds src's elements, compared as bits through both tensors' strides.
bool same_elements(const Tensor& dst, const Tensor& src) {
  const size_t es = element_size(src.dtype());
  const auto* d = static_cast<const unsigned char*>(dst.data_ptr());
  const auto* s = static_cast<const unsigned char*>(src.data_ptr());
  Shape idx;
  idx.ndim = src.dim();
  for (int64_t e = 0; e < src.numel(); ++e) {
    int64_t d_at = 0, s_at = 0;
    for (int i = 0; i < idx.ndim; ++i) {
      d_at += idx[i] * dst.stride(i);
      s_at += idx[i] * src.stride(i);
    }
    if (std::memcmp(d + d_at * int64_t(es), s + s_at * int64_t(es), es) != 0) return false;
    for (int i = idx.ndim - 1; i >= 0 && ++idx[i] == src.size(i); --i) idx[i] = 0;
  }
  return true;
}

struct RandomLayout {
  Shape sizes;
  std::vector<int> order;
  std::vector<int64_t> steps;
  std::vector<bool> expanded;
  int64_t offset = 0;
};

RandomLayout random_layout(std::mt19937_64& rng, bool allow_expanded) {
  RandomLayout l;
  const int ndim = 1 + int(rng() % 4);
  l.sizes.ndim = ndim;
  // Mostly small dims, one or two around the SSE blocks and the 16-element tiles; sometimes a 1 or a 0.
  for (int i = 0; i < ndim; ++i) {
    const uint64_t pick = rng() % 10;
    l.sizes.dims[static_cast<size_t>(i)] = pick < 1 ? 1 : pick < 4 ? int64_t(1 + rng() % 37) : int64_t(1 + rng() % 6);
  }
  if (rng() % 40 == 0) l.sizes.dims[rng() % static_cast<size_t>(ndim)] = 0;
  l.order.resize(static_cast<size_t>(ndim));
  std::iota(l.order.begin(), l.order.end(), 0);
  if (rng() % 2 == 0) std::shuffle(l.order.begin(), l.order.end(), rng);
  for (int i = 0; i < ndim; ++i) {
    l.steps.push_back(rng() % 3 == 0 ? int64_t(1 + rng() % 3) : 1);
    l.expanded.push_back(allow_expanded && rng() % 8 == 0);
  }
  l.offset = int64_t(rng() % 6);
  return l;
}

}  // namespace

TEST_CASE("contiguous(): random shapes, permutations, steps, expanded dims and offsets, every dtype, bit for bit") {
  std::mt19937_64 rng(31);
  for (DType dtype : kAllDTypes) {
    CAPTURE(dtype_name(dtype));
    for (int trial = 0; trial < 400; ++trial) {
      CAPTURE(trial);
      const RandomLayout l = random_layout(rng, true);
      const Tensor src = random_view(rng, l.sizes, l.order, l.steps, l.expanded, l.offset, dtype);
      CAPTURE(src.sizes().str());
      CAPTURE(src.strides().str());
      const Tensor out = kernels::cpu::contiguous(src);
      REQUIRE(out.is_contiguous());
      REQUIRE(out.sizes() == src.sizes());
      CHECK(same_elements(out, src));
    }
  }
}

TEST_CASE("strided_copy: into a strided destination, either side any layout") {
  std::mt19937_64 rng(32);
  for (DType dtype : kAllDTypes) {
    CAPTURE(dtype_name(dtype));
    for (int trial = 0; trial < 300; ++trial) {
      CAPTURE(trial);
      const RandomLayout l = random_layout(rng, true);
      RandomLayout to = random_layout(rng, false);  // a destination names each element once
      to.sizes = l.sizes;
      to.order.resize(static_cast<size_t>(l.sizes.ndim));
      std::iota(to.order.begin(), to.order.end(), 0);
      if (rng() % 2 == 0) std::shuffle(to.order.begin(), to.order.end(), rng);
      to.steps.resize(static_cast<size_t>(l.sizes.ndim), 1);
      to.expanded.assign(static_cast<size_t>(l.sizes.ndim), false);
      const Tensor src = random_view(rng, l.sizes, l.order, l.steps, l.expanded, l.offset, dtype);
      const Tensor dst = random_view(rng, to.sizes, to.order, to.steps, to.expanded, to.offset, dtype);
      CAPTURE(src.strides().str());
      CAPTURE(dst.strides().str());
      kernels::cpu::strided_copy(dst, src);
      CHECK(same_elements(dst, src));
    }
  }
}

TEST_CASE("the fast paths at their edges: transposes of every size around 4 and 16, step-2 runs, long memcpy runs") {
  std::mt19937_64 rng(33);
  for (DType dtype : kAllDTypes) {
    CAPTURE(dtype_name(dtype));
    for (int64_t rows : {1, 3, 4, 5, 15, 16, 17, 33}) {
      for (int64_t cols : {2, 4, 7, 16, 18, 64}) {
        CAPTURE(rows);
        CAPTURE(cols);
        const Shape sizes{rows, cols};
        // Transposed ([cols, rows] laid out, read as [rows, cols]), stepped by 2, and a narrowed block.
        const Tensor transposed = random_view(rng, sizes, {1, 0}, {1, 1}, {false, false}, 3, dtype);
        const Tensor stepped = random_view(rng, sizes, {0, 1}, {1, 2}, {false, false}, 1, dtype);
        const Tensor rows_apart = random_view(rng, sizes, {0, 1}, {2, 1}, {false, false}, 2, dtype);
        for (const Tensor& src : {transposed, stepped, rows_apart}) {
          CAPTURE(src.strides().str());
          CHECK(same_elements(kernels::cpu::contiguous(src), src));
        }
      }
    }
  }
  // A step-2 view whose last element is its buffer's last: the shuffle's loads must not read past it
  // (AddressSanitizer's build sees a read one element beyond the allocation).
  for (DType dtype : kAllDTypes) {
    for (int64_t n = 1; n <= 19; ++n) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(n);
      const Tensor base = Tensor::empty(Shape{2 * n - 1}, dtype, kCPU);
      auto* bytes = static_cast<unsigned char*>(base.data_ptr());
      for (size_t i = 0; i < base.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(rng());
      const Tensor stepped = base.as_strided(Shape{n}, Shape{2}, 0);
      CHECK(same_elements(kernels::cpu::contiguous(stepped), stepped));
    }
  }
  // A mismatch is refused, naming both tensors.
  const Tensor a = Tensor::empty(Shape{2, 3}, DType::kF32, kCPU), b = Tensor::empty(Shape{3, 2}, DType::kF32, kCPU);
  CHECK_THROWS_AS(kernels::cpu::strided_copy(a, b), UsageError);
}
