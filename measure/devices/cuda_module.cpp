// The loader of libstrata_cuda.so, and device selection and sessions for a build with the CUDA layers on
// the side of the program that loads it (the strata executable or the Python extension): CPU requests are
// answered here without loading anything, CUDA requests load the module and go through its table (Note
// [The CUDA module]).
#include "measure/devices/cuda_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ostream>
#include <string>

#include "lib/error.h"
#include "lib/host_clock.h"
#include "lib/zone.h"
#include "measure/device_session.h"
#include "measure/devices/module_file.h"

namespace strata::measure {
namespace {

constexpr const char* kModuleName = "libstrata_cuda.so";

struct Loaded {
  const StrataCudaBackend* backend = nullptr;
  std::string why;  // when backend is null
  double load_ns = 0;
};

using Entry = const StrataCudaBackend* (*)();

Loaded load() {
  Loaded r;
  const int64_t t0 = host_clock::now_ns();
  STRATA_ZONE(zone, Layer::kRuntime, "dlopen libstrata_cuda.so");
  // A test program links the module directly (it calls the CUDA layers' own functions): use that copy,
  // unless a path was asked for explicitly.
  const char* env = std::getenv("STRATA_CUDA_MODULE");
  auto entry = (env == nullptr || *env == '\0') ? reinterpret_cast<Entry>(dlsym(RTLD_DEFAULT, "strata_cuda_backend_v1"))
                                                 : nullptr;
  if (entry == nullptr) {
    const std::string path =
        find_module_file(kModuleName, "STRATA_CUDA_MODULE", STRATA_CUDA_MODULE_BUILD_PATH, r.why);
    if (path.empty()) return r;
    // RTLD_NOW: a symbol the module needs and the executable does not export is an error now, with its name,
    // rather than a crash at the first call that needs it.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      r.why = err != nullptr ? err : path + ": dlopen failed";
      return r;
    }
    entry = reinterpret_cast<Entry>(dlsym(handle, "strata_cuda_backend_v1"));
    if (entry == nullptr) {
      r.why = path + " is not a strata CUDA module of this version (no strata_cuda_backend_v1)";
      return r;
    }
  }
  const StrataCudaBackend* backend = entry();
  if (backend == nullptr || backend->version != kStrataCudaBackendVersion) {
    r.why = std::string(kModuleName) + " was built for another version of strata (table version " +
            (backend == nullptr ? std::string("none") : std::to_string(backend->version)) + ", this strata reads " +
            std::to_string(kStrataCudaBackendVersion) + "); rebuild it";
    return r;
  }
  backend->register_kernels(Dispatcher::instance());
  r.backend = backend;
  r.load_ns = double(host_clock::now_ns() - t0);
  return r;
}

std::atomic<bool> g_loaded{false};

const Loaded& loaded() {
  static const Loaded kResult = [] {
    Loaded r = load();
    if (r.backend != nullptr) g_loaded.store(true, std::memory_order_release);
    return r;
  }();
  return kResult;
}

std::string request_text(const frontend::DeviceRequest& request) {
  return request.any_cuda ? std::string("cuda") : request.device.str();
}

// Note [No driver, no module]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `--device auto` (the default) on a machine without a GPU must not pay for the CUDA module: mapping it
// and its libraries cost 0.8 s and 200 MB of resident memory per run, on every CPU-only machine. The
// driver API library, libcuda.so.1, is installed with the NVIDIA driver and never with the toolkit (the
// toolkit's stub is libcuda.so in lib64/stubs, off the loader's path), so when the loader cannot find it
// no CUDA device can be usable, and auto answers "the CPU" without loading the module. When it is found,
// the module is loaded and the runtime's probe gives the precise answer (a stub, a driver too old, no
// device). An explicit --device cuda always loads the module, whose probe names the problem exactly.
std::string missing_driver_reason() {
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (handle != nullptr) {
    dlclose(handle);  // the module maps it again if it is loaded; the loader keeps one copy
    return "";
  }
  return "no CUDA driver (libcuda.so.1, which the NVIDIA driver installs, is not on the loader's path; the CUDA "
         "module was not loaded)";
}

}  // namespace

const StrataCudaBackend* cuda_backend(std::string& why) {
  const Loaded& l = loaded();
  if (l.backend == nullptr) why = "the CUDA module could not be loaded: " + l.why;
  return l.backend;
}

const StrataCudaBackend& require_cuda_backend() {
  std::string why;
  const StrataCudaBackend* backend = cuda_backend(why);
  if (backend == nullptr) throw UnavailableError(why);
  return *backend;
}

bool cuda_backend_loaded() { return g_loaded.load(std::memory_order_acquire); }

double cuda_backend_load_ns() { return g_loaded.load(std::memory_order_acquire) ? loaded().load_ns : 0.0; }

// ---- What device_session.h promises, for a build with the CUDA layers ---------------------------------

DeviceChoice choose_device(const frontend::DeviceRequest& request, bool device_timing) {
  if (!request.automatic && !request.device.is_cuda()) return {kCPU, ""};
  // See Note [No driver, no module].
  if (request.automatic) {
    if (std::string missing = missing_driver_reason(); !missing.empty()) return {kCPU, "auto chose the CPU: " + missing};
  }
  std::string why;
  const StrataCudaBackend* backend = cuda_backend(why);
  if (backend == nullptr) {
    if (request.automatic) return {kCPU, "auto chose the CPU: " + why};
    throw UnavailableError("--device " + request_text(request) + ": " + why + "; use --device cpu (or auto)");
  }
  return backend->choose_device(request, device_timing);
}

size_t available_bytes(Device device) {
  if (device.is_cuda()) return require_cuda_backend().available_bytes(device);
  return frontend::available_host_bytes();
}

std::unique_ptr<DeviceSession> open_device_session(Device device, const SessionOptions& options) {
  if (device.is_cuda()) return require_cuda_backend().open_session(device, options);
  if (options.tf32) throw UsageError("--tf32 selects TF32 tensor-core math and needs a CUDA device");
  return std::make_unique<DeviceSession>();
}

void list_devices(std::ostream& out) {
  std::string why;
  const StrataCudaBackend* backend = cuda_backend(why);
  if (backend != nullptr) {
    backend->list_devices(out);
    return;
  }
  out << "cpu: " << frontend::host_memory().str() << "\n"
      << "cuda: none: " << why << "\n";
}

}  // namespace strata::measure
