// Finding the modules strata loads on demand (libstrata_cuda.so, Note [The CUDA module], loaded by the
// measuring core; libstrata_python.so, Note [The Python module], and libstrata_ptx.so, Note [The PTX
// module], loaded by the strata program): one rule for all.
#pragma once

#include <string>

namespace strata::measure {

// The directory of the running executable (/proc/self/exe), or "" when unreadable.
std::string executable_dir();

// Where module `file_name` is: $`env_var` when set (taken as given: dlopen says what is wrong with it),
// otherwise the first copy that exists next to the executable or at `build_path` (where this build wrote
// it). "" with `why` set when there is none.
std::string find_module_file(const char* file_name, const char* env_var, const char* build_path, std::string& why);

}  // namespace strata::measure
