// The in-place pointwise ops (relu_, add_, mul_): the out-of-place loop computes into a temporary of
// self's shape and dtype, which is then written into self's memory through self's strides, so a
// non-contiguous view of a larger tensor (a column, a transpose) is written where it lies. One extra pass
// over the output and one temporary, the cost of reusing the checked out-of-place loops; the version
// bump (Note [Version counter]) is the registration's, so every backend's in-place kernel gets it.
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

// Checks what an in-place binary op needs beyond its out-of-place loop: other has self's dtype (the
// registration casts it) and broadcasts to self's shape without growing it (PyTorch's message).
void check_in_place(const char* op, const Tensor& self, const Tensor& result) {
  if (!(result.sizes() == self.sizes())) {
    throw UsageError(std::string(op) + "(): output with shape [" + self.sizes().str() +
                     "] doesn't match the broadcast shape [" + result.sizes().str() + "]");
  }
}

}  // namespace

Tensor relu_inplace(const Tensor& self) {
  STRATA_ZONE(zone, Layer::kLibrary, "relu_ (cpu loop into a temporary, written into self)");
  if (!self.device().is_cpu()) throw UsageError("relu_: CPU kernel got " + self.str());
  const Tensor result = relu(contiguous(self));
  write_into(self, result);
  return self;
}

Tensor add_inplace(const Tensor& self, const Tensor& other, double alpha) {
  STRATA_ZONE(zone, Layer::kLibrary, "add_ (cpu loop into a temporary, written into self)");
  if (!self.device().is_cpu()) throw UsageError("add_: CPU kernel got " + self.str());
  const Tensor result = add(contiguous(self), other, alpha);
  check_in_place("add_", self, result);
  write_into(self, result);
  return self;
}

Tensor mul_inplace(const Tensor& self, const Tensor& other) {
  STRATA_ZONE(zone, Layer::kLibrary, "mul_ (cpu loop into a temporary, written into self)");
  if (!self.device().is_cpu()) throw UsageError("mul_: CPU kernel got " + self.str());
  const Tensor result = mul(contiguous(self), other);
  check_in_place("mul_", self, result);
  write_into(self, result);
  return self;
}

Tensor mul_scalar_inplace(const Tensor& self, double other) {
  STRATA_ZONE(zone, Layer::kLibrary, "mul_.Scalar (cpu loop into a temporary, written into self)");
  if (!self.device().is_cpu()) throw UsageError("mul_.Scalar: CPU kernel got " + self.str());
  write_into(self, mul_scalar(contiguous(self), other));
  return self;
}

}  // namespace strata::kernels::cpu
