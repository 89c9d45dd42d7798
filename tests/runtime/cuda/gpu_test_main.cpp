// main() of the GPU-only test programs (ctest label gpu). Without a usable device they print why and exit
// 77, which ctest reports as "Skipped" (SKIP_RETURN_CODE 77 in tests/cuda.cmake); with one, doctest runs.
// Device initialisation is left to the tests: the CUPTI test must start its session before the first
// CUDA context exists.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "measure/devices/cuda_module.h"
#include "layers/device/cupti/cupti_trace.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"

int main(int argc, char** argv) {
  strata::cupti::enable_latency_timestamps();  // before the probe initialises CUDA, as strata itself does
  const strata::runtime::cuda::Probe probe = strata::runtime::cuda::probe();
  if (!probe.usable) {
    std::printf("SKIPPED: no usable CUDA device: %s\n", probe.reason.c_str());
    return 77;
  }
  if (const std::string why = strata::runtime::cuda::unsupported_reason(0); !why.empty()) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 77;
  }
  // The program links libstrata_cuda.so; this registers its CUDA kernels with the dispatcher, as strata's
  // loader does on the first CUDA use (Note [The CUDA module]).
  strata::measure::require_cuda_backend();
  doctest::Context context(argc, argv);
  return context.run();
}
