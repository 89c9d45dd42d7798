// The CUDA half of the kernel list (register_kernels.cpp has the rest): every operator's kCuda kernel,
// compiled only in builds with the CUDA layers.
#include "layers/ops/operators.h"
#include "layers/ops/register_kernels.h"

namespace strata::ops {

void register_cuda_kernels(Dispatcher& d) {
  AllOps::for_each([&](auto op) {
    using Op = decltype(op);
    if constexpr (kHasKernel<decltype(Op::kCuda)>) {
      static_assert(std::is_same_v<decltype(Op::kCuda.fn), typename Op::Signature*>,
                    "an operator's CUDA kernel must have the operator's Signature");
      d.entry(op_index<Op>()).set_kernel(DispatchKey::kCUDA, reinterpret_cast<void*>(&DropKeySet<Op::kCuda.fn>::fn),
                                         Op::kCuda.where);
    }
  });
}

}  // namespace strata::ops
