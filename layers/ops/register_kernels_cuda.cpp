// The CUDA half of the kernel list (register_kernels.cpp has the rest): every operator's kCuda kernel,
// compiled only in builds with the CUDA layers.
#include "layers/ops/operators.h"
#include "layers/ops/register_kernels.h"

#include <algorithm>

namespace strata::ops {
namespace {

bool contiguous_or_absent(const Tensor& t) { return !t.defined() || t.is_contiguous(); }

// What cublasGemmEx reads as it lies (Note [Transposed GEMM operands]): a 2-D matrix with unit stride
// along either dim and a leading dimension cuBLAS accepts, in any dtype (cuBLAS computes halves natively).
bool gemm_reads_as_is(const Tensor& t) {
  if (contiguous_or_absent(t)) return true;
  if (t.dim() < 2) return false;
  // The last two dims are the matrix; batch dims before them may have any strides (0 for an expanded one).
  const int r = t.dim() - 2, c = t.dim() - 1;
  const int64_t rows = t.size(r), cols = t.size(c);
  return (t.stride(c) == 1 && t.stride(r) >= std::max<int64_t>(1, cols)) ||
         (t.stride(r) == 1 && t.stride(c) >= std::max<int64_t>(1, rows));
}

// Note [Contiguous inputs]: every CUDA kernel but the views' and matmul's/gemm's reads its inputs as
// contiguous memory (linear's cuBLASLt plan included: its layouts are fixed, so a view is copied first).
// The in-place ops write self through its strides (InPlaceKernel, shared with the CPU: the same operand
// casts and the same version bump).
template <typename Op>
void* cuda_kernel() {
  if constexpr (kInPlace<Op>) {
    return reinterpret_cast<void*>(&InPlaceKernel<Op::kCuda.fn>::fn);
  } else if constexpr (requires { Op::kStridedInputs; }) {
    return reinterpret_cast<void*>(&DropKeySet<Op::kCuda.fn>::fn);
  } else if constexpr (requires { Op::kCudaGemmOperands; }) {
    return reinterpret_cast<void*>(&WithInputs<Op::kCuda.fn, &gemm_reads_as_is, &contiguous_for_kernel>::fn);
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
