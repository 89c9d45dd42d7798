// The cuBLAS and cuDNN halves of the checking macros (library_check.h), and the libraries' versions.
#include "layers/kernels/cuda/library_check.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <string>

#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"

namespace strata::kernels::cuda {
namespace {

std::string version3(size_t v) {  // cuBLASLt and cuDNN 9 both encode major*10000 + minor*100 + patch
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

}  // namespace

void throw_cublas_error(int status, const char* call, const char* file, int line) {
  const auto s = static_cast<cublasStatus_t>(status);
  const std::string msg = runtime::cuda::call_failure(
      call, std::string(cublasGetStatusName(s)) + " (" + cublasGetStatusString(s) + ")", file, line);
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw UnavailableError("out of memory in cuBLAS: " + msg);
  throw Error(msg);
}

void throw_cudnn_error(int status, const char* call, const char* file, int line) {
  const auto s = static_cast<cudnnStatus_t>(status);
  std::string what = cudnnGetErrorString(s);
  // cuDNN 9 keeps a longer explanation of the last failure on this thread; it is often the useful part.
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  std::string extra = detail;
  for (char& c : extra)
    if (c == '\n' || c == '\r') c = ' ';
  if (!extra.empty()) what += " (cuDNN's last message on this thread: " + extra + ")";
  const std::string msg = runtime::cuda::call_failure(call, what, file, line);
  if (s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED) {
    throw UnavailableError("out of memory in cuDNN: " + msg);
  }
  throw Error(msg);
}

LibraryVersions library_versions() {
  LibraryVersions v;
  int major = 0, minor = 0, patch = 0;
  STRATA_CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &major));
  STRATA_CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &minor));
  STRATA_CUBLAS_CHECK(cublasGetProperty(PATCH_LEVEL, &patch));
  v.cublas = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  v.cublaslt = version3(cublasLtGetVersion());
  v.cudnn = version3(cudnnGetVersion());
  return v;
}

}  // namespace strata::kernels::cuda
