// Private to layers/ops: what the two halves of the kernel registration share.
#pragma once

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

// Registers every operator's CUDA kernel (register_kernels_cuda.cpp); only in builds with CUDA, from
// libstrata_cuda.so when it is loaded (Note [The CUDA module]).
void register_cuda_kernels(Dispatcher& dispatcher);

}  // namespace strata::ops
