// Private to layers/ops: what the two halves of the kernel registration share.
#pragma once

#include <type_traits>

#include "layers/dispatch/dispatch.h"
#include "layers/ops/operators.h"
#include "lib/tensor.h"

namespace strata::ops {

// Backend kernels have plain signatures (they never redispatch); this adapts one to the table's
// signature, which starts with the key set, at compile time.
template <auto Kernel>
struct DropKeySet;
template <typename... Args, Tensor (*Kernel)(Args...)>
struct DropKeySet<Kernel> {
  static Tensor fn(DispatchKeySet, Args... args) { return Kernel(args...); }
};

// A backend kernel whose tensor inputs must satisfy Accepts (contiguous, say): an input that does not is
// passed through Fix (contiguous(), a dispatcher call) first. Note [Contiguous inputs] in
// layers/ops/operators.h. The common case, every input accepted, costs one check per tensor and no copy
// of a Tensor handle.
template <auto Accepts, typename T>
bool accepted(const T& v) {
  if constexpr (std::is_same_v<T, Tensor>) {
    return Accepts(v);
  } else {
    return true;
  }
}
template <auto Accepts, auto Fix, typename T>
T prepared(const T& v) {
  if constexpr (std::is_same_v<T, Tensor>) {
    return Accepts(v) ? v : Fix(v);
  } else {
    return v;
  }
}
template <auto Kernel, auto Accepts, auto Fix>
struct WithInputs;
template <typename... Args, Tensor (*Kernel)(Args...), auto Accepts, auto Fix>
struct WithInputs<Kernel, Accepts, Fix> {
  static Tensor fn(DispatchKeySet, Args... args) {
    if ((accepted<Accepts>(args) && ...)) [[likely]]
      return Kernel(args...);
    return Kernel(prepared<Accepts, Fix>(args)...);
  }
};

// The backend kernel of an in-place op as the table holds it, on every backend (Note [In-place operators]):
// the other tensors cast to self's dtype and made contiguous (calls of their own), self passed as it lies
// (the kernel writes through its strides), and the version of self's storage bumped once the write is
// queued, so the CPU and the GPU count writes alike, under no_grad too.
template <typename T>
T in_place_operand(const Tensor& self, const T& v) {
  if constexpr (std::is_same_v<T, Tensor>) {
    return contiguous_for_kernel(promoted_for_kernel(v, self.dtype()));
  } else {
    return v;
  }
}
template <auto Kernel>
struct InPlaceKernel;
template <typename... Rest, Tensor (*Kernel)(const Tensor&, Rest...)>
struct InPlaceKernel<Kernel> {
  static Tensor fn(DispatchKeySet, const Tensor& self, Rest... rest) {
    Tensor out = Kernel(self, in_place_operand(self, rest)...);
    self.storage()->bump_version();
    return out;
  }
};

// Registers every operator's CUDA kernel (register_kernels_cuda.cpp); only in builds with CUDA, from
// libstrata_cuda.so when it is loaded (Note [The CUDA module]).
void register_cuda_kernels(Dispatcher& dispatcher);

}  // namespace strata::ops
