// relu, gelu and add as plain loops over contiguous memory: with -O2/-O3 and __restrict the compiler emits
// vector code, which is all a memory-bound pointwise op needs on the CPU.
#include <cmath>
#include <utility>

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

// The zone's name: the loop, and for half types that it ran on f32 copies (Note [Half types on the CPU]).
const char* loop_name(DType dtype, const char* native, const char* bf16, const char* f16) {
  return dtype == DType::kBF16 ? bf16 : dtype == DType::kF16 ? f16 : native;
}

}  // namespace

Tensor relu(const Tensor& self) {
  STRATA_ZONE(zone, Layer::kLibrary, loop_name(self.dtype(), "relu (cpu loop)", "relu (cpu loop, bf16 widened to f32)",
                                                "relu (cpu loop, f16 widened to f32)"));
  check_cpu_input("relu", self);
  const Tensor x = widen_to_f32(self);
  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (x.dtype() == DType::kF32) {
    relu_loop(x.data<float>(), out.data<float>(), x.numel());
  } else {
    relu_loop(x.data<double>(), out.data<double>(), x.numel());
  }
  return round_from_f32(std::move(out), self.dtype());
}

Tensor gelu(const Tensor& self) {
  STRATA_ZONE(zone, Layer::kLibrary, loop_name(self.dtype(), "gelu (cpu loop)", "gelu (cpu loop, bf16 widened to f32)",
                                                "gelu (cpu loop, f16 widened to f32)"));
  check_cpu_input("gelu", self);
  const Tensor x = widen_to_f32(self);
  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (x.dtype() == DType::kF32) {
    gelu_loop(x.data<float>(), out.data<float>(), x.numel());
  } else {
    gelu_loop(x.data<double>(), out.data<double>(), x.numel());
  }
  return round_from_f32(std::move(out), self.dtype());
}

Tensor add(const Tensor& self, const Tensor& other, double alpha) {
  STRATA_ZONE(zone, Layer::kLibrary, loop_name(self.dtype(), "add (cpu loop)", "add (cpu loop, bf16 widened to f32)",
                                                "add (cpu loop, f16 widened to f32)"));
  op_shapes::check_operands("add", check_cpu_input, self, other);
  const Tensor a = widen_to_f32(self), b = widen_to_f32(other);
  Tensor out = Tensor::empty(op_shapes::elementwise(self.sizes(), other.sizes()), a.dtype(), self.device());
  if (a.dtype() == DType::kF32) {
    add_loop(a.data<float>(), b.data<float>(), static_cast<float>(alpha), out.data<float>(), a.numel());
  } else {
    add_loop(a.data<double>(), b.data<double>(), alpha, out.data<double>(), a.numel());
  }
  return round_from_f32(std::move(out), self.dtype());
}

}  // namespace strata::kernels::cpu
