#include "lib/views.h"

#include <algorithm>
#include <string>

#include "lib/error.h"
#include "lib/zone.h"

namespace strata::views {
namespace {

std::string shape_text(const Shape& s) { return "[" + s.str() + "]"; }

std::string list_text(const Shape& s) {
  std::string out = "(";
  for (int i = 0; i < s.ndim; ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.ndim == 1 ? ",)" : ")");
}

[[noreturn]] void refuse(const char* op, const Tensor& self, const std::string& what) {
  throw UsageError(std::string(op) + "(): " + what + " (tensor of size " + shape_text(self.sizes()) + ")");
}

// The header every view returns: Library work, named so that the row says no data moved. Its element
// count must fit in int64, as torch's safe_compute_numel checks: ones(1).expand(2**62, 4) holds 2^64
// elements, a count that wrapped to 0 (Note [One byte count] counts the bytes when one is materialised).
Tensor make_view(const char* op, const Tensor& self, const Shape& sizes, const Shape& strides, int64_t offset) {
  int64_t numel = 1;
  for (int i = 0; i < sizes.ndim; ++i) {
    if (__builtin_mul_overflow(numel, sizes[i], &numel)) {
      refuse(op, self, "the result's size " + list_text(sizes) + " holds more elements than fit in 64 bits");
    }
  }
  return self.as_strided(sizes, strides, offset);
}

}  // namespace

int64_t wrap_dim(const char* op, int64_t dim, int ndim, const Tensor& self) {
  const int64_t n = ndim == 0 ? 1 : ndim;  // a 0-d tensor takes dim 0 or -1, as torch
  if (dim < -n || dim >= n) {
    throw IndexRangeError(std::string(op) + "(): dim " + std::to_string(dim) +
                          " is out of range for a tensor of size " + shape_text(self.sizes()) +
                          " (expected a dim in [" + std::to_string(-n) + ", " + std::to_string(n - 1) + "])");
  }
  return dim < 0 ? dim + n : dim;
}

Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  STRATA_ZONE(zone, Layer::kLibrary, "transpose (view: strides swapped, no data moved)");
  const int nd = self.dim();
  const auto a = static_cast<int>(wrap_dim("transpose", dim0, nd, self));
  const auto b = static_cast<int>(wrap_dim("transpose", dim1, nd, self));
  if (nd == 0) return make_view("transpose", self, self.sizes(), self.strides(), self.storage_offset());
  Shape sizes = self.sizes(), strides = self.strides();
  std::swap(sizes[a], sizes[b]);
  std::swap(strides[a], strides[b]);
  return make_view("transpose", self, sizes, strides, self.storage_offset());
}

Tensor t(const Tensor& self) {
  if (self.dim() > 2)
    refuse("t", self, "expects a tensor with at most 2 dimensions, got " + std::to_string(self.dim()));
  STRATA_ZONE(zone, Layer::kLibrary, "t (view: strides swapped, no data moved)");
  if (self.dim() < 2) return make_view("t", self, self.sizes(), self.strides(), self.storage_offset());
  Shape sizes = self.sizes(), strides = self.strides();
  std::swap(sizes[0], sizes[1]);
  std::swap(strides[0], strides[1]);
  return make_view("t", self, sizes, strides, self.storage_offset());
}

Tensor permute(const Tensor& self, const Shape& dims) {
  STRATA_ZONE(zone, Layer::kLibrary, "permute (view: strides reordered, no data moved)");
  const int nd = self.dim();
  if (dims.ndim != nd) {
    refuse("permute", self,
           "dims " + list_text(dims) + " must name each of the " + std::to_string(nd) + " dims once");
  }
  Shape sizes = self.sizes(), strides = self.strides();
  bool seen[Shape::kMaxDims] = {};
  for (int i = 0; i < nd; ++i) {
    const auto d = static_cast<int>(wrap_dim("permute", dims[i], nd, self));
    if (seen[d])
      refuse("permute", self, "dims " + list_text(dims) + " name dim " + std::to_string(d) + " twice");
    seen[d] = true;
    sizes[i] = self.size(d);
    strides[i] = self.stride(d);
  }
  return make_view("permute", self, sizes, strides, self.storage_offset());
}

Shape infer_size(const char* op, const Shape& size, const Tensor& self) {
  Shape out = size;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < size.ndim; ++i) {
    if (size[i] == -1) {
      if (infer >= 0) refuse(op, self, "shape " + list_text(size) + " has more than one -1");
      infer = i;
    } else if (size[i] < 0) {
      refuse(op, self, "shape " + list_text(size) + " has a negative size " + std::to_string(size[i]));
    } else if (__builtin_mul_overflow(known, size[i], &known)) {
      refuse(op, self, "shape " + list_text(size) + " holds more elements than fit in 64 bits");
    }
  }
  const int64_t numel = self.numel();
  if (infer >= 0 && known != 0 && numel % known == 0) {
    out[infer] = numel / known;
  } else if (infer >= 0 || known != numel) {
    refuse(op, self, "shape " + list_text(size) + " is invalid for input of size " + std::to_string(numel));
  }
  return out;
}

