// layers/runtime/cuda on any machine, GPU or not: probing never throws and explains itself, the checking
// macro carries file, line, the call's text and the runtime's own error name, out-of-memory is
// UnavailableError (exit 4), the allocator's rounding, the published-peak table, and what happens when a
// device is asked for where there is none. (The cuBLAS / cuDNN macros: tests/kernels/cuda.)
#include <doctest/doctest.h>

#include <string>

#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"
#include "tests/support/error_text.h"

using namespace strata;
namespace rt = strata::runtime::cuda;

namespace {

// A stand-in for a library call that fails, so the macro's "call text" is predictable.
cudaError_t cuda_call_returning(cudaError_t e) { return e; }

using strata::test::contains;
using strata::test::message_of;

}  // namespace

TEST_CASE("probe() never throws, and explains an unusable CUDA in one line") {
  const rt::Probe p = rt::probe();
  if (p.usable) {
    CHECK(p.device_count > 0);
    CHECK(p.reason.empty());
    MESSAGE("this machine has " << p.device_count << " CUDA device(s)");
    return;
  }
  CHECK(p.device_count == 0);
  CHECK_FALSE(p.reason.empty());
  CHECK(p.reason.find('\n') == std::string::npos);
  // Without a driver the runtime says cudaErrorInsufficientDriver (35), or cudaErrorStubLibrary (34) when
  // only the toolkit's stub libcuda is on the library path; the reason names the error either way.
  if (p.error_code == cudaErrorInsufficientDriver) CHECK(contains(p.reason, "cudaErrorInsufficientDriver"));
  if (p.error_code == cudaErrorStubLibrary) CHECK(contains(p.reason, "cudaErrorStubLibrary"));
  if (p.error_code == cudaErrorNoDevice) CHECK(contains(p.reason, "cudaErrorNoDevice"));
  // Asked twice, the same answer (the runtime caches its driver load; so does probe()).
  CHECK(rt::probe().reason == p.reason);
}

TEST_CASE("STRATA_CUDA_CHECK: file, line, the call's text and the runtime's error name and string") {
  CHECK_NOTHROW(STRATA_CUDA_CHECK(cuda_call_returning(cudaSuccess)));
  const int line = __LINE__ + 1;
  const std::string msg = message_of([] { STRATA_CUDA_CHECK(cuda_call_returning(cudaErrorInvalidValue)); });
  CHECK(contains(msg, "cuda_call_returning(cudaErrorInvalidValue) failed"));
  CHECK(contains(msg, "cudaErrorInvalidValue"));
  CHECK(contains(msg, cudaGetErrorString(cudaErrorInvalidValue)));
  CHECK(contains(msg, "tests/runtime/cuda/runtime_host_test.cpp:" + std::to_string(line)));
  CHECK_THROWS_AS(STRATA_CUDA_CHECK(cuda_call_returning(cudaErrorInvalidValue)), Error);
}

TEST_CASE("device out of memory is UnavailableError (exit 4), other CUDA failures exit 1") {
  try {
    STRATA_CUDA_CHECK(cuda_call_returning(cudaErrorMemoryAllocation));
    FAIL("no throw");
  } catch (const UnavailableError& e) {
    CHECK(e.code() == ExitCode::kUnavailable);
    CHECK(contains(e.what(), "out of device memory"));
    CHECK(contains(e.what(), "cudaErrorMemoryAllocation"));
  }
  try {
    STRATA_CUDA_CHECK(cuda_call_returning(cudaErrorLaunchFailure));
    FAIL("no throw");
  } catch (const UnavailableError&) {
    FAIL("a launch failure is not an out-of-memory");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kFailure);
  }
}

TEST_CASE("the caching allocator's size classes") {
  CHECK(rt::rounded_allocation_size(0) == 512);
  CHECK(rt::rounded_allocation_size(1) == 512);
  CHECK(rt::rounded_allocation_size(512) == 512);
  CHECK(rt::rounded_allocation_size(513) == 1024);
  CHECK(rt::rounded_allocation_size(size_t{1} << 20) == size_t{1} << 20);
  CHECK(rt::rounded_allocation_size((size_t{1} << 20) + 1) == size_t{2} << 20);
  CHECK(rt::rounded_allocation_size(size_t{3} << 20) == size_t{4} << 20);
  CHECK(rt::rounded_allocation_size(size_t{4} << 20) == size_t{4} << 20);
}

TEST_CASE("kernel images: which compute capabilities strata's architecture list can run on") {
  const std::string archs = "80-real;90-real;100-real;120-real;120-virtual";  // StrataCuda.cmake's default
  for (const auto& cc : {std::pair{8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {10, 3}, {12, 0}, {12, 1}, {13, 0}}) {
    const int major = cc.first, minor = cc.second;
    INFO(major << "." << minor);
    CHECK(rt::kernel_image_problem(major, minor, archs).empty());
  }
  // CUDA 13 numbers Thor 11.0: no sm_11x code, and compute_120 PTX cannot be JIT-compiled down to it.
  const std::string thor = rt::kernel_image_problem(11, 0, archs);
  CHECK(contains(thor, "compute capability 11.0 has no kernel image"));
  CHECK(contains(thor, "built for 8.0, 9.0, 10.0, 12.0, 12.0 (PTX)"));
  CHECK(contains(thor, "CMAKE_CUDA_ARCHITECTURES including 110"));
  // A validation build for the H200 only.
  CHECK(rt::kernel_image_problem(9, 0, "90-real").empty());
  CHECK_FALSE(rt::kernel_image_problem(8, 0, "90-real").empty());
  CHECK_FALSE(rt::kernel_image_problem(10, 0, "90-real").empty());  // SASS does not cross majors
  // Plain "90" is SASS and PTX: runs on 9.0 and, through the PTX, on anything newer.
  CHECK(rt::kernel_image_problem(12, 0, "90").empty());
  // Architecture-specific code ("90a") runs on exactly that capability.
  CHECK(rt::kernel_image_problem(9, 0, "90a-real").empty());
  CHECK_FALSE(rt::kernel_image_problem(10, 0, "90a").empty());
  CHECK_FALSE(rt::kernel_image_problem(9, 0, "").empty());
}

TEST_CASE("CUDA version numbers print as major.minor") {
  CHECK(rt::cuda_version_string(13000) == "13.0");
  CHECK(rt::cuda_version_string(12040) == "12.4");
  CHECK(rt::cuda_version_string(11080) == "11.8");
}

TEST_CASE("asking for a device that is not there: UnavailableError with the reason, never a crash") {
  const rt::Probe p = rt::probe();
  const int missing = p.usable ? p.device_count : 0;
  CHECK_THROWS_AS(rt::init_device(missing), UnavailableError);
  CHECK_THROWS_AS(rt::device_info(missing), UnavailableError);
  CHECK_THROWS_AS(rt::unsupported_reason(missing), UnavailableError);
  const std::string msg = message_of([&] { rt::init_device(missing); });
  if (p.usable) {
    CHECK(contains(msg, "this machine has " + std::to_string(p.device_count)));
  } else {
    CHECK(contains(msg, p.reason));
  }
  CHECK_THROWS_AS(rt::stream(missing), Error);
}
