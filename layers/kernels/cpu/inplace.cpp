// The in-place pointwise ops (relu_, add_, mul_, mul_.Scalar, add_.Scalar, sub_, sub_.Scalar, div_, div_.Scalar). The common case, a contiguous f32/f64 self
// and an operand of self's shape that is self itself or does not share its memory, is one loop that
// reads and writes self where it lies, as PyTorch's in-place TensorIterator loops do. Any other case (a
// non-contiguous view, bf16/f16, a broadcast operand, an operand that overlaps self in part) runs the
// out-of-place loop into a temporary of self's shape and dtype, then writes it into self's memory through
// self's strides: one extra pass and one temporary, the price of reusing the checked loops there, and an
// overlapping operand is read whole before anything is written. The version bump (Note [Version counter])
// is the registration's, so every backend's in-place kernel gets it.
#include <cstring>

#include "layers/kernels/cpu/cpu_common.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/error.h"
#include "lib/zone.h"

namespace strata::kernels::cpu {
namespace {

// Copies `result` (contiguous, self's shape and dtype) into self through self's strides.
void write_into(const Tensor& self, const Tensor& result) {
  const size_t es = element_size(self.dtype());
  if (self.is_contiguous()) {
    std::memcpy(self.data_ptr(), result.data_ptr(), result.nbytes());
    return;
  }
  int64_t size[4] = {1, 1, 1, 1}, stride[4] = {0, 0, 0, 0};
  const int pad = 4 - self.dim();
  for (int i = 0; i < self.dim(); ++i) {
    size[pad + i] = self.size(i);
    stride[pad + i] = self.stride(i);
  }
  auto* dst = static_cast<char*>(self.data_ptr());
  const auto* src = static_cast<const char*>(result.data_ptr());
  for (int64_t i0 = 0; i0 < size[0]; ++i0)
    for (int64_t i1 = 0; i1 < size[1]; ++i1)
      for (int64_t i2 = 0; i2 < size[2]; ++i2)
        for (int64_t i3 = 0; i3 < size[3]; ++i3) {
          const int64_t at = i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3];
          std::memcpy(dst + at * static_cast<int64_t>(es), src, es);
          src += es;
        }
}

// self is a CPU tensor that names each of its locations once, as torch's in-place kernels require
// (TensorIterator's internal-overlap check): a dim of size > 1 with stride 0 (expand, a broadcast numpy
// array) is refused, in torch's words and whether or not autograd records the op. Written anyway, its
// elements got the last write's value (ones(1).expand(3).add_(tensor([1, 2, 3])) left 4), a value torch
// never gives and the CUDA kernels refuse. Like torch, only the stride-0 case is checked; an empty self
// writes nothing whatever its strides.
void check_self(const char* op, const Tensor& self) {
  if (!self.device().is_cpu()) throw UsageError(std::string(op) + ": CPU kernel got " + self.str());
  if (self.numel() == 0) return;
  for (int i = 0; i < self.dim(); ++i) {
    if (self.size(i) > 1 && self.stride(i) == 0) {
      throw UsageError(std::string(op) + "(): unsupported operation: more than one element of the written-to tensor " +
                       self.str() + " refers to a single memory location (dim " + std::to_string(i) +
                       " has stride 0, as expand makes); clone() it before the in-place operation");
    }
  }
}

// Checks what an in-place binary op needs beyond its out-of-place loop: other has self's dtype (the
// registration casts it) and broadcasts to self's shape without growing it (PyTorch's message).
void check_in_place(const char* op, const Tensor& self, const Tensor& result) {
  if (!(result.sizes() == self.sizes())) {
    throw UsageError(std::string(op) + "(): output with shape [" + self.sizes().str() +
                     "] doesn't match the broadcast shape [" + result.sizes().str() + "]");
  }
}

// Whether self can be written by the direct loop: contiguous f32/f64, and `other` (if given) of self's
// shape and either self's very memory (x.add_(x)) or another storage (read element i, write element i).
bool direct(const Tensor& self, const Tensor* other) {
  if (!self.is_contiguous() || (self.dtype() != DType::kF32 && self.dtype() != DType::kF64)) return false;
  if (other == nullptr) return true;
  if (!(other->sizes() == self.sizes()) || other->dtype() != self.dtype() || !other->is_contiguous()) return false;
  return other->storage() != self.storage() || other->data_ptr() == self.data_ptr();
}

// p[i] = f(p[i]) or f(p[i], q[i]) over self's elements, in self's dtype (f32 or f64).
template <typename F>
void direct_map(const Tensor& self, F f) {
  const int64_t n = self.numel();
  if (self.dtype() == DType::kF32) {
    float* p = self.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = f(p[i]);
  } else {
    double* p = self.data<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = f(p[i]);
  }
}
template <typename F>
void direct_map2(const Tensor& self, const Tensor& other, F f) {
  const int64_t n = self.numel();
  if (self.dtype() == DType::kF32) {
    float* p = self.data<float>();
    const float* q = other.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = f(p[i], q[i]);
  } else {
    double* p = self.data<double>();
    const double* q = other.data<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = f(p[i], q[i]);
  }
}

}  // namespace

