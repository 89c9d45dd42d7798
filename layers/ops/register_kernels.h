// Private to layers/ops: what the two halves of the kernel registration share.
#pragma once

#include <type_traits>

#include "layers/dispatch/dispatch.h"
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

// Registers every operator's CUDA kernel (register_kernels_cuda.cpp); only in builds with CUDA, from
// libstrata_cuda.so when it is loaded (Note [The CUDA module]).
void register_cuda_kernels(Dispatcher& dispatcher);

}  // namespace strata::ops
