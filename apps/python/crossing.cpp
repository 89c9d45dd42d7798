// The crossing from Python into C++: the code of the `pybind11` row (crossing.h).
#include "apps/python/crossing.h"

#include <pybind11/pybind11.h>

#include <array>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "apps/python/probes.h"
#include "apps/python/profile.h"
#include "layers/binding/binding.h"
#include "layers/ops/operators.h"
#include "lib/child_process.h"
#include "lib/error.h"

namespace py = pybind11;

namespace strata::python {
namespace {

// Note [Errors across the language boundary]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// lib/error.h has one rule per kind of failure; Python gets one exception class per kind, each a
// subclass of the built-in a Python user would catch:
//   strata::Error            -> strata.Error(RuntimeError)                  library failure, bug
//   strata::UsageError       -> strata.UsageError(strata.Error, ValueError)  the caller asked for
//                               something malformed (shapes that do not fit, a bad size, a bad device)
//   strata::IndexRangeError  -> strata.IndexRangeError(strata.UsageError, IndexError)  a dim or an
//                               index out of range (transpose's dims, select's index), as torch raises
//   strata::UnavailableError -> strata.UnavailableError(strata.Error)        valid, but this machine
//                               cannot serve it (no GPU, out of memory)
// The message is strata's own. Wrong Python types are TypeError, raised by the pure-Python frontend
// before anything reaches C++ (as torch's python_arg_parser does).
PyObject* g_error = nullptr;
PyObject* g_usage_error = nullptr;
PyObject* g_index_error = nullptr;
PyObject* g_unavailable_error = nullptr;

// Note [Ctrl-C while strata waits for a child]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// strata.compile's C++ compiler (and ptxas) runs while this thread holds the GIL, so a Ctrl-C only sets
// Python's signal flag; nothing would raise until the compile ended. wait_for_child polls a check every
// 10 ms (Note [Waiting for a child] in lib/child_process.h); the extension's check runs Python's signal
// handlers, and when one raised (KeyboardInterrupt), keeps that exception here and says "interrupted": the
// wait kills the child's process group, removes its temporary from the kernel cache and throws
// Error(kInterrupted), which set_strata_error turns back into the kept exception. So the user sees the
// KeyboardInterrupt their handler raised, and nothing of the compile is left.
thread_local PyObject* g_signal_type = nullptr;
thread_local PyObject* g_signal_value = nullptr;
thread_local PyObject* g_signal_traceback = nullptr;

bool python_signal_raised() {
  if (PyGILState_Check() == 0) return false;  // a wait on a thread without the GIL: no Python to ask
  if (PyErr_CheckSignals() == 0) return false;
  Py_XDECREF(g_signal_type);
  Py_XDECREF(g_signal_value);
  Py_XDECREF(g_signal_traceback);
  PyErr_Fetch(&g_signal_type, &g_signal_value, &g_signal_traceback);
  return true;
}

void set_strata_error(const Error& e) {
  if (e.code() == ExitCode::kInterrupted && g_signal_type != nullptr) {
    PyErr_Restore(g_signal_type, g_signal_value, g_signal_traceback);  // steals the references
    g_signal_type = g_signal_value = g_signal_traceback = nullptr;
    return;
  }
  if (dynamic_cast<const IndexRangeError*>(&e) != nullptr) PyErr_SetString(g_index_error, e.what());
  else if (dynamic_cast<const UsageError*>(&e) != nullptr) PyErr_SetString(g_usage_error, e.what());
  else if (dynamic_cast<const UnavailableError*>(&e) != nullptr) PyErr_SetString(g_unavailable_error, e.what());
  else PyErr_SetString(g_error, e.what());
}

// What pybind11's dispatcher does for an exception, for the entry that does not go through it: called in
// a catch block, sets the Python error for the exception in flight.
void set_error_from_current_exception() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const Error& e) {
    set_strata_error(e);
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "strata: an unknown C++ exception crossed into Python");
  }
}

