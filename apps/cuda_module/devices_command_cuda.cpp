// The device lines of `strata devices` for a build with the CUDA layers (list_devices in
// measure/device_session.h).
#include <ostream>

#include "apps/cuda_module/cuda_report.h"
#include "apps/cuda_module/device_session_cuda.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/device/cupti/cupti_trace.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"

namespace strata::cuda_module {

namespace rt = runtime::cuda;

void list_devices(std::ostream& out) {
  out << "cpu: " << frontend::host_memory().str() << "\n";
  const rt::Probe p = rt::probe();
  if (!p.usable) {
    out << "cuda: none: " << p.reason << "\n";
    return;
  }
  for (int i = 0; i < p.device_count; ++i) {
    const rt::DeviceInfo info = rt::device_info(i);
    out << "cuda:" << i << ": " << info.name << ", " << info.sm_count << " SMs, compute capability "
        << info.cc_major << "." << info.cc_minor << ", " << format_bytes(double(info.total_bytes)) << " ("
        << format_bytes(double(info.free_bytes)) << " free), SM clock " << mhz(info.clock_khz) << ", PCI "
        << info.pci_bus_id << "\n";
    if (std::string why = rt::unsupported_reason(i); !why.empty()) out << "  not usable by strata: " << why << "\n";
    if (i == p.device_count - 1) {
      const kernels::cuda::LibraryVersions libs = kernels::cuda::library_versions();
      out << "  CUDA driver " << rt::cuda_version_string(info.driver_version) << ", runtime "
          << rt::cuda_version_string(info.runtime_version) << ", cuBLAS " << libs.cublas << ", cuBLASLt "
          << libs.cublaslt << ", cuDNN " << libs.cudnn << ", CUPTI " << cupti::cupti_version()
          << "\n";
    }
  }
}

}  // namespace strata::cuda_module
