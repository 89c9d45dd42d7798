// --device for a build with the CUDA layers: auto selection and the checks of an explicit request.
#include "apps/cuda_module/device_session_cuda.h"
#include "layers/device/cupti/cupti_trace.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"
#include "measure/device_session.h"

namespace strata::cuda_module {
namespace {

namespace rt = runtime::cuda;

std::string request_text(const frontend::DeviceRequest& request) {
  return request.any_cuda ? std::string("cuda") : request.device.str();
}

}  // namespace

measure::DeviceChoice choose_device(const frontend::DeviceRequest& request, bool device_timing) {
  // The probe below initialises CUDA; CUPTI's latency timestamps must be requested before that. Not
  // under --no-device-timing, which promises a run without CUPTI (and so leaves another profiler's
  // CUPTI session alone).
  if (device_timing && (request.automatic || request.device.is_cuda())) cupti::enable_latency_timestamps();
  if (request.automatic) {
    const rt::Probe p = rt::probe();
    if (!p.usable) return {kCPU, "auto chose the CPU: " + p.reason};
    try {
      if (std::string why = rt::unsupported_reason(0); !why.empty()) return {kCPU, "auto chose the CPU: " + why};
    } catch (const Error& e) {
      return {kCPU, std::string("auto chose the CPU: ") + e.what()};
    }
    return {Device{DeviceType::kCUDA, 0},
            "auto chose cuda:0 (" + std::to_string(p.device_count) + " CUDA device" + (p.device_count == 1 ? "" : "s") + " found)"};
  }
  if (!request.device.is_cuda()) return {kCPU, ""};
  const rt::Probe p = rt::probe();
  if (!p.usable) {
    throw UnavailableError("--device " + request_text(request) + ": " + p.reason + "; use --device cpu (or auto)");
  }
  if (request.device.index >= p.device_count) {
    throw UnavailableError("--device " + request.device.str() + ": this machine has " + std::to_string(p.device_count) +
                           " CUDA device" + (p.device_count == 1 ? "" : "s") + " (cuda:0" +
                           (p.device_count > 1 ? " to cuda:" + std::to_string(p.device_count - 1) : "") + ")");
  }
  if (std::string why = rt::unsupported_reason(request.device.index); !why.empty()) {
    throw UnavailableError("--device " + request.device.str() + ": " + why);
  }
  return {request.device, ""};
}

void init_device_for_python(Device device) {
  const rt::Probe p = rt::probe();
  if (!p.usable) throw UnavailableError(p.reason);
  if (device.index >= p.device_count) {
    throw UnavailableError("this machine has " + std::to_string(p.device_count) + " CUDA device" +
                           (p.device_count == 1 ? "" : "s"));
  }
  if (std::string why = rt::unsupported_reason(device.index); !why.empty()) throw UnavailableError(why);
  rt::init_device(device.index);
}

size_t available_bytes(Device device) {
  if (device.is_cuda()) return rt::free_bytes(device.index);
  return frontend::available_host_bytes();
}

}  // namespace strata::cuda_module