// Note [Two entries into the extension]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every strata.<op>(...) call crosses into C++ through one of two functions, and the pybind11 row's span
// is named after the one it took:
//
//   _strata._op(index, *args)  the hot entry: a METH_FASTCALL function of the module (the interpreter
//       passes its argument array; no tuple, no dict, no name to look up). The frontend takes it when
//       every argument already has its schema type and keyword-only arguments are at their defaults
//       (Note [The frontend's fast path] in strata/_ops.py): the common call.
//   _strata.call(name, args, kwargs)  a pybind11 def: pybind11's dispatcher loads a str, a tuple and a
//       dict, and each value is converted whatever its Python type. Keywords, ints given for floats,
//       numpy dtypes, and every error path take it.
//
// Why two (measured, docs/performance.md): pybind11's dispatcher alone costs ~100 ns per call from
// Python (function_record lookup, argument_loader, loader_life_support), a METH_FASTCALL function ~20 ns.
// PyTorch's own torch.matmul crosses the same way: its Python bindings are generated CPython functions
// (python_arg_parser), not pybind11 defs; strata keeps pybind11 for the Tensor type, its instances and
// every other binding, and for the general entry. Both entries box values alike (to_ivalue) and call the
// same BoundOperator; a test calls every operator through both and compares. x[index] has an entry of its
// own, which calls several operators in one crossing (Note [Indexing in the extension] in indexing.cpp).
//
// Note [The crossing's fast path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// What either entry does before the binding zone opens and after it closes is the rest of the row.
// Measured per call at n=16, the first version spent most of it on work no layer needs: a pybind11
// isinstance<Tensor> and then a cast for each argument (two type-registry lookups), two std::strings per
// argument built for an error message that is almost never raised, a heap-allocated vector for the boxed
// arguments, and a result registered in pybind11's instance map. Now an argument whose type is exactly
// strata.Tensor is read straight from its pybind11 instance, error texts are built only on the way to an
// error, up to kInlineArgs arguments are boxed on the stack, and the result is created by wrap_tensor.
// Everything else (other types, subclasses) takes pybind11's general conversions, unchanged.
PyTypeObject* g_tensor_type = nullptr;  // strata._strata.Tensor, set by bind_crossing
constexpr size_t kInlineArgs = 8;       // the binding layer's own limit (BoundOperator: 8 arguments)

// Note [The result as a pybind11 instance]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// py::cast(Tensor) looks the C++ type up in pybind11's type registry (hashing its name), looks the new
// pointer up in the registry of live instances, allocates the instance, and registers it there (a
// node allocated in an unordered_multimap, erased again on deallocation). wrap_tensor builds the same
// instance (pybind11's make_new_instance, the value moved into a new Tensor, the std::unique_ptr holder
// constructed, owned) without the two lookups and without registering it: creating and deallocating a
// result costs ~60 ns instead of ~140 (measured A/B in one process, over returning None). The registry only lets pybind11 hand back the existing Python object when C++ returns
// a pointer or reference to an object that already has one; strata never returns tensors by pointer or
// reference, and pybind11's deallocation deregisters only instances marked registered
// (detail/class.h, clear_instance). Written against pybind11 2.x's instance layout, read in 2.10
// (Debian 12's); other versions (the GPU machine's pybind11 wheel may be 3.x) take py::cast, the same
// object at the cost measured above.
PyObject* wrap_tensor(Tensor&& t) {
#if PYBIND11_VERSION_MAJOR == 2 && PYBIND11_VERSION_MINOR >= 10
  PyObject* self = py::detail::make_new_instance(g_tensor_type);
  if (self == nullptr) throw py::error_already_set();
  auto* inst = reinterpret_cast<py::detail::instance*>(self);
  inst->owned = true;
  py::detail::value_and_holder v = inst->get_value_and_holder();
  try {
    v.value_ptr() = new Tensor(std::move(t));
  } catch (...) {
    Py_DECREF(self);  // nothing constructed yet: deallocation frees the layout only
    throw;
  }
  new (std::addressof(v.holder<std::unique_ptr<Tensor>>())) std::unique_ptr<Tensor>(v.value_ptr<Tensor>());
  v.set_holder_constructed();
  return self;
#else
  return py::cast(std::move(t), py::return_value_policy::move).release().ptr();
#endif
}

// Where an argument was given, for the error message: "argument 'padding' (position 5)" or "argument
// 'alpha'"; "argument 9" past the schema's arguments (the binding layer then refuses the count).
struct ArgumentPlace {
  size_t position = 0;                 // 1-based; 0 when given by keyword
  const std::string* keyword = nullptr;
  const binding::Schema* schema = nullptr;  // names a positional argument
  std::string str() const {
    if (keyword) return "argument '" + *keyword + "'";
    if (schema != nullptr && position >= 1 && position <= schema->arguments.size())
      return "argument '" + schema->arguments[position - 1].name + "' (position " + std::to_string(position) + ")";
    return "argument " + std::to_string(position);
  }
};

