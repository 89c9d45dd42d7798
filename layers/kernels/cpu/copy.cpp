// The copies views need (docs/views.md): contiguous() of a strided view, the gradient of slicing
// (written into zeros through the same view), and the sum that undoes expand. Copies move bytes, so they
// serve every dtype as it is stored (f16/bf16 included) without widening; only sum_to computes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include "layers/kernels/cpu/copy_transpose.h"
#include "layers/kernels/cpu/cpu_common.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/error.h"
#include "lib/parallel.h"
#include "lib/views.h"
#include "lib/zone.h"

namespace strata::kernels::cpu {
namespace {

// Note [The strided copy]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The copy behind contiguous() should run at memory speed (issue 31: within 1.5x of memcpy of the same
// bytes; docs/performance.md has the figures). The index space is first simplified: size-1 dims are
// dropped and a dim merged into its outer neighbour where, on both sides, one step of the outer dim is a
// whole run of the inner one (a contiguous block of a view becomes one long dim). Then the innermost dim
// decides the loop:
//   - unit stride on both sides: memcpy per run (one memcpy for a contiguous block);
//   - a transposed pair (the innermost dim strided in the source, the one outside it unit-stride): tiles
//     of one cache line by one cache line, SSE or (where the CPU has it) AVX2 transposes into a buffer
//     (copy_transpose.cpp, Note [The transposed copy]);
//   - a stepped source (unit stride in the destination): a tight loop, with an SSE shuffle for step 2;
//   - anything else: the plain loop.
// Elements are moved as their bits (uint16/32/64), so one loop serves every dtype, NaN payloads included.
struct CopyDims {
  int count = 0;  // dims after simplifying, outermost first; 0 means one element
  int64_t size[4] = {1, 1, 1, 1};
  int64_t dst[4] = {0, 0, 0, 0};
  int64_t src[4] = {0, 0, 0, 0};
};

CopyDims simplified(const Shape& sizes, const Shape& dst_strides, const Shape& src_strides) {
  CopyDims g;
  for (int i = 0; i < sizes.ndim; ++i) {
    if (sizes[i] == 1) continue;
    const int last = g.count - 1;
    if (last >= 0 && g.dst[last] == dst_strides[i] * sizes[i] && g.src[last] == src_strides[i] * sizes[i]) {
      g.size[last] *= sizes[i];
      g.dst[last] = dst_strides[i];
      g.src[last] = src_strides[i];
      continue;
    }
    g.size[g.count] = sizes[i];
    g.dst[g.count] = dst_strides[i];
    g.src[g.count] = src_strides[i];
    ++g.count;
  }
  return g;
}

// d[i] = s[i * step]: a stepped source into a contiguous run.
template <typename T>
void stepped_run(int64_t n, int64_t step, T* __restrict d, const T* __restrict s) {
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, uint32_t>) {
    if (step == 2) {
      // Each pair of loads reads s[2i .. 2i+7] for the four elements s[2i], ..., s[2i+6]: the last of them,
      // s[2i+7], lies past the run's last element s[2n-2] unless i + 5 <= n, and may be past the end of the
      // allocation (a step-2 view ending on its buffer's last element). The tail takes the scalar loop.
      for (; i + 5 <= n; i += 4) {
        const __m128 a = _mm_loadu_ps(reinterpret_cast<const float*>(s + 2 * i));
        const __m128 b = _mm_loadu_ps(reinterpret_cast<const float*>(s + 2 * i + 4));
        _mm_storeu_ps(reinterpret_cast<float*>(d + i), _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
      }
    }
  }
#endif
  for (; i < n; ++i) d[i] = s[i * step];
}

// The innermost dim's run, as Note [The strided copy] picks its loop.
template <typename T>
void copy_run(int64_t n, int64_t dst_step, int64_t src_step, T* __restrict d, const T* __restrict s) {
  if (dst_step == 1 && src_step == 1) {
    std::memcpy(d, s, static_cast<size_t>(n) * sizeof(T));
  } else if (dst_step == 1) {
    stepped_run(n, src_step, d, s);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i * dst_step] = s[i * src_step];
  }
}

// dst[i] = src[i] over the index space, each side through its own strides (in elements).
template <typename T>
void strided_copy_loop(const CopyDims& g, T* dst, const T* src) {
  if (g.count == 0) {
    *dst = *src;
    return;
  }
  const int inner = g.count - 1;
  // A transposed pair takes the two innermost dims; the rest are outer loops.
  const bool transposed = g.count >= 2 && g.src[inner] != 1 && g.src[inner - 1] == 1;
  const int outer = transposed ? g.count - 2 : g.count - 1;
  int64_t index[4] = {0, 0, 0, 0};
  for (;;) {
    int64_t d_at = 0, s_at = 0;
    for (int k = 0; k < outer; ++k) {
      d_at += index[k] * g.dst[k];
      s_at += index[k] * g.src[k];
    }
    if (transposed) {
      transposed_copy(int(sizeof(T)), g.size[inner - 1], g.size[inner], g.dst[inner - 1], g.dst[inner],
                      g.src[inner - 1], g.src[inner], dst + d_at, src + s_at);
    } else {
      copy_run(g.size[inner], g.dst[inner], g.src[inner], dst + d_at, src + s_at);
    }
    int k = outer - 1;
    for (; k >= 0 && ++index[k] == g.size[k]; --k) index[k] = 0;  // the next outer index, row-major
    if (k < 0) return;
  }
}

// The copy split across the intra-op threads (Note [Intra-op threads] in lib/parallel.h) by ranges of
// its outermost dim, each range copied as the whole is (a single run is split into shorter runs, a
// transposed pair into fewer rows of tiles).
template <typename T>
void parallel_copy(const CopyDims& g, T* dst, const T* src, int64_t numel) {
  if (g.count == 0) {
    *dst = *src;
    return;
  }
  const int64_t per_index = std::max<int64_t>(1, numel / g.size[0]);
  const int64_t grain = std::max<int64_t>(1, parallel::kGrainSize / per_index);
  parallel::parallel_for(0, g.size[0], grain, [&](int64_t b, int64_t e) {
    CopyDims part = g;
    part.size[0] = e - b;
    strided_copy_loop(part, dst + b * g.dst[0], src + b * g.src[0]);
  });
}

// Copies src's elements into dst (same sizes, same dtype, both on the CPU, any strides).
void copy_elements(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  const CopyDims g = simplified(src.sizes(), dst.strides(), src.strides());
  switch (element_size(src.dtype())) {
    case 2:
      parallel_copy(g, dst.data<uint16_t>(), src.data<uint16_t>(), dst.numel());
      break;
    case 4:
      parallel_copy(g, dst.data<uint32_t>(), src.data<uint32_t>(), dst.numel());
      break;
    case 8:
      parallel_copy(g, dst.data<uint64_t>(), src.data<uint64_t>(), dst.numel());
      break;
    default:
      throw Error("strided copy: unexpected element size for " + src.str());
  }
}

void check_device(const char* op, const Tensor& t) {
  if (!t.device().is_cpu()) throw UsageError(std::string(op) + ": CPU kernel got " + t.str());
}

}  // namespace

