// The extension's way to the GPU (STRATA_WITH_CUDA, not the strata program's embedded module): the CUDA
// module the strata program loads, libstrata_cuda.so, found and loaded by the same code, the measuring
// core's (measure/devices/cuda_module.cpp), on the first CUDA use, which registers its CUDA kernels with
// the dispatcher. See Note [The extension and the CUDA module] in cuda_device.cpp.
#pragma once

#include <cstddef>
#include <string>

#include "layers/frontend/frontend.h"

namespace strata::python {

// `request` (cuda or cuda:N) ready for tensors, loading the module on the first call; UnavailableError
// "device '<text>': <why>; use device='cpu'" when the module cannot be loaded or the device is not usable.
Device module_cuda_device(const frontend::DeviceRequest& request, const std::string& text);

// Free bytes on a CUDA device (module_cuda_device first).
size_t module_available_bytes(Device device);

}  // namespace strata::python
