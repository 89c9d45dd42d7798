// The CUDA half of the kernel list (register_kernels.cpp has the rest): every operator's kCuda kernel,
// compiled only in builds with the CUDA layers.
#include "layers/ops/operators.h"
#include "layers/ops/register_kernels.h"

namespace strata::ops {
namespace {

bool contiguous_or_absent(const Tensor& t) { return !t.defined() || t.is_contiguous(); }

// Note [Contiguous inputs]: every CUDA kernel but the views' reads its inputs as contiguous memory, the
// cuBLAS GEMMs included (they do not read a transposed view's layout yet: it is copied first).
template <typename Op>
void* cuda_kernel() {
  if constexpr (requires { Op::kStridedInputs; }) {
    return reinterpret_cast<void*>(&DropKeySet<Op::kCuda.fn>::fn);
  } else {
    return reinterpret_cast<void*>(&WithInputs<Op::kCuda.fn, &contiguous_or_absent, &contiguous_for_kernel>::fn);
  }
}

}  // namespace

void register_cuda_kernels(Dispatcher& d) {
  AllOps::for_each([&](auto op) {
    using Op = decltype(op);
    if constexpr (kHasKernel<decltype(Op::kCuda)>) {
      static_assert(std::is_same_v<decltype(Op::kCuda.fn), typename Op::Signature*>,
                    "an operator's CUDA kernel must have the operator's Signature");
      d.entry(op_index<Op>()).set_kernel(DispatchKey::kCUDA, cuda_kernel<Op>(),
                                         Op::kCuda.where);
    }
  });
}

}  // namespace strata::ops
