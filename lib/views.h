// The view operators' kernels: new sizes, strides and storage offset over the same Storage (Note [Views
// share storage] in lib/tensor.h). They move no data and know no device, so one function serves the CPU
// and the CUDA key alike; that is why they live in lib, beside the Tensor whose header they compute, and
// not in a backend. Each checks its arguments against the tensor's shape and throws a UsageError naming
// both (IndexRangeError for a dim or index out of range), as PyTorch's view functions do.
#pragma once

#include <cstdint>
#include <optional>

#include "lib/tensor.h"

namespace strata::views {

// dim in [-ndim, ndim) (ndim + 1 for unsqueeze, which may add a dim at the end), wrapped to [0, ndim).
int64_t wrap_dim(const char* op, int64_t dim, int ndim, const Tensor& self);

Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& self);  // a 0-, 1- or 2-D tensor; transpose(0, 1) of a 2-D one
Tensor permute(const Tensor& self, const Shape& dims);
// `size` may hold one -1 (inferred from the element count). Refused when the strides do not allow a view
// (reshape copies instead).
Tensor view(const Tensor& self, const Shape& size);
Tensor expand(const Tensor& self, const Shape& size);  // -1 keeps a size; new dims in front
Tensor narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& self, int64_t dim, int64_t index);
// Python's slice semantics: start and end clamped to the size (negative counts from the end), step > 0.
Tensor slice(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step);
Tensor unsqueeze(const Tensor& self, int64_t dim);
Tensor squeeze(const Tensor& self, int64_t dim);  // a dim of size 1 is removed; any other is kept, as torch

// `size` with a -1 replaced so that the element count is self's; refused when no size fits.
Shape infer_size(const char* op, const Shape& size, const Tensor& self);
// The strides a view of `self` with sizes `size` needs (PyTorch's computeStride), or none when the
// memory layout does not allow one and a copy is needed (reshape).
std::optional<Shape> view_strides(const Tensor& self, const Shape& size);

}  // namespace strata::views
