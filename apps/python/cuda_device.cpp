#include "apps/python/cuda_device.h"

#include <dlfcn.h>

#include "measure/devices/cuda_module.h"
#include "lib/error.h"

namespace strata::python {
namespace {

// Note [The extension and the CUDA module]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// libstrata_cuda.so leaves strata's own symbols (lib, dispatch, ops, reports, measure) undefined, to
// be resolved against whatever loaded it, so that a process has one Dispatcher and one allocator registry
// (Note [The CUDA module]). The strata executable exports them. Python opens an extension with
// RTLD_LOCAL, which keeps its symbols out of the global scope that a later dlopen resolves against, so
// the module would fail to load with "undefined symbol". Before the first load, the extension therefore
// opens its own file again with RTLD_NOLOAD | RTLD_GLOBAL: no second copy is mapped, the copy already in
// the process joins the global scope. The extension links every object of those libraries
// (strata_export_to_cuda_module), not only the ones it calls itself, since the module needs others.
void expose_own_symbols() {
  static const std::string kError = []() -> std::string {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&expose_own_symbols), &info) == 0 || info.dli_fname == nullptr) {
      return "dladdr could not name the extension's own file";
    }
    if (dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL) == nullptr) {
      const char* err = dlerror();
      return err != nullptr ? err : std::string(info.dli_fname) + ": dlopen failed";
    }
    return "";
  }();
  if (!kError.empty()) throw UnavailableError("the CUDA module cannot be given strata's symbols: " + kError);
}

std::string refusal(const std::string& text, const std::string& why) {
  return "device '" + text + "': " + why + "; use device='cpu'";
}

}  // namespace

Device module_cuda_device(const frontend::DeviceRequest& request, const std::string& text) {
  std::string why;
  const StrataCudaBackend* backend = nullptr;
  try {
    expose_own_symbols();
    backend = measure::cuda_backend(why);
  } catch (const UnavailableError& e) {
    why = e.what();
  }
  if (backend == nullptr) throw UnavailableError(refusal(text, why));
  try {
    backend->init_device_for_python(request.device);
  } catch (const UnavailableError& e) {
    throw UnavailableError(refusal(text, e.what()));
  }
  return request.device;
}

size_t module_available_bytes(Device device) { return measure::require_cuda_backend().available_bytes(device); }

}  // namespace strata::python
