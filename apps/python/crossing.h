// The crossing from Python into C++ (the `pybind11` row, layer 2 of the stack): Python values become
// binding::IValues, the binding layer is called, the result becomes a Python object, and strata's C++
// errors become Python exceptions. Two entries, both in crossing.cpp:
//   _strata._op(index, *args)          the hot entry every fully typed positional call takes
//   _strata.call(name, args, kwargs)   pybind11's dispatcher: keywords, conversions, everything else
// and one that calls several (x[index]: indexing.cpp).
// See Note [Two entries into the extension] in crossing.cpp.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "layers/binding/binding.h"
#include "lib/tensor.h"

namespace strata::python {

// strata.Error, strata.UsageError, strata.UnavailableError on the module (Note [Errors across the
// language boundary]); call first: every other binding may raise them.
void create_exceptions(pybind11::module_& m);

// Adds _op and call. `tensor_type` is strata._strata.Tensor (a pybind11 class with the default
// std::unique_ptr<Tensor> holder), read and created directly on the hot path.
void bind_crossing(pybind11::module_& m, PyTypeObject* tensor_type);

// x[index]'s walk in C++: _strata._index (indexing.cpp, Note [Indexing in the extension]).
void bind_indexing(pybind11::module_& m);

// What the entries share with indexing.cpp, which calls operators through the binding layer as _op does:
// - the Python error for the C++ exception in flight (call in a catch block; pybind11's translation);
void set_error_in_flight();
// - a new strata.Tensor owning `t` (Note [The result as a pybind11 instance]);
PyObject* new_tensor_object(Tensor&& t);
// - `value` boxed as argument `position` (1-based) of `schema`, as the hot entry boxes it: the same
//   conversions and the same errors (an int past int64 is a ValueError naming the argument).
binding::IValue box_argument(PyObject* value, const binding::Schema& schema, size_t position);

// strata's short dtype names ("f32") and numpy's names ("float32") as used across the boundary.
DType resolve_dtype(const std::string& text);  // UsageError naming what is allowed
std::string python_dtype_name(DType d);

}  // namespace strata::python
