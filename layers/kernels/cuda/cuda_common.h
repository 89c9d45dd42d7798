// Private to layers/kernels/cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

// A number as a tensor of `dtype` stores it: add.Scalar / sub.Scalar (and their in-place forms) round
// their number to a half tensor's dtype before computing, as PyTorch does and as the CPU kernels do (Note
// [A number added to a half tensor] in layers/kernels/cpu/cpu_common.h). The toolkit's host conversions
// round double -> float -> half to nearest even, as c10::Half does.
inline double number_in(DType dtype, double number) {
  const auto f = static_cast<float>(number);
  if (dtype == DType::kF16) return static_cast<double>(__half2float(__float2half_rn(f)));
  if (dtype == DType::kBF16) return static_cast<double>(__bfloat162float(__float2bfloat16_rn(f)));
  return number;
}

// Makes the tensor's device current and returns strata's stream on it.
inline cudaStream_t device_stream(const Tensor& t) {
  runtime::cuda::set_current_device(t.device().index);
  return runtime::cuda::stream(t.device().index);
}

// Note [Empty reductions]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A kernel that sums over a dimension (a GEMM's K, a convolution's channels and kernel window, the
// batch of a weight gradient) must still write its output when that dimension is empty: the sum of
// nothing is 0. cuBLAS and cuDNN refuse zero dimensions and leading dimensions (lda = K = 0), and a
// kernel that only writes inside its loop over the batch leaves the allocation's old bytes. So each
// such kernel returns early for an output with no elements, and fills zeros (then any bias) when the
// reduced dimension is empty, as PyTorch's addmm does for K = 0. Zero bits are +0.0 in every dtype.
inline void fill_zeros(Tensor& out, cudaStream_t stream) {
  STRATA_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream));
}

}  // namespace strata::kernels::cuda
