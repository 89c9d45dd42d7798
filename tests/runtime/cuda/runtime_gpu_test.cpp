// layers/runtime/cuda on a real GPU (label gpu): discovery, the allocator behind Tensor, copies, events,
// the cache's reuse and its out-of-memory refusal, and the checking macro on a real failing call.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"
#include "lib/tensor.h"

using namespace strata;
namespace rt = strata::runtime::cuda;

namespace {
const Device kGpu{DeviceType::kCUDA, 0};
}

TEST_CASE("init_device registers the caching allocator for CUDA tensors and is idempotent") {
  rt::init_device(0);
  rt::init_device(0);
  CHECK(&allocator_for(kGpu) == &rt::caching_allocator());
  CHECK(rt::stream(0) != nullptr);
}

TEST_CASE("device_info describes the device and the libraries") {
  rt::init_device(0);
  const rt::DeviceInfo info = rt::device_info(0);
  // The library versions come from the kernels layer, which is what links those libraries.
  const kernels::cuda::LibraryVersions libs = kernels::cuda::library_versions();
  MESSAGE(info.name << ", " << info.sm_count << " SMs, CC " << info.cc_major << "." << info.cc_minor << ", cuBLAS "
                    << libs.cublas << ", cuDNN " << libs.cudnn);
  CHECK_FALSE(info.name.empty());
  CHECK(info.sm_count > 0);
  CHECK(info.cc_major >= 8);
  CHECK(info.total_bytes >= info.free_bytes);
  CHECK(info.free_bytes > 0);
  CHECK(info.clock_khz > 0);
  // Minor-version compatibility lets a 13.0 driver run a 13.x runtime: only the major versions must agree.
  CHECK(info.driver_version / 1000 >= info.runtime_version / 1000);
  CHECK_FALSE(libs.cublas.empty());
  CHECK_FALSE(libs.cudnn.empty());
  CHECK(rt::free_bytes(0) > 0);
}

TEST_CASE("host -> device -> host round trip through Tensor::to is exact") {
  rt::init_device(0);
  Tensor host = Tensor::empty({1000, 3}, DType::kF32, kCPU);
  for (int64_t i = 0; i < host.numel(); ++i) host.data<float>()[i] = float(i) * 0.25f - 17.0f;
  const Tensor dev = host.to(kGpu);
  CHECK(dev.device() == kGpu);
  const Tensor back = dev.to(kCPU);
  CHECK(std::memcmp(back.data_ptr(), host.data_ptr(), host.nbytes()) == 0);
}

TEST_CASE("a freed block is reused for the next allocation of its size class, without cudaMalloc") {
  rt::init_device(0);
  void* first = nullptr;
  {
    const Tensor t = Tensor::empty({1000}, DType::kF32, kGpu);
    first = t.data_ptr();
  }
  const rt::AllocatorStats before = rt::allocator_stats(0);
  const Tensor again = Tensor::empty({1000}, DType::kF32, kGpu);
  const rt::AllocatorStats after = rt::allocator_stats(0);
  CHECK(again.data_ptr() == first);
  CHECK(after.cuda_mallocs == before.cuda_mallocs);
  CHECK(after.cache_hits == before.cache_hits + 1);
  CHECK(reinterpret_cast<uintptr_t>(again.data_ptr()) % 256 == 0);
}

TEST_CASE("an allocation larger than the device is UnavailableError saying how much is free") {
  rt::init_device(0);
  try {
    rt::caching_allocator().allocate(size_t{1} << 50, kGpu);  // 1 PiB
    FAIL("no throw");
  } catch (const UnavailableError& e) {
    CHECK(std::string(e.what()).find("out of device memory on cuda:0") != std::string::npos);
    CHECK(std::string(e.what()).find("free of") != std::string::npos);
  }
  // The device is still usable afterwards.
  CHECK_NOTHROW(Tensor::empty({16}, DType::kF32, kGpu));
  CHECK_NOTHROW(rt::synchronize(0));
}

TEST_CASE("events time GPU work on strata's stream") {
  rt::init_device(0);
  rt::Event start, stop;
  const Tensor t = Tensor::empty({1 << 20}, DType::kF32, kGpu);
  start.record(rt::stream(0));
  STRATA_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, t.nbytes(), rt::stream(0)));
  stop.record(rt::stream(0));
  stop.synchronize();
  CHECK(rt::Event::elapsed_ms(start, stop) >= 0.0f);
}

TEST_CASE("STRATA_CUDA_CHECK on a real failing runtime call") {
  rt::init_device(0);
  try {
    STRATA_CUDA_CHECK(cudaSetDevice(1 << 20));
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("cudaSetDevice(1 << 20) failed: cudaErrorInvalidDevice") != std::string::npos);
  }
  // The error is not sticky: the next call works.
  CHECK_NOTHROW(STRATA_CUDA_CHECK(cudaSetDevice(0)));
}
