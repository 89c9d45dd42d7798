#include <cstdio>

#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"

namespace strata::runtime::cuda {
namespace {

struct DeviceState {
  cudaStream_t stream = nullptr;
};
PerDevice<DeviceState> g_devices("the CUDA runtime");

// cudaSetDevice is per thread; remembering it here saves a runtime call (and a CUPTI record) per op.
thread_local int t_current_device = -1;

std::string name_of(cudaError_t e) { return cudaGetErrorName(e); }

// "layers/runtime/cuda/runtime.cpp" rather than the absolute path the build passed in __FILE__.
std::string short_path(const char* file) {
  std::string path = file;
  size_t best = std::string::npos;
  for (const char* top : {"/layers/", "/apps/", "/tests/", "/bench/", "/lib/", "/reports/"}) {
    const size_t at = path.rfind(top);
    if (at != std::string::npos && (best == std::string::npos || at < best)) best = at;
  }
  return best == std::string::npos ? path : path.substr(best + 1);
}


Probe do_probe() {
  Probe p;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  p.error_code = static_cast<int>(e);
  if (e == cudaSuccess && count > 0) {
    p.usable = true;
    p.device_count = count;
    return p;
  }
  if (e == cudaSuccess) {
    p.reason = "the CUDA runtime sees no device (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
  } else if (e == cudaErrorInsufficientDriver) {
    int driver = 0;
    if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
      int runtime = 0;
      (void)cudaRuntimeGetVersion(&runtime);
      p.reason = "the NVIDIA driver supports CUDA " + cuda_version_string(driver) + " but this strata needs CUDA " +
                 cuda_version_string(runtime) + " (cudaErrorInsufficientDriver); update the driver";
    } else {
      p.reason = "no CUDA driver (cudaErrorInsufficientDriver)";
    }
  } else if (e == cudaErrorStubLibrary) {
    p.reason = "no CUDA driver: only the toolkit's stub libcuda.so was found (cudaErrorStubLibrary)";
  } else if (e == cudaErrorNoDevice) {
    p.reason = "no CUDA device is visible (cudaErrorNoDevice); check nvidia-smi and CUDA_VISIBLE_DEVICES";
  } else {
    p.reason = "CUDA is not usable: cudaGetDeviceCount failed with " + name_of(e) + " (" + cudaGetErrorString(e) + ")";
  }
  // The failed call may leave a non-sticky error behind; clear it so later calls do not inherit it.
  (void)cudaGetLastError();
  return p;
}

void check_index(int index) {
  const Probe p = probe();
  if (!p.usable) throw UnavailableError("cuda:" + std::to_string(index) + ": " + p.reason);
  if (index < 0 || index >= p.device_count || index >= kMaxDevices) {
    throw UnavailableError("cuda:" + std::to_string(index) + " does not exist: this machine has " +
                           std::to_string(p.device_count) + " CUDA device" + (p.device_count == 1 ? "" : "s") +
                           " (cuda:0" + (p.device_count > 1 ? " to cuda:" + std::to_string(p.device_count - 1) : "") +
                           ")");
  }
}

}  // namespace

std::string call_failure(const char* call, const std::string& what, const char* file, int line) {
  return std::string(call) + " failed: " + what + " [" + short_path(file) + ":" + std::to_string(line) + "]";
}

Probe probe() noexcept {
  static const Probe kResult = [] {
    try {
      return do_probe();
    } catch (...) {
      Probe p;
      p.reason = "probing the CUDA runtime failed unexpectedly";
      return p;
    }
  }();
  return kResult;
}

std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string kernel_image_problem(int major, int minor, const std::string& architectures) {
  const int device = major * 10 + minor;
  std::string built;
  size_t begin = 0;
  while (begin <= architectures.size()) {
    size_t end = architectures.find_first_of(";,", begin);
    if (end == std::string::npos) end = architectures.size();
    const std::string entry = architectures.substr(begin, end - begin);
    begin = end + 1;
    if (entry.empty()) continue;
    // "90", "90-real", "90-virtual", "90a-real": the number, then whether it is SASS, PTX or both.
    size_t digits = 0;
    while (digits < entry.size() && entry[digits] >= '0' && entry[digits] <= '9') ++digits;
    if (digits == 0) continue;
    const int arch = std::stoi(entry.substr(0, digits));
    const bool arch_specific = digits < entry.size() && (entry[digits] == 'a' || entry[digits] == 'f');
    const bool real = entry.find("-virtual") == std::string::npos;
    const bool ptx = entry.find("-real") == std::string::npos;
    built += (built.empty() ? "" : ", ") + std::to_string(arch / 10) + "." + std::to_string(arch % 10) +
             (real ? "" : " (PTX)");
    if (real && (arch_specific ? device == arch : arch / 10 == major && arch <= device)) return "";
    if (ptx && !arch_specific && arch <= device) return "";
  }
  return "compute capability " + std::to_string(major) + "." + std::to_string(minor) +
         " has no kernel image in this build (built for " + (built.empty() ? std::string("nothing") : built) +
         "); rebuild with CMAKE_CUDA_ARCHITECTURES including " + std::to_string(device);
}