Tensor relu_inplace(const Tensor& self) {
  check_self("relu_", self);
  if (direct(self, nullptr)) {
    STRATA_ZONE(zone, Layer::kLibrary, "relu_ (cpu loop, in place)");
    direct_map(self, [](auto v) { return math::Relu::forward(v); });  // relu's math: NaN, -0.0 kept
    return self;
  }
  STRATA_ZONE(zone, Layer::kLibrary, "relu_ (cpu loop into a temporary, written into self)");
  const Tensor result = relu(contiguous(self));
  write_into(self, result);
  return self;
}

Tensor add_inplace(const Tensor& self, const Tensor& other, double alpha) {
  check_self("add_", self);
  if (direct(self, &other)) {
    STRATA_ZONE(zone, Layer::kLibrary, "add_ (cpu loop, in place)");
    direct_map2(self, other, [alpha](auto a, auto b) { return a + decltype(a)(alpha) * b; });  // add's expression
    return self;
  }
  STRATA_ZONE(zone, Layer::kLibrary, "add_ (cpu loop into a temporary, written into self)");
  const Tensor result = add(contiguous(self), other, alpha);
  check_in_place("add_", self, result);
  write_into(self, result);
  return self;
}

Tensor mul_inplace(const Tensor& self, const Tensor& other) {
  check_self("mul_", self);
  if (direct(self, &other)) {
    STRATA_ZONE(zone, Layer::kLibrary, "mul_ (cpu loop, in place)");
    direct_map2(self, other, [](auto a, auto b) { return a * b; });
    return self;
  }
  STRATA_ZONE(zone, Layer::kLibrary, "mul_ (cpu loop into a temporary, written into self)");
  const Tensor result = mul(contiguous(self), other);
  check_in_place("mul_", self, result);
  write_into(self, result);
  return self;
}

Tensor mul_scalar_inplace(const Tensor& self, double other) {
  check_self("mul_.Scalar", self);
  if (direct(self, nullptr)) {
    STRATA_ZONE(zone, Layer::kLibrary, "mul_.Scalar (cpu loop, in place)");
    direct_map(self, [other](auto v) { return v * decltype(v)(other); });
    return self;
  }
  STRATA_ZONE(zone, Layer::kLibrary, "mul_.Scalar (cpu loop into a temporary, written into self)");
  write_into(self, mul_scalar(contiguous(self), other));
  return self;
}

// The in-place forms Python's +=, -= and /= call. Each direct loop is its out-of-place kernel's expression
// (pointwise.cpp), so the value written is the out-of-place op's, bit for bit.
Tensor add_scalar_inplace(const Tensor& self, double number, double alpha) {
  check_self("add_.Scalar", self);
  const double other = number_in(self.dtype(), number);  // Note [A number added to a half tensor]
  if (direct(self, nullptr)) {
    STRATA_ZONE(zone, Layer::kLibrary, "add_.Scalar (cpu loop, in place)");
    direct_map(self, [other, alpha](auto v) {
      using T = decltype(v);
      return v + T(alpha) * T(other);
    });
    return self;
  }
  STRATA_ZONE(zone, Layer::kLibrary, "add_.Scalar (cpu loop into a temporary, written into self)");
  write_into(self, add_scalar(contiguous(self), other, alpha));
  return self;
}

// a - alpha * b as a + (-alpha) * b, as sub's kernel (and PyTorch's, which calls add's).
Tensor sub_inplace(const Tensor& self, const Tensor& other, double alpha) {
  check_self("sub_", self);
  if (direct(self, &other)) {
    STRATA_ZONE(zone, Layer::kLibrary, "sub_ (cpu loop, in place)");
    direct_map2(self, other, [alpha](auto a, auto b) { return a + decltype(a)(-alpha) * b; });
    return self;
  }
  STRATA_ZONE(zone, Layer::kLibrary, "sub_ (cpu loop into a temporary, written into self)");
  const Tensor result = sub(contiguous(self), other, alpha);
  check_in_place("sub_", self, result);
  write_into(self, result);
  return self;
}

