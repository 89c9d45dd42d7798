// Private to layers/kernels/cuda.
#pragma once

#include <climits>
#include <string>

#include "layers/kernels/cuda/library_check.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"
#include "lib/tensor.h"

namespace strata::kernels::cuda {

// The CUDA kernels take contiguous tensors on a CUDA device; anything else is refused with the reason,
// because the binding layer cannot know every way a caller might construct a tensor.
inline void check_cuda_input(const char* op, const Tensor& t) {
  if (!t.device().is_cuda()) throw UsageError(std::string(op) + ": CUDA kernel got " + t.str());
  if (!t.is_contiguous()) throw UsageError(std::string(op) + ": CUDA kernel needs contiguous tensors");
}

// cuBLAS and cuDNN take int dimensions.
inline int checked_int(const char* op, int64_t value) {
  if (value < 0 || value > INT_MAX) {
    throw UsageError(std::string(op) + ": dimension " + std::to_string(value) + " exceeds cuBLAS/cuDNN's int range");
  }
  return static_cast<int>(value);
}

// Makes the tensor's device current and returns strata's stream on it.
inline cudaStream_t device_stream(const Tensor& t) {
  runtime::cuda::set_current_device(t.device().index);
  return runtime::cuda::stream(t.device().index);
}

}  // namespace strata::kernels::cuda
