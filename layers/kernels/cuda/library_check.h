// Private to layers/kernels/cuda (and its tests): the checking macros for cuBLAS / cuBLASLt and cuDNN
// calls. They live here, beside the only code that calls those libraries, so that the runtime layer links
// the CUDA runtime alone. Same model and message format as STRATA_CUDA_CHECK (runtime::cuda::call_failure):
// file, line, the call's text and the library's own status name and string. Out-of-memory statuses throw
// UnavailableError (exit 4), everything else Error.
#pragma once

namespace strata::kernels::cuda {

[[noreturn]] void throw_cublas_error(int status, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn_error(int status, const char* call, const char* file, int line);

}  // namespace strata::kernels::cuda

// Status 0 is CUBLAS_STATUS_SUCCESS and CUDNN_STATUS_SUCCESS; comparing as int keeps the library headers
// out of this one (the macros expand in files that include them).
#define STRATA_CUBLAS_CHECK(call)                                                                     \
  do {                                                                                                \
    const auto strata_status_ = (call);                                                               \
    if (static_cast<int>(strata_status_) != 0) [[unlikely]]                                           \
      ::strata::kernels::cuda::throw_cublas_error(static_cast<int>(strata_status_), #call, __FILE__, __LINE__); \
  } while (0)

#define STRATA_CUDNN_CHECK(call)                                                                      \
  do {                                                                                                \
    const auto strata_status_ = (call);                                                               \
    if (static_cast<int>(strata_status_) != 0) [[unlikely]]                                           \
      ::strata::kernels::cuda::throw_cudnn_error(static_cast<int>(strata_status_), #call, __FILE__, __LINE__); \
  } while (0)