Tensor sub_scalar_inplace(const Tensor& self, double number, double alpha) {
  check_self("sub_.Scalar", self);
  const double other = number_in(self.dtype(), number);  // Note [A number added to a half tensor]
  if (direct(self, nullptr)) {
    STRATA_ZONE(zone, Layer::kLibrary, "sub_.Scalar (cpu loop, in place)");
    direct_map(self, [other, alpha](auto v) {
      using T = decltype(v);
      return v + T(-alpha) * T(other);
    });
    return self;
  }
  STRATA_ZONE(zone, Layer::kLibrary, "sub_.Scalar (cpu loop into a temporary, written into self)");
  write_into(self, sub_scalar(contiguous(self), other, alpha));
  return self;
}

Tensor div_inplace(const Tensor& self, const Tensor& other) {
  check_self("div_", self);
  if (direct(self, &other)) {
    STRATA_ZONE(zone, Layer::kLibrary, "div_ (cpu loop, in place)");
    direct_map2(self, other, [](auto a, auto b) { return a / b; });
    return self;
  }
  STRATA_ZONE(zone, Layer::kLibrary, "div_ (cpu loop into a temporary, written into self)");
  const Tensor result = div(contiguous(self), other);
  check_in_place("div_", self, result);
  write_into(self, result);
  return self;
}

// Divides by the number rounded to self's type, as div.Scalar: not a multiply by its reciprocal.
Tensor div_scalar_inplace(const Tensor& self, double other) {
  check_self("div_.Scalar", self);
  if (direct(self, nullptr)) {
    STRATA_ZONE(zone, Layer::kLibrary, "div_.Scalar (cpu loop, in place)");
    direct_map(self, [other](auto v) { return v / decltype(v)(other); });
    return self;
  }
  STRATA_ZONE(zone, Layer::kLibrary, "div_.Scalar (cpu loop into a temporary, written into self)");
  write_into(self, div_scalar(contiguous(self), other));
  return self;
}

namespace {
// What as_strided_scatter refuses (Note [CopySlices] in layers/ops/copy_slices.h): a region that does not
// match src or reaches outside self. Each message names the figures that were wrong.
void check_scatter_region(const Tensor& self, const Tensor& src, const Shape& size, const Shape& stride,
                          int64_t storage_offset) {
  if (self.dtype() != src.dtype()) {
    throw UsageError("as_strided_scatter: self " + self.str() + " and src " + src.str() + " must have one dtype");
  }
  if (!(size == src.sizes()) || stride.ndim != size.ndim) {
    throw UsageError("as_strided_scatter: src [" + src.sizes().str() + "] must have the region's size [" +
                     size.str() + "], and the stride (" + std::to_string(stride.ndim) +
                     " values) one value per dim of size");
  }
  // The region's furthest element, for a region that holds any, overflow-checked: a stride near 2^63 once
  // wrapped the sum to a small number that passed, and the write landed outside self.
  int64_t last = storage_offset;
  bool wraps = false;
  for (int i = 0; i < size.ndim; ++i) {
    if (stride[i] < 0) throw UsageError("as_strided_scatter: strides must be non-negative, got " + stride.str());
    int64_t reach = 0;
    wraps = wraps || (size[i] > 0 && (__builtin_mul_overflow(size[i] - 1, stride[i], &reach) ||
                                      __builtin_add_overflow(last, reach, &last)));
  }
  if (src.numel() > 0 && (storage_offset < 0 || wraps || last >= self.numel())) {
    throw UsageError("as_strided_scatter: the region (size [" + size.str() + "], stride [" + stride.str() +
                     "], offset " + std::to_string(storage_offset) + ") reaches element " +
                     (wraps ? std::string("2^63 or beyond") : std::to_string(last)) + " of self [" +
                     self.sizes().str() + "], which has " + std::to_string(self.numel()));
  }
}
}  // namespace

Tensor as_strided_scatter(const Tensor& self, const Tensor& src, const Shape& size, const Shape& stride,
                          int64_t storage_offset) {
  check_cpu_input("as_strided_scatter", self);
  check_cpu_input("as_strided_scatter", src);
  check_scatter_region(self, src, size, stride, storage_offset);
  STRATA_ZONE(zone, Layer::kLibrary, "copy + strided write (as_strided_scatter)");
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  std::memcpy(out.data_ptr(), self.data_ptr(), self.nbytes());
  write_into(out.as_strided(size, stride, storage_offset), src);  // any dtype: the write copies bytes
  return out;
}

}  // namespace strata::kernels::cpu
