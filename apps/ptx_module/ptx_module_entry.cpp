// The one exported name of libstrata_ptx.so (Note [The PTX module]), and the GPU's architecture through
// the driver when there is one.
#include <cuda.h>
#include <dlfcn.h>

#include "apps/ptx_module/ptx_module_abi.h"

namespace {

// Through dlopen, not a link: the module must load where libcuda.so.1 is absent.
std::string gpu_arch(int device, std::string& why) {
  void* lib = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) {
    why = "no CUDA driver (libcuda.so.1 is not on the loader's path)";
    return "";
  }
  using Init = CUresult (*)(unsigned);
  using Get = CUresult (*)(CUdevice*, int);
  using Attr = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  auto init = reinterpret_cast<Init>(::dlsym(lib, "cuInit"));
  auto get = reinterpret_cast<Get>(::dlsym(lib, "cuDeviceGet"));
  auto attr = reinterpret_cast<Attr>(::dlsym(lib, "cuDeviceGetAttribute"));
  CUdevice dev = 0;
  int major = 0, minor = 0;
  if (init == nullptr || get == nullptr || attr == nullptr || init(0) != CUDA_SUCCESS ||
      get(&dev, device) != CUDA_SUCCESS ||
      attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
      attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS) {
    why = "the CUDA driver found no usable device " + std::to_string(device);
    return "";
  }
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

strata::compiler::cuda::Ptx kernel_ptx(const strata::compiler::Graph& graph, const strata::compiler::FusedKernel& kernel,
                                       strata::DType dtype, const std::string& arch) {
  return strata::compiler::cuda::cached_ptx(strata::compiler::cuda::generate_cuda(graph, kernel, dtype), arch);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const StrataPtxModule* strata_ptx_module_v1() {
  static const StrataPtxModule kModule{kStrataPtxModuleVersion, &strata::compiler::cuda::emit_ptx, &gpu_arch,
                                      &kernel_ptx};
  return &kModule;
}