void strided_copy(const Tensor& dst, const Tensor& src) {
  check_device("strided_copy", dst);
  check_device("strided_copy", src);
  if (!(dst.sizes() == src.sizes()) || dst.dtype() != src.dtype()) {
    throw UsageError("strided_copy: dst " + dst.str() + " and src " + src.str() + " must have one shape and one dtype");
  }
  copy_elements(dst, src);
}

Tensor contiguous(const Tensor& self) {
  check_device("contiguous", self);
  if (self.is_contiguous()) return self;  // nothing to copy, nothing allocated (PyTorch's contiguous)
  STRATA_ZONE(zone, Layer::kLibrary, "strided copy (to contiguous)");
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  copy_elements(out, self);
  return out;
}

Tensor slice_backward(const Tensor& grad_output, const Tensor& self, int64_t dim, int64_t start,
                      int64_t step) {
  check_cpu_input("slice_backward", grad_output);
  check_device("slice_backward", self);
  if (grad_output.dtype() != self.dtype()) {
    throw UsageError("slice_backward: grad_output " + grad_output.str() + " and self " + self.str() +
                     " must have one dtype");
  }
  STRATA_ZONE(zone, Layer::kLibrary, "zero fill + strided copy (slice gradient)");
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  std::memset(out.data_ptr(), 0, out.nbytes());  // all-zero bits are +0.0 in every float format strata has
  const int64_t d = views::wrap_dim("slice_backward", dim, self.dim(), self);
  const int64_t len = grad_output.dim() == self.dim() ? grad_output.size(static_cast<int>(d)) : -1;
  const Tensor target = views::slice(out, dim, start, start + len * step, step);
  if (!(target.sizes() == grad_output.sizes())) {
    throw UsageError("slice_backward: grad_output of size [" + grad_output.sizes().str() +
                     "] does not fit slice(dim " + std::to_string(dim) + ", start " + std::to_string(start) +
                     ", step " + std::to_string(step) + ") of self [" + self.sizes().str() + "]");
  }
  copy_elements(target, grad_output);
  return out;
}

