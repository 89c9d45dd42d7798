// libstrata_python.so: the embedded interpreter behind --frontend python, --peer torch and the Python
// lines of `strata devices` (Note [The Python module] in python_module_abi.h). Its strata symbols resolve
// against the executable; only this file, torch_peer.cpp (--peer torch, which shares this file's
// interpreter helpers through embedded_interpreter.h) and the extension's sources (module.cpp,
// crossing.cpp, ...) are compiled into it.
#include <dlfcn.h>

#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "apps/python/embedded.h"
#include "apps/python/embedded_interpreter.h"
#include "apps/python/python_module_abi.h"
#include "lib/error.h"
#include "measure/device_session.h"

namespace py = pybind11;

namespace strata::python {

Device embedded_cuda_device(const frontend::DeviceRequest& request, const std::string& text) {
  try {
    return measure::choose_device(request, false).device;
  } catch (const UnavailableError& e) {
    throw UnavailableError("device '" + text + "': " + e.what());
  }
}

size_t embedded_available_bytes(Device device) { return measure::available_bytes(device); }

}  // namespace strata::python

namespace strata::python_module {
namespace {

// Note [The embedded Python's environment]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The embedded interpreter cannot find a virtual environment itself (its prefix comes from libpython, not
// from VENV/bin/python), so it is told which one, as `strata sass` finds its tools (Note [Finding the
// disassemblers]): an activated environment (VIRTUAL_ENV, as `source VENV/bin/activate` sets it), else the
// project's environment where scripts/install-python-deps makes it ($STRATA_VENV, else
// $XDG_CACHE_HOME/strata/venv, else ~/.cache/strata/venv; torch 2.x, docs/build.md), else none (Debian's
// dist-packages alone). The chosen one is honoured as its own python would: its site-packages after
// PYTHONPATH and before the system's, so its torch wins over Debian's. It must be made from a python of
// the same version as the embedded one (its compiled packages are built for that): one whose
// lib/pythonX.Y/site-packages does not exist for this version is not used. Reports name the one used.
constexpr const char* kUseVirtualEnvSource = R"py(
import os, site, sys
if os.environ.get("VIRTUAL_ENV"):
    venv, source = os.environ["VIRTUAL_ENV"], "VIRTUAL_ENV"
elif os.environ.get("STRATA_VENV"):
    venv, source = os.environ["STRATA_VENV"], "STRATA_VENV"
else:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.environ.get("HOME", "/"), ".cache")
    venv, source = os.path.join(cache, "strata", "venv"), "the project's, made by scripts/install-python-deps"
packages = os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
if not os.path.isdir(packages):
    environment = f"none ({source}: {venv} has no {packages[len(venv) + 1:]})"
else:
    environment = f"{venv} ({source})"
    if packages not in sys.path:
        system = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        at = system[0] if system else len(sys.path)
        before = list(sys.path)
        site.addsitedir(packages)  # also runs the environment's .pth files
        added = [p for p in sys.path if p not in before]
        sys.path[:] = before[:at] + added + before[at:]
)py";

std::string& environment_used() {
  static std::string s_environment;
  return s_environment;
}

void use_virtual_env() {
  try {
    py::dict scope;  // not __main__'s globals
    py::exec(kUseVirtualEnvSource, scope);
    environment_used() = scope["environment"].cast<std::string>();
  } catch (py::error_already_set& e) {
    throw UnavailableError("the embedded Python could not use its environment (Note [The embedded Python's "
                           "environment]: VIRTUAL_ENV, else STRATA_VENV, else ~/.cache/strata/venv): " +
                           python_error_text(e));
  }
}

// An int[] argument (conv2d's stride, view's size) as a Python tuple.
py::object python_tuple(const Shape& list) {
  py::tuple t(size_t(list.ndim));
  for (int i = 0; i < list.ndim; ++i) t[size_t(i)] = py::int_(list[i]);
  return t;  // C++20 moves a local into the return value even across the base conversion
}

// An int[] argument as Python writes a tuple: "(2, 1)", "(3,)".
std::string python_tuple_text(const Shape& list) {
  std::string text = "(";
  for (int i = 0; i < list.ndim; ++i) text += (i ? ", " : "") + std::to_string(list[i]);
  return text + (list.ndim == 1 ? ",)" : ")");
}

}  // namespace

std::string python_environment() {
  ensure_interpreter();
  return environment_used();
}

