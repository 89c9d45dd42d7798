// The strata program's side of its Python module: loading libstrata_python.so and finding the strata
// package (Note [The Python module] in apps/python/python_module_abi.h, with the table both share).
#pragma once

#include <string>

#include "apps/python/python_module_abi.h"

namespace strata::app {

// The Python module, loading libstrata_python.so on first use; UnavailableError saying why when it
// cannot be loaded. Later calls give the same answer.
const StrataPythonModule& require_python_module();
// The same, or nullptr with `why` set.
const StrataPythonModule* python_module(std::string& why);
// Where the strata package is (the directory holding strata/), or UnavailableError saying where it
// looked (see the Note).
std::string python_package_dir();
// Host nanoseconds loading the module and starting the interpreter took (0 until then).
double python_load_ns();

}  // namespace strata::app