binding::IValue to_ivalue(const py::handle& o, const std::string& op, const ArgumentPlace& where) {
  if (Py_TYPE(o.ptr()) == g_tensor_type) {
    const py::detail::value_and_holder v = reinterpret_cast<py::detail::instance*>(o.ptr())->get_value_and_holder();
    if (v.holder_constructed()) return binding::IValue(*static_cast<const Tensor*>(v.value_ptr()));
  }
  // A plain int or float next, by exact type: pybind11's isinstance<Tensor> below looks the class up in
  // its type registry first, which cost a view's int arguments ~90 ns each (bench/python_views_bench.py).
  // bool is a subclass of int, never an exact int.
  if (PyLong_CheckExact(o.ptr())) {
    const long long v = PyLong_AsLongLong(o.ptr());
    if (v != -1 || !PyErr_Occurred()) return binding::IValue(int64_t(v));
    PyErr_Clear();  // out of int64's range: the general branch below words it
  }
  if (PyFloat_CheckExact(o.ptr())) return binding::IValue(PyFloat_AS_DOUBLE(o.ptr()));
  if (o.is_none()) return {};
  if (py::isinstance<Tensor>(o)) return binding::IValue(o.cast<const Tensor&>());
  if (py::isinstance<py::bool_>(o)) return binding::IValue(o.cast<bool>());
  if (py::isinstance<py::int_>(o)) {
    const long long v = PyLong_AsLongLong(o.ptr());
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      throw py::value_error(op + "(): " + where.str() + " must be an int in [-2**63, 2**63), got " +
                            std::string(py::str(o)));
    }
    return binding::IValue(int64_t(v));
  }
  if (py::isinstance<py::float_>(o)) return binding::IValue(o.cast<double>());
  // An int[] argument (view's size, permute's dims): a tuple or list of at most 4 ints.
  if (PyTuple_Check(o.ptr()) || PyList_Check(o.ptr())) {
    const py::sequence seq = py::reinterpret_borrow<py::sequence>(o);
    if (seq.size() > Shape::kMaxDims) {
      throw py::value_error(op + "(): " + where.str() + " has " + std::to_string(seq.size()) +
                            " ints; strata's tensors have at most " + std::to_string(Shape::kMaxDims) + " dims");
    }
    Shape list;
    for (const py::handle item : seq) {
      if (!PyLong_Check(item.ptr()) || PyBool_Check(item.ptr())) {
        throw py::type_error(op + "(): " + where.str() + " must be a tuple of ints, but found element of type " +
                             std::string(py::str(item.get_type().attr("__name__"))));
      }
      const long long v = PyLong_AsLongLong(item.ptr());
      if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        throw py::value_error(op + "(): " + where.str() + " must hold ints in [-2**63, 2**63), got " +
                              std::string(py::str(item)));
      }
      list[list.ndim++] = int64_t(v);
    }
    return binding::IValue(list);
  }
  // A ScalarType argument (to_copy's dtype): strata._ops turned the Python dtype into strata's short name.
  if (py::isinstance<py::str>(o)) return binding::IValue(resolve_dtype(o.cast<std::string>()));
  throw py::type_error(op + "(): " + where.str() + " must be a Tensor, int, float, bool, dtype or None, not " +
                       std::string(py::str(o.get_type().attr("__name__"))));
}

// The positional values of one call, boxed for the binding layer by either entry: on the stack up to
// kInlineArgs, on the heap past that (more than the binding layer takes: it says so, quoting the schema).
class BoxedArgs {
 public:
  BoxedArgs(PyObject* const* values, size_t n, const binding::Schema& schema) : n_(n) {
    if (n > kInlineArgs) heap_.resize(n);
    binding::IValue* out = n > kInlineArgs ? heap_.data() : inline_.data();
    for (size_t i = 0; i < n; ++i) out[i] = to_ivalue(values[i], schema.name, {i + 1, nullptr, &schema});
  }
  std::span<const binding::IValue> span() const { return {n_ > kInlineArgs ? heap_.data() : inline_.data(), n_}; }

 private:
  size_t n_;
  std::array<binding::IValue, kInlineArgs> inline_;
  std::vector<binding::IValue> heap_;
};

py::object from_ivalue(binding::IValue&& v) {
  if (v.is_tensor()) return py::reinterpret_steal<py::object>(wrap_tensor(std::move(v).take_tensor()));
  if (v.is_int()) return py::int_(v.to_int());
  if (v.is_double()) return py::float_(v.to_double());
  if (v.is_bool()) return py::bool_(v.to_bool());
  if (v.is_dtype()) return py::str(python_dtype_name(v.to_dtype()));
  if (v.is_int_list()) {
    py::tuple out(v.to_int_list().ndim);
    for (int i = 0; i < v.to_int_list().ndim; ++i) out[size_t(i)] = py::int_(v.to_int_list()[i]);
    return out;  // C++20 moves a local into the return value even across the base conversion
  }
  return py::none();
}

