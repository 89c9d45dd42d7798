// layers/kernels/cuda's checking macros on any machine, GPU or not: the cuBLAS and cuDNN statuses by name,
// the call's text, file and line, and out-of-memory statuses as UnavailableError (exit 4).
#include <doctest/doctest.h>

#include <cublas_api.h>
#include <cudnn.h>

#include <string>

#include "layers/kernels/cuda/library_check.h"
#include "lib/error.h"
#include "tests/support/error_text.h"

using namespace strata;

namespace {

// A stand-in for a library call that fails, so the macro's "call text" is predictable.
cublasStatus_t cublas_call_returning(cublasStatus_t s) { return s; }
cudnnStatus_t cudnn_call_returning(cudnnStatus_t s) { return s; }

using strata::test::contains;
using strata::test::message_of;

}  // namespace

TEST_CASE("STRATA_CUBLAS_CHECK names the cuBLAS status and allocation failure is UnavailableError") {
  CHECK_NOTHROW(STRATA_CUBLAS_CHECK(cublas_call_returning(CUBLAS_STATUS_SUCCESS)));
  const std::string msg = message_of([] { STRATA_CUBLAS_CHECK(cublas_call_returning(CUBLAS_STATUS_NOT_INITIALIZED)); });
  CHECK(contains(msg, "cublas_call_returning(CUBLAS_STATUS_NOT_INITIALIZED) failed: CUBLAS_STATUS_NOT_INITIALIZED"));
  CHECK(contains(msg, cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)));
  CHECK(contains(msg, "tests/kernels/cuda/library_check_test.cpp:"));
  CHECK_THROWS_AS(STRATA_CUBLAS_CHECK(cublas_call_returning(CUBLAS_STATUS_ALLOC_FAILED)), UnavailableError);
}

TEST_CASE("STRATA_CUDNN_CHECK names the cuDNN status and device allocation failure is UnavailableError") {
  CHECK_NOTHROW(STRATA_CUDNN_CHECK(cudnn_call_returning(CUDNN_STATUS_SUCCESS)));
  const std::string msg = message_of([] { STRATA_CUDNN_CHECK(cudnn_call_returning(CUDNN_STATUS_BAD_PARAM)); });
  CHECK(contains(msg, "cudnn_call_returning(CUDNN_STATUS_BAD_PARAM) failed: CUDNN_STATUS_BAD_PARAM"));
  CHECK(msg.find('\n') == std::string::npos);
  CHECK_THROWS_AS(STRATA_CUDNN_CHECK(cudnn_call_returning(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)),
                  UnavailableError);
  CHECK_THROWS_AS(STRATA_CUDNN_CHECK(cudnn_call_returning(CUDNN_STATUS_EXECUTION_FAILED)), Error);
}