std::string unsupported_reason(int index) {
  check_index(index);
  int major = 0, minor = 0;
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index));
  if (major < 8) {
    return "cuda:" + std::to_string(index) + " has compute capability " + std::to_string(major) + "." +
           std::to_string(minor) + "; strata needs 8.0 or newer (CUDA 13 dropped the older architectures)";
  }
  if (std::string problem = kernel_image_problem(major, minor, STRATA_CUDA_ARCHITECTURES); !problem.empty()) {
    return "cuda:" + std::to_string(index) + ": " + problem;
  }
  return "";
}

DeviceInfo device_info(int index) {
  check_index(index);
  DeviceInfo info;
  info.index = index;
  cudaDeviceProp prop{};
  STRATA_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.memory_bus_bits = prop.memoryBusWidth;
  // CUDA 13 removed the clock fields from cudaDeviceProp; the attributes remain.
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&info.clock_khz, cudaDevAttrClockRate, index));
  STRATA_CUDA_CHECK(cudaDeviceGetAttribute(&info.memory_clock_khz, cudaDevAttrMemoryClockRate, index));
  char bus[32] = {};
  STRATA_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, index));
  info.pci_bus_id = bus;
  set_current_device(index);
  STRATA_CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  STRATA_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  STRATA_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  return info;
}

void init_device(int index) {
  check_index(index);
  g_devices.get(index, [&](DeviceState& d) {
    set_current_device(index);
    // Creates the primary context now, so that its cost is setup and not part of the first traced call.
    STRATA_CUDA_CHECK(cudaFree(nullptr));
    // Non-blocking: strata's stream never waits for work that something else put on the legacy stream.
    STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
    register_allocator(DeviceType::kCUDA, &caching_allocator());
  });
}

void set_current_device(int index) {
  if (t_current_device == index) return;
  STRATA_CUDA_CHECK(cudaSetDevice(index));
  t_current_device = index;
}

cudaStream_t stream(int index) {
  const DeviceState* d = g_devices.find(index);
  if (d == nullptr || d->stream == nullptr) {
    throw Error("cuda:" + std::to_string(index) + " is not initialised (runtime::cuda::init_device was not called)");
  }
  return d->stream;
}

void synchronize(int index) { STRATA_CUDA_CHECK(cudaStreamSynchronize(stream(index))); }

void synchronize_device(int index) {
  check_index(index);
  set_current_device(index);
  STRATA_CUDA_CHECK(cudaDeviceSynchronize());
}

size_t free_bytes(int index) {
  check_index(index);
  set_current_device(index);
  size_t free = 0, total = 0;
  STRATA_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

Event::Event() { STRATA_CUDA_CHECK(cudaEventCreate(&event_)); }
Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);  // never throw from a destructor
}
void Event::record(cudaStream_t s) { STRATA_CUDA_CHECK(cudaEventRecord(event_, s)); }
void Event::synchronize() { STRATA_CUDA_CHECK(cudaEventSynchronize(event_)); }
float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  STRATA_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, end.event_));
  return ms;
}

void throw_cuda_error(int error, const char* call, const char* file, int line) {
  const auto e = static_cast<cudaError_t>(error);
  // Clears a non-sticky error so that the next, unrelated call does not report it again.
  (void)cudaGetLastError();
  const std::string msg = call_failure(call, name_of(e) + " (" + cudaGetErrorString(e) + ")", file, line);
  if (e == cudaErrorMemoryAllocation) throw UnavailableError("out of device memory: " + msg);
  throw Error(msg);
}

}  // namespace strata::runtime::cuda