// The general entry (Note [Two entries into the extension]): pybind11's dispatcher, then boxed values
// through the real binding layer.
py::object call(const std::string& name, const py::tuple& args, const py::dict& kwargs) {
  const binding::BoundOperator& op = binding::find_operator(name);
  const BoxedArgs boxed(PySequence_Fast_ITEMS(args.ptr()), args.size(), op.schema());
  if (kwargs.empty()) {
    note_arguments(op, boxed.span());  // strata.profile()'s header; one check when not
    return from_ivalue(op.call(boxed.span()));
  }
  std::vector<std::string> names;  // binding::Kwarg holds a view
  std::vector<binding::Kwarg> kw;
  names.reserve(kwargs.size());
  kw.reserve(kwargs.size());
  for (auto [k, v] : kwargs) {
    names.push_back(py::cast<std::string>(k));
    kw.push_back({names.back(), to_ivalue(v, name, {0, &names.back()})});
  }
  note_arguments(op, boxed.span(), kw);
  return from_ivalue(op.call(boxed.span(), kw));
}

// The declaration's float64 reference of the call name(*args) (binding::BoundOperator::reference): its
// values as a flat list of floats, in the output's row-major order.
py::list reference(const std::string& name, const py::tuple& args) {
  const binding::BoundOperator& op = binding::find_operator(name);
  const BoxedArgs boxed(PySequence_Fast_ITEMS(args.ptr()), args.size(), op.schema());
  py::list out;
  for (double v : op.reference(boxed.span())) out.append(v);
  return out;
}

// Each declaration's kTorchName (its PyTorch function, what --peer torch calls), by operator name. Read
// from the declarations, so that the tests can pair every op with torch's (tests/python/
// torch_agreement_test.py) with no list of their own.
py::dict torch_names() {
  py::dict out;
  ops::AllOps::for_each([&](auto decl) {
    using Op = decltype(decl);
    if constexpr (ops::kHasTorchName<Op>) out[py::str(Op::kName)] = Op::kTorchName;
  });
  return out;
}

py::list operators() {
  const py::dict torch_name = torch_names();
  py::list out;
  int index = 0;  // the operator's index for the _enter probe (Note [The python and pybind11 rows])
  for (const binding::BoundOperator* op : binding::all_operators()) {
    const binding::Schema& s = op->schema();
    py::list arguments;
    for (const binding::Argument& a : s.arguments) {
      py::dict d;
      d["name"] = a.name;
      // int[2] (conv2d's stride) as torch writes it: strata._ops takes an int or a tuple for it.
      d["type"] = a.list_size > 0 ? "int[" + std::to_string(a.list_size) + "]" : std::string(binding::arg_type_name(a.type));
      d["has_default"] = a.default_value.has_value();
      d["default"] = a.default_value ? from_ivalue(binding::IValue(*a.default_value)) : py::none();
      d["keyword_only"] = a.keyword_only;
      arguments.append(d);
    }
    py::dict d;
    d["name"] = s.name;
    d["schema"] = s.text;
    d["returns"] = s.returns;
    d["arguments"] = arguments;
    d["index"] = index++;
    py::object torch_function = py::none();  // an op without a kTorchName has no torch counterpart
    if (torch_name.contains(s.name)) torch_function = torch_name[py::str(s.name)];
    d["torch_name"] = torch_function;
    out.append(d);
  }
  return out;
}

// The hot entry (Note [Two entries into the extension]): _op(index, *args), index = the operator's
// place in binding::all_operators() (the "index" operators() gives the frontend), or ~index when the
// frontend's probes are on (Note [The python and pybind11 rows] in probes.h).
const std::vector<const binding::BoundOperator*>& operator_table() {
  static const std::vector<const binding::BoundOperator*> kTable = binding::all_operators();
  return kTable;
}