std::string python_error_text(py::error_already_set& e) {
  std::string text = e.what();
  // pybind11 appends the traceback after a blank line; the first line is what the user needs.
  if (size_t nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  return text;
}

// Starts the interpreter (once) and imports strata from `package_dir`, with this module's copy of the
// extension registered as strata._strata. Throws UnavailableError saying why it failed.
void ensure_interpreter() {
  if (!Py_IsInitialized()) {
    // No Python signal handlers: strata's SIGINT handling stays (a Python KeyboardInterrupt would not
    // reach the harness's interruption check). Not finalised either (see the Note).
    py::initialize_interpreter(false);
    use_virtual_env();
  }
}

py::module_ import_strata(const std::string& package_dir) {
  static std::string s_dir;
  ensure_interpreter();
  if (!s_dir.empty()) {
    if (s_dir != package_dir) throw Error("strata was already imported from " + s_dir);
    return py::module_::import("strata");
  }
  try {
    py::module_ sys = py::module_::import("sys");
    sys.attr("path").attr("insert")(0, package_dir);
    static PyModuleDef s_def{};
    py::module_ ext = py::module_::create_extension_module("strata._strata", nullptr, &s_def);
    python::define_module(ext);
    sys.attr("modules")["strata._strata"] = ext;
    py::module_ strata = py::module_::import("strata");
    if (!py::object(strata.attr("_strata")).is(ext)) throw Error("strata._strata is not the program's own copy");
    s_dir = package_dir;
    return strata;
  } catch (py::error_already_set& e) {
    throw UnavailableError("import strata from " + package_dir + " failed in the embedded Python: " +
                           python_error_text(e));
  }
}

// The positional and keyword arguments of `call` as Python objects (keyword-only arguments by name);
// `replaced[i]`, where given and not null, stands for argument i (a --view made in Python).
void python_arguments(const frontend::PreparedCall& call, py::tuple& args, py::dict& kwargs,
                      const std::vector<py::object>& replaced) {
  const binding::Schema& schema = call.op->schema();
  std::vector<py::object> positional;
  for (size_t i = 0; i < call.args.size() && i < schema.arguments.size(); ++i) {
    const binding::IValue& v = call.args[i];
    py::object o = i < replaced.size() && replaced[i] ? replaced[i]
                   : v.is_tensor() ? py::cast(v.tensor())
                   : v.is_int()  ? py::object(py::int_(v.to_int()))
                   : v.is_double() ? py::object(py::float_(v.to_double()))
                   : v.is_bool()   ? py::object(py::bool_(v.to_bool()))
                   : v.is_int_list() ? python_tuple(v.to_int_list())
                                     : py::object(py::none());
    if (schema.arguments[i].keyword_only) {
      kwargs[py::str(schema.arguments[i].name)] = o;
    } else {
      positional.push_back(o);
    }
  }
  args = py::tuple(positional.size());
  for (size_t i = 0; i < positional.size(); ++i) args[i] = positional[i];
}

std::string argument_text(const frontend::PreparedCall& call) {
  const binding::Schema& schema = call.op->schema();
  std::string text;
  for (size_t i = 0; i < call.args.size() && i < schema.arguments.size(); ++i) {
    const binding::IValue& v = call.args[i];
    std::string value = v.is_tensor() ? schema.arguments[i].name
                        : v.is_int()  ? std::to_string(v.to_int())
                        : v.is_double() ? py::str(py::float_(v.to_double())).cast<std::string>()
                        : v.is_bool()   ? (v.to_bool() ? "True" : "False")
                        : v.is_int_list() ? python_tuple_text(v.to_int_list())
                                          : "None";
    text += (text.empty() ? "" : ", ") +
            (schema.arguments[i].keyword_only ? schema.arguments[i].name + "=" + value : value);
  }
  return text;
}

namespace {

// --view NAME=KIND through the Python API (docs/views.md): the same view of the same buffer the C++
// frontend made (apply_input_views), written as a user would, once, before any call: base.t(), or
// base[..., ::N]. Its strides are checked against the C++ view's, so both front ends time the same layout.
py::object python_view(const frontend::PreparedCall::InputView& view, const Tensor& cpp_view, std::string& text) {
  py::object base = py::cast(view.base);
  py::object made;
  if (view.kind == "t") {
    made = base.attr("t")();
    text = "base.t()";
  } else {
    const int64_t step = std::stoll(view.kind.substr(5));  // "sliceN", checked by apply_input_views
    py::object every = py::module_::import("builtins").attr("slice")(py::none(), py::none(), step);
    made = base.attr("__getitem__")(py::make_tuple(py::ellipsis(), every));
    text = "base[..., ::" + std::to_string(step) + "]";
  }
  const Tensor& got = made.cast<const Tensor&>();
  if (!(got.strides() == cpp_view.strides()) || !(got.sizes() == cpp_view.sizes()) ||
      got.data_ptr() != cpp_view.data_ptr()) {
    throw Error("--view " + view.kind + ": the Python view " + text + " has strides [" + got.strides().str() +
                "], the C++ one [" + cpp_view.strides().str() + "]");
  }
  if (cpp_view.requires_grad()) made.attr("requires_grad") = true;  // a leaf, as the C++ view is
  return made;
}

class StrataCall final : public PythonCall {
 public:
  StrataCall(const frontend::PreparedCall& call, const std::string& package_dir) {
    py::module_ strata = import_strata(package_dir);
    const std::string name = call.op->schema().name;
    // The frontend's probes (Note [The python and pybind11 rows]) record into the active timeline, which
    // is the harness's: this module shares the program's strata (Note [The Python module]).
    strata.attr("_ops").attr("set_rows")(true);
    std::vector<py::object> views(call.args.size());
    std::string made;
    for (const frontend::PreparedCall::InputView& view : call.views) {
      std::string text;
      views[view.arg] = python_view(view, call.args[view.arg].tensor(), text);
      made += (made.empty() ? " with " : ", ") + call.op->schema().arguments[view.arg].name + " = " + text;
    }
    python_arguments(call, args_, kwargs_, views);
    expression_ = public_function(strata, name, package_dir) + "(" + argument_text(call) + ")" +
                  (made.empty() ? "" : made + " made once before the calls");
  }
  ~StrataCall() override = default;

  // Sets fn_ to what a user types for operator `name` and returns it as written: strata.mul(self, 2.0)
  // for mul.Scalar, as torch.mul(x, 2.0) is aten::mul.Scalar (Note [Overloads]). The public function
  // of an overloaded name picks by the arguments' types; it is asked which operator these arguments pick,
  // and where that is not `name` the operator's own function is called (strata.OPERATORS["mul.Scalar"]),
  // so that the frontend always runs the op it traces.
  std::string public_function(const py::module_& strata, const std::string& name, const std::string& package_dir) {
    const std::string base = name.substr(0, name.find('.'));
    py::dict functions = strata.attr("FUNCTIONS");
    py::dict operators = strata.attr("OPERATORS");
    if (!operators.contains(name)) {
      throw UnavailableError("the strata package in " + package_dir + " has no operator " + name +
                             " (strata.OPERATORS); rebuild it with this strata");
    }
    if (functions.contains(base)) {
      py::object fn = functions[py::str(base)];
      const bool picks_name = py::hasattr(fn, "overload")
                                  ? fn.attr("overload")(*args_, **kwargs_).cast<std::string>() == name
                                  : fn.is(operators[py::str(name)]);
      if (picks_name) {
        fn_ = fn;
        return "strata." + base;
      }
    }
    fn_ = operators[py::str(name)];
    return "strata.OPERATORS[\"" + name + "\"]";
  }

  binding::IValue call() override {
    PyObject* out = PyObject_Call(fn_.ptr(), args_.ptr(), kwargs_.ptr());
    if (out == nullptr) {
      py::error_already_set e;
      throw Error(expression_ + " raised " + python_error_text(e));
    }
    py::object result = py::reinterpret_steal<py::object>(out);
    return binding::IValue(result.cast<const Tensor&>());
  }
  std::string expression() const override { return expression_; }
  std::string environment() const override { return python_environment(); }

 private:
  py::object fn_;
  py::tuple args_;
  py::dict kwargs_;
  std::string expression_;
};

std::string library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&Py_GetVersion), &info) != 0 && info.dli_fname != nullptr) return info.dli_fname;
  return "?";
}

