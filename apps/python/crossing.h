// The crossing from Python into C++ (the `pybind11` row, layer 2 of the stack): Python values become
// binding::IValues, the binding layer is called, the result becomes a Python object, and strata's C++
// errors become Python exceptions. Two entries, both in crossing.cpp:
//   _strata._op(index, *args)          the hot entry every fully typed positional call takes
//   _strata.call(name, args, kwargs)   pybind11's dispatcher: keywords, conversions, everything else
// See Note [Two entries into the extension] in crossing.cpp.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "lib/tensor.h"

namespace strata::python {

// strata.Error, strata.UsageError, strata.UnavailableError on the module (Note [Errors across the
// language boundary]); call first: every other binding may raise them.
void create_exceptions(pybind11::module_& m);

// Adds _op and call. `tensor_type` is strata._strata.Tensor (a pybind11 class with the default
// std::unique_ptr<Tensor> holder), read and created directly on the hot path.
void bind_crossing(pybind11::module_& m, PyTypeObject* tensor_type);

// strata's short dtype names ("f32") and numpy's names ("float32") as used across the boundary.
DType resolve_dtype(const std::string& text);  // UsageError naming what is allowed
std::string python_dtype_name(DType d);

}  // namespace strata::python
