// `strata devices` for a build with the CUDA layers.
#include <iostream>

#include "apps/strata/commands.h"
#include "apps/cuda_module/cuda_report.h"
#include "apps/cuda_module/device_session_cuda.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/device/cupti/cupti_trace.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"

namespace strata::app {

namespace rt = runtime::cuda;

namespace cuda_module {

int run_devices() {
  std::cout << "cpu: " << frontend::host_memory().str() << "\n";
  const rt::Probe p = rt::probe();
  if (!p.usable) {
    std::cout << "cuda: none: " << p.reason << "\n";
    return 0;
  }
  for (int i = 0; i < p.device_count; ++i) {
    const rt::DeviceInfo info = rt::device_info(i);
    std::cout << "cuda:" << i << ": " << info.name << ", " << info.sm_count << " SMs, compute capability "
              << info.cc_major << "." << info.cc_minor << ", " << format_bytes(double(info.total_bytes)) << " ("
              << format_bytes(double(info.free_bytes)) << " free), SM clock " << mhz(info.clock_khz) << ", PCI "
              << info.pci_bus_id << "\n";
    if (std::string why = rt::unsupported_reason(i); !why.empty()) std::cout << "  not usable by strata: " << why << "\n";
    if (i == p.device_count - 1) {
      const kernels::cuda::LibraryVersions libs = kernels::cuda::library_versions();
      std::cout << "  CUDA driver " << rt::cuda_version_string(info.driver_version) << ", runtime "
                << rt::cuda_version_string(info.runtime_version) << ", cuBLAS " << libs.cublas << ", cuBLASLt "
                << libs.cublaslt << ", cuDNN " << libs.cudnn << ", CUPTI " << cupti::cupti_version()
                << "\n";
    }
  }
  return 0;
}

}  // namespace cuda_module
}  // namespace strata::app
