// Private to layers/kernels/cpu.
#pragma once

#include <string>

#include "lib/dtype.h"
#include "lib/error.h"
#include "lib/tensor.h"

namespace strata::kernels::cpu {

// The CPU kernels take contiguous f32/f64 tensors on the CPU; anything else is refused here with the
// reason, because the frontend and binding cannot know every way a caller might construct a tensor.
inline void check_cpu_input(const char* op, const Tensor& t) {
  if (!t.device().is_cpu()) throw UsageError(std::string(op) + ": CPU kernel got " + t.str());
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kF64) {
    throw UsageError(std::string(op) + ": the CPU backend supports f32 and f64, got " +
                     std::string(dtype_name(t.dtype())) + " (use --device cuda for f16/bf16)");
  }
  if (!t.is_contiguous()) throw UsageError(std::string(op) + ": CPU kernel needs contiguous tensors");
}

}  // namespace strata::kernels::cpu
