// Finding the modules the program loads on demand (libstrata_cuda.so, Note [The CUDA module];
// libstrata_python.so, Note [The Python module]): one rule for both.
#pragma once

#include <string>

namespace strata::app {

// The directory of the running executable (/proc/self/exe), or "" when unreadable.
std::string executable_dir();

// Where module `file_name` is: $`env_var` when set (taken as given: dlopen says what is wrong with it),
// otherwise the first copy that exists next to the executable or at `build_path` (where this build wrote
// it). "" with `why` set when there is none.
std::string find_module_file(const char* file_name, const char* env_var, const char* build_path, std::string& why);

}  // namespace strata::app
