// The loader of libstrata_ptx.so, on the executable's side (Note [The PTX module] in apps/ptx_module/ptx_module_abi.h).
#include "apps/strata/ptx_module.h"

#include <dlfcn.h>

#include <string>

#include "lib/error.h"
#include "measure/devices/module_file.h"

namespace strata::app {
namespace {

struct Loaded {
  const StrataPtxModule* module = nullptr;
  std::string why;
};

Loaded load() {
  Loaded r;
  const std::string path =
      measure::find_module_file("libstrata_ptx.so", "STRATA_PTX_MODULE", STRATA_PTX_MODULE_BUILD_PATH, r.why);
  if (path.empty()) return r;
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    r.why = err != nullptr ? err : path + ": dlopen failed";
    return r;
  }
  using Entry = const StrataPtxModule* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, "strata_ptx_module_v1"));
  const StrataPtxModule* module = entry != nullptr ? entry() : nullptr;
  if (module == nullptr || module->version != kStrataPtxModuleVersion) {
    r.why = path + " is not a strata PTX module of this version; rebuild it";
    return r;
  }
  r.module = module;
  return r;
}

}  // namespace

const StrataPtxModule& require_ptx_module() {
  static const Loaded kLoaded = load();
  if (kLoaded.module == nullptr)
    throw UnavailableError("--emit ptx: the PTX module libstrata_ptx.so could not be loaded: " + kLoaded.why);
  return *kLoaded.module;
}

}  // namespace strata::app
