// The one exported name of libstrata_cuda.so (Note [The CUDA module]): the table the app calls CUDA code
// through (the measuring core's loader, measure/devices/cuda_module.cpp).
#include "measure/devices/cuda_module.h"
#include "apps/cuda_module/device_session_cuda.h"
#include "layers/ops/register_kernels.h"

extern "C" __attribute__((visibility("default"))) const StrataCudaBackend* strata_cuda_backend_v1() {
  namespace m = strata::cuda_module;
  static const StrataCudaBackend kBackend{
      kStrataCudaBackendVersion, &strata::ops::register_cuda_kernels, &m::choose_device, &m::available_bytes,
      &m::open_device_session,   &m::list_devices,   &m::init_device_for_python, &m::compiled_kernel,
  };
  return &kBackend;
}