Tensor sum_to(const Tensor& grad_output, const Tensor& self) {
  if (is_half(grad_output.dtype()))
    return round_from_f32(sum_to(widen_to_f32(grad_output), self), grad_output.dtype());
  check_cpu_input("sum_to", grad_output);
  check_device("sum_to", self);
  const Shape& g = grad_output.sizes();
  const Shape& s = self.sizes();
  const int lead = g.ndim - s.ndim;
  bool fits = lead >= 0;
  for (int i = 0; fits && i < s.ndim; ++i) fits = s[i] == g[lead + i] || s[i] == 1;
  if (!fits)
    throw UsageError("sum_to: grad_output [" + g.str() + "] does not expand from self [" + s.str() + "]");
  STRATA_ZONE(zone, Layer::kLibrary, "sum_to (loop, f64 accumulator)");
  // Where each grad element lands in the output: its coordinate in the dims self keeps, 0 where self
  // broadcast (size 1) or had no dim; accumulated in double, then stored once.
  Shape out_strides;
  out_strides.ndim = g.ndim;
  int64_t stride = 1;
  for (int i = g.ndim - 1; i >= 0; --i) {
    const int own = i - lead;
    out_strides[i] = own < 0 || s[own] == 1 ? 0 : stride;
    if (own >= 0) stride *= s[own];
  }
  std::vector<double> acc(static_cast<size_t>(s.numel()), 0.0);
  Shape idx;
  idx.ndim = g.ndim;
  const int64_t n = grad_output.numel();
  for (int64_t e = 0; e < n; ++e) {
    int64_t at = 0;
    for (int i = 0; i < g.ndim; ++i) at += idx[i] * out_strides[i];
    acc[static_cast<size_t>(at)] += grad_output.dtype() == DType::kF32 ? double(grad_output.data<float>()[e])
                                                                       : grad_output.data<double>()[e];
    for (int i = g.ndim - 1; i >= 0 && ++idx[i] == g[i]; --i) idx[i] = 0;  // the next index, row-major
  }
  Tensor out = Tensor::empty(s, grad_output.dtype(), self.device());
  for (size_t i = 0; i < acc.size(); ++i) {
    if (out.dtype() == DType::kF32)
      out.data<float>()[i] = static_cast<float>(acc[i]);
    else
      out.data<double>()[i] = acc[i];
  }
  return out;
}

}  // namespace strata::kernels::cpu
