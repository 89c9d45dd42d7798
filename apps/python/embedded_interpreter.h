// What the two files of libstrata_python.so share (python_embed.cpp: the interpreter, strata's call, the
// module's table; torch_peer.cpp: --peer torch): the embedded interpreter's helpers and the peer's entry.
// Internal to the module: nothing outside apps/python includes it.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "apps/python/python_module_abi.h"
#include "layers/frontend/frontend.h"

namespace strata::python_module {

// The first line of a Python exception's text (pybind11 appends the traceback after it).
std::string python_error_text(pybind11::error_already_set& e);
// The virtual environment the interpreter uses, "/root/.cache/strata/venv (VIRTUAL_ENV)", or "none (why)"
// (Note [The embedded Python's environment] in python_embed.cpp).
std::string python_environment();
// Starts the interpreter once (no Python signal handlers; never finalised: Note [The Python module]).
void ensure_interpreter();
// Imports strata from `package_dir` with this module's copy of the extension as strata._strata;
// UnavailableError saying why when it cannot.
pybind11::module_ import_strata(const std::string& package_dir);
// The positional and keyword arguments of `call` as Python objects (keyword-only arguments by name);
// `replaced[i]`, where given and not null, stands for argument i (a --view made in Python).
void python_arguments(const frontend::PreparedCall& call, pybind11::tuple& args, pybind11::dict& kwargs,
                      const std::vector<pybind11::object>& replaced = {});
// The call's arguments as Python source ("self, other", "x, stride=(2, 1)"), for the report's words.
std::string argument_text(const frontend::PreparedCall& call);

// --peer torch (torch_peer.cpp): the namespace its Python runs in (made once), and the call's peer.
pybind11::dict torch_peer_namespace();
std::unique_ptr<PeerCall> make_torch_call(const frontend::PreparedCall& call, const std::string& package_dir,
                                          const PeerOptions& options);

}  // namespace strata::python_module
