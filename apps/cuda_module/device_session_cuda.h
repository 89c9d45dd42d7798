// Private to libstrata_cuda.so: what device_choice_cuda.cpp, cuda_session.cpp and devices_command_cuda.cpp
// define for the module's table (cuda_module_entry.cpp). In their own namespace: the program that loads the
// module defines strata::measure::choose_device and friends itself (measure/devices/cuda_module.cpp), and its
// exported definitions would otherwise be the ones the module's calls bind to (Note [The CUDA module]).
#pragma once

#include <cstddef>
#include <iosfwd>
#include <memory>

#include "measure/devices/cuda_module.h"
#include "measure/device_session.h"

namespace strata::cuda_module {

measure::DeviceChoice choose_device(const frontend::DeviceRequest& request, bool device_timing);
size_t available_bytes(Device device);
std::unique_ptr<measure::DeviceSession> open_device_session(Device device, const measure::SessionOptions& options);
void list_devices(std::ostream& out);
void init_device_for_python(Device device);
compiler::DeviceKernel compiled_kernel(const StrataCompiledKernelRequest& request);

}  // namespace strata::cuda_module
