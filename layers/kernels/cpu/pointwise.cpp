// relu, gelu and add as plain loops over contiguous memory: with -O2/-O3 and __restrict the compiler emits
// vector code, which is all a memory-bound pointwise op needs on the CPU.
#include <cmath>

#include "layers/kernels/cpu/cpu_common.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/op_shapes.h"
#include "lib/zone.h"

namespace strata::kernels::cpu {
namespace {

template <typename T>
void relu_loop(const T* __restrict in, T* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > T(0) ? in[i] : T(0);
}

template <typename T>
void add_loop(const T* __restrict a, const T* __restrict b, T alpha, T* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + alpha * b[i];
}

// The exact form, as PyTorch's default (approximate='none'): x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)).
// erf does not vectorise with glibc; gelu is still memory-bound at the sizes strata traces.
template <typename T>
void gelu_loop(const T* __restrict in, T* __restrict out, int64_t n) {
  constexpr T kInvSqrt2 = T(0.70710678118654752440);
  for (int64_t i = 0; i < n; ++i) out[i] = T(0.5) * in[i] * (T(1) + std::erf(in[i] * kInvSqrt2));
}

}  // namespace

Tensor relu(const Tensor& self) {
  STRATA_ZONE(zone, Layer::kLibrary, "relu (cpu loop)");
  check_cpu_input("relu", self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  if (self.dtype() == DType::kF32) {
    relu_loop(self.data<float>(), out.data<float>(), self.numel());
  } else {
    relu_loop(self.data<double>(), out.data<double>(), self.numel());
  }
  return out;
}

Tensor gelu(const Tensor& self) {
  STRATA_ZONE(zone, Layer::kLibrary, "gelu (cpu loop)");
  check_cpu_input("gelu", self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  if (self.dtype() == DType::kF32) {
    gelu_loop(self.data<float>(), out.data<float>(), self.numel());
  } else {
    gelu_loop(self.data<double>(), out.data<double>(), self.numel());
  }
  return out;
}

Tensor add(const Tensor& self, const Tensor& other, double alpha) {
  STRATA_ZONE(zone, Layer::kLibrary, "add (cpu loop)");
  op_shapes::check_operands("add", check_cpu_input, self, other);
  Tensor out = Tensor::empty(op_shapes::elementwise(self.sizes(), other.sizes()), self.dtype(), self.device());
  if (self.dtype() == DType::kF32) {
    add_loop(self.data<float>(), other.data<float>(), static_cast<float>(alpha), out.data<float>(),
             self.numel());
  } else {
    add_loop(self.data<double>(), other.data<double>(), alpha, out.data<double>(), self.numel());
  }
  return out;
}

}  // namespace strata::kernels::cpu
