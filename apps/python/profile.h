// strata.profile() in C++: a Timeline that records every strata op called from Python while it is
// active, and the same reports `strata trace` prints (reports/), built from it. See docs/python.md.
#pragma once

#include <Python.h>

#include <cstdint>
#include <span>
#include <string>

#include "layers/binding/binding.h"

namespace pybind11 {
class module_;
}

namespace strata::python {

// The op id for the next frontend call when a profile is recording on this thread (and remembers which
// operator it was), 0 when none is. Called by the _enter probe (probes.cpp).
uint32_t next_profiled_call(uint16_t op_index);

// Marks the call `op_id` of the profile recording on this thread as failed (it raised): counted apart and
// left out of the figures. Called by the _exit_failed probe (probes.cpp).
void mark_profiled_call_failed(uint32_t op_id);

// Remembers the arguments of the first call of each operator while a profile records on this thread,
// for the table's header ("Tensor[16x16] f32 cpu, ..."); a no-op otherwise. Called by _strata.call.
void note_arguments(const binding::BoundOperator& op, std::span<const binding::IValue> args,
                    std::span<const binding::Kwarg> kwargs = {});

// Calls of a compiled function (strata.compile) are numbered by the profile like an operator's, under an
// index of their own per label ("relu_matmul"), from kCompiledCallBase up: p.table() gets a block per
// compiled function (Note [Compiled calls in strata.profile()] in compile.cpp).
inline constexpr uint16_t kCompiledCallBase = 0xF000;
uint16_t compiled_call_index(const std::string& label);

void add_probes(PyObject* module);       // probes.cpp
void bind_profile(pybind11::module_& m);        // profile.cpp: _Profile
void bind_layer_timing(pybind11::module_& m);   // layer_timing.cpp: the C++ half of the cross-check

}  // namespace strata::python
