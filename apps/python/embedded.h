// What module.cpp needs when it is compiled into the strata program's Python module instead of the
// extension (STRATA_PYTHON_EMBEDDED; Note [The Python module] in python_module_abi.h). The CUDA layers
// live in the CUDA module (Note [The CUDA module]): the extension loads it itself (cuda_device.h); inside
// the program, CUDA questions go through the program's own device selection, defined by python_embed.cpp.
#pragma once

#include <cstddef>
#include <string>

#include <pybind11/pybind11.h>

#include "layers/frontend/frontend.h"

namespace strata::python {

// Creates everything `strata._strata` holds (exceptions, Tensor, call, operators, creation) in `m`.
void define_module(pybind11::module_& m);

// A usable CUDA device for `request` (not cpu, not auto), or UnavailableError saying why; `text` is what
// the Python caller wrote.
Device embedded_cuda_device(const frontend::DeviceRequest& request, const std::string& text);
// Free bytes on a CUDA device.
size_t embedded_available_bytes(Device device);

}  // namespace strata::python
