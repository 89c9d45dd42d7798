// Private to libstrata_cuda.so: what device_choice_cuda.cpp, cuda_session.cpp and devices_command_cuda.cpp
// define for the module's table
// (cuda_module_entry.cpp). In their own namespace: the executable that loads the module defines
// strata::app::choose_device and friends itself, and its exported definitions would otherwise be the ones
// the module's calls bind to (Note [The CUDA module]).
#pragma once

#include <cstddef>
#include <memory>

#include "apps/strata/cuda_module.h"
#include "measure/device_session.h"

namespace strata::app::cuda_module {

DeviceChoice choose_device(const frontend::DeviceRequest& request, bool device_timing);
size_t available_bytes(Device device);
std::unique_ptr<DeviceSession> open_device_session(Device device, const SessionOptions& options);
int run_devices();
void init_device_for_python(Device device);
compiler::DeviceKernel compiled_kernel(const StrataCompiledKernelRequest& request);

}  // namespace strata::app::cuda_module
