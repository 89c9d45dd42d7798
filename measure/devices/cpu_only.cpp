// Device selection and sessions for a build without the CUDA layers (STRATA_CUDA=OFF, or no toolkit): every
// device is the CPU, and a CUDA request says that this build cannot serve it. A build with the CUDA layers
// compiles cuda_module.cpp instead.
#include <ostream>

#include "lib/error.h"
#include "measure/device_session.h"

namespace strata::measure {

DeviceChoice choose_device(const frontend::DeviceRequest& request, bool /*device_timing*/) {
  if (request.automatic) {
    return {kCPU, "auto chose the CPU: this strata was built without CUDA support (STRATA_CUDA=OFF or no toolkit)"};
  }
  if (request.device.is_cuda()) {
    throw UnavailableError("--device " + request.device.str() +
                           ": this strata was built without CUDA support; rebuild with the CUDA toolkit "
                           "installed (STRATA_CUDA=ON), or use --device cpu");
  }
  return {kCPU, ""};
}

size_t available_bytes(Device) { return frontend::available_host_bytes(); }

std::unique_ptr<DeviceSession> open_device_session(Device device, const SessionOptions& options) {
  if (options.tf32) throw UsageError("--tf32 selects TF32 tensor-core math and needs a CUDA device");
  (void)device;
  return std::make_unique<DeviceSession>();
}

void list_devices(std::ostream& out) {
  out << "cpu: " << frontend::host_memory().str() << "\n"
      << "cuda: none: this strata was built without CUDA support (STRATA_CUDA=OFF or no toolkit)\n";
}

}  // namespace strata::measure
