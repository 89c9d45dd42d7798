// The strided copy behind contiguous() (layers/kernels/cpu/copy.cpp, Note [The strided copy]) against a
// naive element-by-element loop: random shapes, permutations, steps, expanded dims and storage offsets,
// every dtype compared bit for bit (the copy moves bits, so NaN payloads must survive too). The fast
// paths (memcpy runs, the transposed tiles at each instruction set the CPU has, the step-2 shuffle) are
// each hit by sizes around their block edges. Every source buffer is malloc'd to its exact size, so that
// AddressSanitizer's build (scripts/test asan) sees a read one element past a view's end.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "layers/kernels/cpu/copy_transpose.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/error.h"
#include "lib/storage.h"
#include "lib/tensor.h"

using namespace strata;

namespace {

// A contiguous [numel] tensor over a malloc'd block of exactly its bytes (strata's allocator pads blocks
// for alignment, which would hide a read past the end), filled with random bits.
Tensor exact_buffer(std::mt19937_64& rng, int64_t numel, DType dtype) {
  const size_t nbytes = size_t(numel) * element_size(dtype);
  void* block = std::malloc(std::max<size_t>(nbytes, 1));
  REQUIRE(block != nullptr);
  auto* bytes = static_cast<unsigned char*>(block);
  for (size_t i = 0; i < nbytes; ++i) bytes[i] = static_cast<unsigned char>(rng());
  auto storage = std::make_shared<Storage>(block, nbytes, kCPU, [](void* owned, void*, size_t) { std::free(owned); },
                                           block);
  return Tensor::from_storage(std::move(storage), Shape{numel}, dtype);
}

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
  return exact_buffer(rng, span + offset, dtype).as_strided(sizes, strides, offset);
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

namespace {

// The instruction sets this CPU has, each made the transposed copy's choice in turn.
std::vector<kernels::cpu::CopySimd> simd_levels() {
  using kernels::cpu::CopySimd;
  std::vector<CopySimd> levels;
  for (CopySimd level : {CopySimd::kScalar, CopySimd::kSse2, CopySimd::kAvx2})
    if (level <= kernels::cpu::best_copy_simd()) levels.push_back(level);
  return levels;
}

// Puts the transposed copy back on the CPU's best instruction set when a test case ends, failed or not.
struct BestSimdAfterwards {
  BestSimdAfterwards() = default;
  BestSimdAfterwards(const BestSimdAfterwards&) = delete;
  BestSimdAfterwards& operator=(const BestSimdAfterwards&) = delete;
  ~BestSimdAfterwards() { kernels::cpu::use_copy_simd(kernels::cpu::best_copy_simd()); }
};

}  // namespace

TEST_CASE("the fast paths at their edges: transposes around every tile and block side, step-2 runs, memcpy runs") {
  std::mt19937_64 rng(33);
  const BestSimdAfterwards restore;
  for (kernels::cpu::CopySimd level : simd_levels()) {
    CAPTURE(int(level));
    REQUIRE(kernels::cpu::use_copy_simd(level) == level);
    for (DType dtype : kAllDTypes) {
      CAPTURE(dtype_name(dtype));
      // Tiles are 8 (f64), 16 (f32) or 32 (2-byte) elements a side, made of blocks of 2, 4 or 8.
      for (int64_t rows : {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 65}) {
        for (int64_t cols : {2, 4, 7, 8, 9, 16, 18, 32, 33, 64}) {
          CAPTURE(rows);
          CAPTURE(cols);
          const Shape sizes{rows, cols};
          // Transposed ([cols, rows] laid out, read as [rows, cols]), stepped by 2, and a narrowed block;
          // each ends on its buffer's last element.
          const Tensor transposed = random_view(rng, sizes, {1, 0}, {1, 1}, {false, false}, 3, dtype);
          const Tensor stepped = random_view(rng, sizes, {0, 1}, {1, 2}, {false, false}, 1, dtype);
          const Tensor rows_apart = random_view(rng, sizes, {0, 1}, {2, 1}, {false, false}, 2, dtype);
          // A transposed source into a transposed destination: the strided tiles, not the buffer.
          const Tensor into = random_view(rng, sizes, {1, 0}, {1, 1}, {false, false}, 0, dtype);
          for (const Tensor& src : {transposed, stepped, rows_apart}) {
            CAPTURE(src.strides().str());
            CHECK(same_elements(kernels::cpu::contiguous(src), src));
          }
          kernels::cpu::strided_copy(into, transposed);
          CHECK(same_elements(into, transposed));
        }
      }
      // A batch of transposes whose inner pair is a whole number of tiles, and one with a row stride
      // past the rows (a transposed slice of a wider buffer).
      const Tensor batched = random_view(rng, Shape{3, 64, 48}, {0, 2, 1}, {1, 1, 1}, {false, false, false}, 0, dtype);
      CHECK(same_elements(kernels::cpu::contiguous(batched), batched));
      // [40, 50] read from a [50, 47] buffer (the last 7 of each row not read), ending on its last element.
      const Tensor wide = exact_buffer(rng, 2 + 39 + 49 * 47 + 1, dtype).as_strided(Shape{40, 50}, Shape{1, 47}, 2);
      CHECK(same_elements(kernels::cpu::contiguous(wide), wide));
    }
  }
  // A step-2 view whose last element is its buffer's last: the shuffle's loads must not read past it
  // (AddressSanitizer's build sees a read one element beyond the allocation).
  for (DType dtype : kAllDTypes) {
    for (int64_t n = 1; n <= 19; ++n) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(n);
      const Tensor base = exact_buffer(rng, 2 * n - 1, dtype);
      const Tensor stepped = base.as_strided(Shape{n}, Shape{2}, 0);
      CHECK(same_elements(kernels::cpu::contiguous(stepped), stepped));
    }
  }
  // A mismatch is refused, naming both tensors.
  const Tensor a = Tensor::empty(Shape{2, 3}, DType::kF32, kCPU), b = Tensor::empty(Shape{3, 2}, DType::kF32, kCPU);
  CHECK_THROWS_AS(kernels::cpu::strided_copy(a, b), UsageError);
}