std::optional<Shape> view_strides(const Tensor& self, const Shape& size) {
  const Shape& old_sizes = self.sizes();
  const Shape& old_strides = self.strides();
  Shape strides;
  strides.ndim = size.ndim;
  if (self.numel() == 0 || old_sizes.ndim == 0 || self.is_contiguous()) {
    int64_t s = 1;  // any layout holds a contiguous view of a contiguous (or empty, or 0-d) tensor
    for (int i = size.ndim - 1; i >= 0; --i) {
      strides[i] = s;
      s *= std::max<int64_t>(size[i], 1);
    }
    if (self.numel() == 0 || self.is_contiguous() || old_sizes.ndim == 0) return strides;
  }
  // PyTorch's computeStride: old dims are merged into chunks that are contiguous among themselves; each
  // chunk must be exactly covered by a run of new dims, which then take strides inside the chunk.
  int view_d = size.ndim - 1;
  int64_t chunk_base_stride = old_strides[old_sizes.ndim - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  for (int tensor_d = old_sizes.ndim - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];
    if (tensor_d == 0 ||
        (old_sizes[tensor_d - 1] != 1 && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || size[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= size[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

Tensor view(const Tensor& self, const Shape& size) {
  STRATA_ZONE(zone, Layer::kLibrary, "view (view: new sizes and strides, no data moved)");
  const Shape sizes = infer_size("view", size, self);
  const std::optional<Shape> strides = view_strides(self, sizes);
  if (!strides) {
    refuse("view", self,
           "shape " + list_text(size) + " needs a copy: the strides " + shape_text(self.strides()) +
               " span more than one contiguous run of memory (use reshape, or contiguous() first)");
  }
  return make_view("view", self, sizes, *strides, self.storage_offset());
}

Tensor expand(const Tensor& self, const Shape& size) {
  STRATA_ZONE(zone, Layer::kLibrary, "expand (view: stride 0 where broadcast, no data moved)");
  const int nd = self.dim();
  if (size.ndim < nd) {
    refuse("expand", self,
           "the size " + list_text(size) + " has fewer dims than the tensor (" + std::to_string(nd) + ")");
  }
  Shape sizes, strides;
  sizes.ndim = strides.ndim = size.ndim;
  for (int i = size.ndim - 1; i >= 0; --i) {
    const int own = i - (size.ndim - nd);  // the tensor's dim this one lines up with, from the right
    if (own < 0) {
      if (size[i] < 0)
        refuse("expand", self, "the size " + list_text(size) + " has -1 or a negative size for a new dim");
      sizes[i] = size[i];
      strides[i] = 0;
      continue;
    }
    const int64_t want = size[i] == -1 ? self.size(own) : size[i];
    if (want != self.size(own) && self.size(own) != 1) {
      refuse("expand", self,
             "the size " + list_text(size) + " cannot expand dim " + std::to_string(own) + " of size " +
                 std::to_string(self.size(own)) + " to " + std::to_string(want) +
                 " (only a dim of size 1 expands)");
    }
    if (want < 0) refuse("expand", self, "the size " + list_text(size) + " has a negative size");
    sizes[i] = want;
    strides[i] = want == self.size(own) ? self.stride(own) : 0;
  }
  return make_view("expand", self, sizes, strides, self.storage_offset());
}

Tensor slice(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step) {
  STRATA_ZONE(zone, Layer::kLibrary, "slice (view: offset and stride, no data moved)");
  if (self.dim() == 0) refuse("slice", self, "cannot slice a 0-d tensor");
  const auto d = static_cast<int>(wrap_dim("slice", dim, self.dim(), self));
  if (step <= 0) refuse("slice", self, "step must be greater than zero, got " + std::to_string(step));
  const int64_t n = self.size(d);
  auto clamp = [n](int64_t i) { return i < 0 ? std::max<int64_t>(i + n, 0) : std::min(i, n); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  Shape sizes = self.sizes(), strides = self.strides();
  // ceil((end - start) / step) without end - start + step - 1, which wraps for a step near 2^63.
  sizes[d] = end == start ? 0 : (end - start - 1) / step + 1;
  // A step past the size takes one element, whose stride means nothing: torch's stride * step wraps
  // there, strata keeps the stride it has. A wrapping stride of more than one element is refused.
  if (__builtin_mul_overflow(self.stride(d), step, &strides[d])) {
    if (sizes[d] > 1) {
      refuse("slice", self, "step " + std::to_string(step) + " times the stride " + std::to_string(self.stride(d)) +
                                " of dim " + std::to_string(d) + " does not fit in 64 bits");
    }
    strides[d] = self.stride(d);
  }
  return make_view("slice", self, sizes, strides, self.storage_offset() + start * self.stride(d));
}

Tensor narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  if (self.dim() == 0) refuse("narrow", self, "cannot narrow a 0-d tensor");
  const auto d = static_cast<int>(wrap_dim("narrow", dim, self.dim(), self));
  const int64_t n = self.size(d);
  if (start < -n || start > n) {
    throw IndexRangeError("narrow(): start " + std::to_string(start) + " is out of range for dim " +
                          std::to_string(d) + " of size " + std::to_string(n) + " (tensor of size " +
                          shape_text(self.sizes()) + ")");
  }
  if (start < 0) start += n;
  // length > n - start, not start + length > n: that sum wraps for a length near 2^63 (start is in [0, n]).
  if (length < 0 || length > n - start) {
    refuse("narrow", self,
           "start " + std::to_string(start) + " + length " + std::to_string(length) + " exceeds dim " +
               std::to_string(d) + " of size " + std::to_string(n));
  }
  STRATA_ZONE(zone, Layer::kLibrary, "narrow (view: offset and size, no data moved)");
  Shape sizes = self.sizes();
  sizes[d] = length;
  return make_view("narrow", self, sizes, self.strides(), self.storage_offset() + start * self.stride(d));
}

Tensor select(const Tensor& self, int64_t dim, int64_t index) {
  if (self.dim() == 0) refuse("select", self, "cannot select on a 0-d tensor");
  const auto d = static_cast<int>(wrap_dim("select", dim, self.dim(), self));
  const int64_t n = self.size(d);
  if (index < -n || index >= n) {
    throw IndexRangeError("select(): index " + std::to_string(index) + " is out of range for dim " +
                          std::to_string(d) + " of size " + std::to_string(n) + " (tensor of size " +
                          shape_text(self.sizes()) + ")");
  }
  if (index < 0) index += n;
  STRATA_ZONE(zone, Layer::kLibrary, "select (view: offset, one dim fewer, no data moved)");
  Shape sizes, strides;
  for (int i = 0; i < self.dim(); ++i) {
    if (i == d) continue;
    sizes[sizes.ndim++] = self.size(i);
    strides[strides.ndim++] = self.stride(i);
  }
  return make_view("select", self, sizes, strides, self.storage_offset() + index * self.stride(d));
}

Tensor unsqueeze(const Tensor& self, int64_t dim) {
  if (self.dim() >= Shape::kMaxDims) {
    refuse("unsqueeze", self,
           "strata tensors have at most " + std::to_string(Shape::kMaxDims) + " dimensions");
  }
  // One more place than dims: unsqueeze(-1) and unsqueeze(ndim) add a dim at the end.
  const int64_t n = self.dim() + 1;
  if (dim < -n || dim >= n) {
    throw IndexRangeError("unsqueeze(): dim " + std::to_string(dim) +
                          " is out of range for a tensor of size " + shape_text(self.sizes()) +
                          " (expected a dim in [" + std::to_string(-n) + ", " + std::to_string(n - 1) + "])");
  }
  const auto d = static_cast<int>(dim < 0 ? dim + n : dim);
  STRATA_ZONE(zone, Layer::kLibrary, "unsqueeze (view: a dim of size 1, no data moved)");
  Shape sizes, strides;
  sizes.ndim = strides.ndim = self.dim() + 1;
  for (int i = 0, j = 0; i < sizes.ndim; ++i) {
    if (i == d) {
      sizes[i] = 1;
      // Any stride is valid for a dim of size 1; PyTorch's choice keeps a contiguous tensor contiguous.
      strides[i] = d < self.dim() ? self.stride(d) * self.size(d) : 1;
      continue;
    }
    sizes[i] = self.size(j);
    strides[i] = self.stride(j);
    ++j;
  }
  return make_view("unsqueeze", self, sizes, strides, self.storage_offset());
}

Tensor squeeze(const Tensor& self, int64_t dim) {
  const auto d = static_cast<int>(wrap_dim("squeeze", dim, self.dim(), self));
  STRATA_ZONE(zone, Layer::kLibrary, "squeeze (view: a dim of size 1 removed, no data moved)");
  if (self.dim() == 0 || self.size(d) != 1)
    return make_view("squeeze", self, self.sizes(), self.strides(), self.storage_offset());
  Shape sizes, strides;
  for (int i = 0; i < self.dim(); ++i) {
    if (i == d) continue;
    sizes[sizes.ndim++] = self.size(i);
    strides[strides.ndim++] = self.stride(i);
  }
  return make_view("squeeze", self, sizes, strides, self.storage_offset());
}

}  // namespace strata::views
