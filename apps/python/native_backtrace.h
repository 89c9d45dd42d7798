#pragma once

namespace strata::python {

// STRATA_NATIVE_BACKTRACE=1: on a fatal signal, the native frames on stderr before the previous handler
// runs (Note [A native backtrace on a crash] in native_backtrace.cpp). Returns whether it installed.
bool install_native_backtrace_if_asked();

}  // namespace strata::python
