// The copies views need (docs/views.md): contiguous() of a strided view, the gradient of slicing
// (written into zeros through the same view), and the sum that undoes expand. Copies move bytes, so they
// serve every dtype as it is stored (f16/bf16 included) without widening; only sum_to computes.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "layers/kernels/cpu/cpu_common.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/error.h"
#include "lib/views.h"
#include "lib/zone.h"

namespace strata::kernels::cpu {
namespace {

// A shape and two stride lists padded in front to 4 dims (size 1), so one loop nest serves every rank.
struct Geometry4 {
  int64_t size[4] = {1, 1, 1, 1};
  int64_t dst[4] = {0, 0, 0, 0};
  int64_t src[4] = {0, 0, 0, 0};
};

Geometry4 geometry(const Shape& sizes, const Shape& dst_strides, const Shape& src_strides) {
  Geometry4 g;
  const int pad = 4 - sizes.ndim;
  for (int i = 0; i < sizes.ndim; ++i) {
    g.size[pad + i] = sizes[i];
    g.dst[pad + i] = dst_strides[i];
    g.src[pad + i] = src_strides[i];
  }
  return g;
}

// The two innermost dims of a transposed source (unit stride on the second-to-last, not on the last):
// copied in square tiles, so that a tile's source lines stay in cache while it is read column by column.
// Without tiles the copy reads one cache line per element, and a power-of-two row stride maps every line
// to the same few cache sets. 8x8 measured fastest on the development VM (512^2 and 1024^2 f32; 32x32
// tiles alias again at those strides): docs/performance.md.
constexpr int64_t kTile = 8;
template <typename T>
void transposed_tiles(const Geometry4& g, T* d, const T* s) {
  for (int64_t c0 = 0; c0 < g.size[2]; c0 += kTile)
    for (int64_t i0 = 0; i0 < g.size[3]; i0 += kTile) {
      const int64_t c1 = std::min(c0 + kTile, g.size[2]), i1 = std::min(i0 + kTile, g.size[3]);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t i = i0; i < i1; ++i) d[c * g.dst[2] + i * g.dst[3]] = s[c * g.src[2] + i * g.src[3]];
    }
}

// dst[i] = src[i] over the index space of `sizes`, each side through its own strides (in elements). The
// innermost dim is the loop the compiler vectorises when both of its strides are 1.
template <typename T>
void strided_copy_loop(const Geometry4& g, T* dst, const T* src) {
  const bool transposed_inner = g.src[3] != 1 && g.src[2] == 1 && g.size[2] > 1 && g.size[3] > 1;
  for (int64_t a = 0; a < g.size[0]; ++a)
    for (int64_t b = 0; b < g.size[1]; ++b) {
      T* db = dst + a * g.dst[0] + b * g.dst[1];
      const T* sb = src + a * g.src[0] + b * g.src[1];
      if (transposed_inner) {
        transposed_tiles(g, db, sb);
        continue;
      }
      for (int64_t c = 0; c < g.size[2]; ++c) {
        T* d = db + c * g.dst[2];
        const T* s = sb + c * g.src[2];
        if (g.dst[3] == 1 && g.src[3] == 1) {
          for (int64_t i = 0; i < g.size[3]; ++i) d[i] = s[i];
        } else {
          for (int64_t i = 0; i < g.size[3]; ++i) d[i * g.dst[3]] = s[i * g.src[3]];
        }
      }
    }
}

// Copies src's elements into dst (same sizes, same dtype, both on the CPU, any strides).
void strided_copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  const Geometry4 g = geometry(src.sizes(), dst.strides(), src.strides());
  switch (element_size(src.dtype())) {
    case 2:
      strided_copy_loop(g, dst.data<uint16_t>(), src.data<uint16_t>());
      break;
    case 4:
      strided_copy_loop(g, dst.data<uint32_t>(), src.data<uint32_t>());
      break;
    case 8:
      strided_copy_loop(g, dst.data<uint64_t>(), src.data<uint64_t>());
      break;
    default:
      throw Error("strided copy: unexpected element size for " + src.str());
  }
}

void check_device(const char* op, const Tensor& t) {
  if (!t.device().is_cpu()) throw UsageError(std::string(op) + ": CPU kernel got " + t.str());
}

}  // namespace

Tensor contiguous(const Tensor& self) {
  check_device("contiguous", self);
  if (self.is_contiguous()) return self;  // nothing to copy, nothing allocated (PyTorch's contiguous)
  STRATA_ZONE(zone, Layer::kLibrary, "strided copy (to contiguous)");
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  strided_copy(out, self);
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
  strided_copy(target, grad_output);
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