PythonInfo describe(const std::string& package_dir) {
  ensure_interpreter();
  PythonInfo info;
  info.executable = STRATA_PYTHON_EXECUTABLE;
  info.library = library_path();
  info.environment = python_environment();
  try {
    py::module_ strata = import_strata(package_dir);
    info.package_dir = py::str(strata.attr("__file__")).cast<std::string>();
    info.package_dir = info.package_dir.substr(0, info.package_dir.rfind('/'));
  } catch (const Error& e) {
    info.package_error = e.what();
  }
  py::module_ sys = py::module_::import("sys");
  info.version = py::str(sys.attr("version")).cast<std::string>();
  if (size_t nl = info.version.find('\n'); nl != std::string::npos) info.version.resize(nl);
  try {
    py::dict ns = torch_peer_namespace();
    info.torch_version = py::module_::import("torch").attr("__version__").cast<std::string>();
    info.torch_cuda = ns["cuda_description"]().cast<std::string>();
  } catch (py::error_already_set& e) {
    info.torch_error = python_error_text(e);
  }
  return info;
}

std::unique_ptr<PythonCall> bind_strata(const frontend::PreparedCall& call, const std::string& package_dir) {
  ensure_interpreter();  // the call's members are Python objects
  return std::make_unique<StrataCall>(call, package_dir);
}

std::unique_ptr<PeerCall> bind_torch(const frontend::PreparedCall& call, const std::string& package_dir,
                                     const PeerOptions& options) {
  ensure_interpreter();
  return make_torch_call(call, package_dir, options);
}

}  // namespace
}  // namespace strata::python_module

extern "C" __attribute__((visibility("default"))) const StrataPythonModule* strata_python_module_v1() {
  static const StrataPythonModule kModule{kStrataPythonModuleVersion, &strata::python_module::describe,
                                          &strata::python_module::bind_strata, &strata::python_module::bind_torch};
  return &kModule;
}