PyObject* op_entry(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
  try {
    if (argc < 1) {
      PyErr_SetString(PyExc_TypeError, "_op(index, *args): the operator's index is missing");
      return nullptr;
    }
    Py_ssize_t index = PyLong_AsSsize_t(argv[0]);
    const bool traced = index < 0;
    if (traced) {
      if (index == -1 && PyErr_Occurred()) return nullptr;
      // ~index: the frontend's probes are on; this entry opens the pybind11 span and, when it returns a
      // result, closes the call's spans (Note [The python and pybind11 rows] in probes.h). On an error
      // the frontend's _exit closes them.
      open_crossing_span("_strata._op");
      index = ~index;
    }
    const std::vector<const binding::BoundOperator*>& table = operator_table();
    if (size_t(index) >= table.size()) {
      PyErr_Format(PyExc_ValueError, "_op(): no operator with index %zd (there are %zu)", index, table.size());
      return nullptr;
    }
    const binding::BoundOperator& op = *table[size_t(index)];
    const BoxedArgs boxed(argv + 1, size_t(argc - 1), op.schema());
    note_arguments(op, boxed.span());  // strata.profile()'s header; one check when not
    PyObject* result = from_ivalue(op.call(boxed.span())).release().ptr();
    if (traced) close_call_spans();
    return result;
  } catch (...) {
    set_error_from_current_exception();
    return nullptr;
  }
}

PyMethodDef g_entry_methods[] = {
    {"_op", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&op_entry)), METH_FASTCALL,
     "_op(index, *args): the hot entry into the binding layer (Note [Two entries into the extension])"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

// crossing.h's names for indexing.cpp: wrappers, so that the functions they call stay internal to this
// file. Given external linkage themselves, wrap_tensor and set_error_from_current_exception were no
// longer inlined into the hot entry as they are here, and every view from Python cost ~50 ns more
// (bench/python_views_bench.py, measured A/B). The result goes through from_ivalue, which has callers
// enough already, so that wrap_tensor keeps its one caller.
PyObject* new_tensor_object(Tensor&& t) { return from_ivalue(binding::IValue(std::move(t))).release().ptr(); }
void set_error_in_flight() { set_error_from_current_exception(); }
binding::IValue box_argument(PyObject* value, const binding::Schema& schema, size_t position) {
  return to_ivalue(value, schema.name, {position, nullptr, &schema});
}

void create_exceptions(py::module_& m) {
  g_error = PyErr_NewException("strata.Error", PyExc_RuntimeError, nullptr);
  PyObject* usage_bases = PyTuple_Pack(2, g_error, PyExc_ValueError);
  g_usage_error = PyErr_NewException("strata.UsageError", usage_bases, nullptr);
  Py_DECREF(usage_bases);
  PyObject* index_bases = PyTuple_Pack(2, g_usage_error, PyExc_IndexError);
  g_index_error = PyErr_NewException("strata.IndexRangeError", index_bases, nullptr);
  Py_DECREF(index_bases);
  g_unavailable_error = PyErr_NewException("strata.UnavailableError", g_error, nullptr);
  // The module holds a reference to each; so do these globals, for the life of the process.
  m.attr("Error") = py::reinterpret_borrow<py::object>(g_error);
  m.attr("UsageError") = py::reinterpret_borrow<py::object>(g_usage_error);
  m.attr("IndexRangeError") = py::reinterpret_borrow<py::object>(g_index_error);
  m.attr("UnavailableError") = py::reinterpret_borrow<py::object>(g_unavailable_error);
  set_child_wait_check(&python_signal_raised);  // Note [Ctrl-C while strata waits for a child]
  // pybind11's dispatcher asks its translators; strata's classes are translated here, anything else is
  // left to pybind11's own (RuntimeError with the message).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      set_strata_error(e);
    }
  });
}

DType resolve_dtype(const std::string& text) {
  if (std::optional<DType> d = parse_dtype(text)) return *d;
  throw UsageError("unknown dtype '" + text + "': use f32, f64, f16 or bf16");
}

std::string python_dtype_name(DType d) {
  switch (d) {
    case DType::kF32: return "float32";
    case DType::kF64: return "float64";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
  }
  return "?";
}

void bind_crossing(py::module_& m, PyTypeObject* tensor_type) {
  g_tensor_type = tensor_type;
  m.def("operators", &operators,
        "every operator's schema and its kTorchName (torch_name), from ops::AllOps through the binding layer");
  m.def("reference", &reference, py::arg("name"), py::arg("args"),
        "the declaration's float64 reference of name(*args), as a flat list (the tests' reference of last resort)");
  m.def("call", &call, py::arg("name"), py::arg("args"), py::arg("kwargs"),
        "boxes the arguments and calls binding::find_operator(name) (the general entry)");
  if (PyModule_AddFunctions(m.ptr(), g_entry_methods) < 0) throw py::error_already_set();
}

}  // namespace strata::python
