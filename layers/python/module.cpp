// strata._strata: the pybind11 extension behind `import strata` (layer 0 in docs/DESIGN's table).
//
// It is deliberately thin. Tensors are strata::Tensor objects held by pybind11; operators are NOT bound
// one by one: `call(name, args, kwargs)` boxes the Python values into binding::IValue and goes through the
// binding layer (binding::find_operator(name).call), exactly as the CLI does, and `operators()` describes
// every bound operator's schema so that the pure-Python frontend (strata/_ops.py) generates one function
// per operator. Both come from ops::AllOps through the binding layer (Note [One declaration per
// operator]): a new declaration appears in Python with no edit here.
//
// strata's C++ errors become Python exceptions (see Note [Errors across the language boundary]).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "layers/autograd/engine.h"
#include "layers/binding/binding.h"
#include "layers/dispatch/autocast.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/python/profile.h"
#include "lib/error.h"
#include "lib/storage.h"
#include "lib/tensor.h"
#if STRATA_PYTHON_EMBEDDED
#include "layers/python/embedded.h"
#elif STRATA_WITH_CUDA
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#endif

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
//   strata::UnavailableError -> strata.UnavailableError(strata.Error)        valid, but this machine
//                               cannot serve it (no GPU, out of memory)
// The message is strata's own. Wrong Python types are TypeError, raised by the pure-Python frontend
// before anything reaches C++ (as torch's python_arg_parser does).
PyObject* g_error = nullptr;
PyObject* g_usage_error = nullptr;
PyObject* g_unavailable_error = nullptr;

void create_exceptions(py::module_& m) {
  g_error = PyErr_NewException("strata.Error", PyExc_RuntimeError, nullptr);
  PyObject* usage_bases = PyTuple_Pack(2, g_error, PyExc_ValueError);
  g_usage_error = PyErr_NewException("strata.UsageError", usage_bases, nullptr);
  Py_DECREF(usage_bases);
  g_unavailable_error = PyErr_NewException("strata.UnavailableError", g_error, nullptr);
  // The module holds a reference to each; so do these globals, for the life of the process.
  m.attr("Error") = py::reinterpret_borrow<py::object>(g_error);
  m.attr("UsageError") = py::reinterpret_borrow<py::object>(g_usage_error);
  m.attr("UnavailableError") = py::reinterpret_borrow<py::object>(g_unavailable_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const UsageError& e) {
      PyErr_SetString(g_usage_error, e.what());
    } catch (const UnavailableError& e) {
      PyErr_SetString(g_unavailable_error, e.what());
    } catch (const Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });
}

// ---- devices -------------------------------------------------------------------------------------

// "cpu", "cuda", "cuda:N". A CUDA device that this machine cannot serve is an UnavailableError that
// says why (no driver, no device N, a build without CUDA), before any tensor is created.
Device resolve_device(const std::string& text) {
  const frontend::DeviceRequest request = frontend::parse_device(text);
  if (request.automatic) throw UsageError("device 'auto' is for the CLI; use 'cpu' or 'cuda' (or 'cuda:N')");
  if (request.device.is_cpu()) return kCPU;
#if STRATA_PYTHON_EMBEDDED
  // Inside the strata program (Note [The Python module]): the program's CUDA module decides.
  return embedded_cuda_device(request, text);
#elif STRATA_WITH_CUDA
  namespace rt = runtime::cuda;
  const rt::Probe p = rt::probe();
  if (!p.usable) throw UnavailableError("device '" + text + "': " + p.reason + "; use device='cpu'");
  if (request.device.index >= p.device_count) {
    throw UnavailableError("device '" + text + "': this machine has " + std::to_string(p.device_count) +
                           " CUDA device" + (p.device_count == 1 ? "" : "s"));
  }
  if (std::string why = rt::unsupported_reason(request.device.index); !why.empty())
    throw UnavailableError("device '" + text + "': " + why);
  rt::init_device(request.device.index);
  return request.device;
#else
  throw UnavailableError("device '" + text +
                         "': this strata was built without CUDA support (STRATA_CUDA=OFF or no toolkit); use "
                         "device='cpu'");
#endif
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

// ---- creation ------------------------------------------------------------------------------------

Shape checked_shape(const std::vector<int64_t>& sizes) {
  if (sizes.size() > size_t(Shape::kMaxDims))
    throw UsageError("strata tensors have at most 4 dimensions, got " + std::to_string(sizes.size()));
  Shape s;
  for (int64_t d : sizes) {
    if (d < 0) throw UsageError("sizes must be non-negative, got " + std::to_string(d) + " in (" + [&] {
      std::string t;
      for (size_t i = 0; i < sizes.size(); ++i) t += (i ? ", " : "") + std::to_string(sizes[i]);
      return t;
    }() + ")");
    s[s.ndim++] = d;
  }
  return s;
}

// Refuses before allocating what would not fit (the frontend's rule for the CLI, the same message).
void check_size(const Shape& shape, DType dtype, Device device) {
  unsigned __int128 bytes = element_size(dtype);
  for (int i = 0; i < shape.ndim; ++i) bytes = std::min<unsigned __int128>(bytes * uint64_t(shape[i]), INT64_MAX);
  const size_t available = device.is_cpu() ? frontend::available_host_bytes() :
#if STRATA_PYTHON_EMBEDDED
                                           embedded_available_bytes(device);
#elif STRATA_WITH_CUDA
                                           runtime::cuda::free_bytes(device.index);
#else
                                           0;
#endif
  frontend::check_fits(size_t(bytes), available, device, "a tensor of size [" + shape.str() + "]");
}

// The process's generator: manual_seed() resets it; a call with its own seed leaves it alone.
std::mt19937_64& generator() {
  static std::mt19937_64 engine(0);
  return engine;
}

enum class Fill { kZeros, kUniform, kNormal };

Tensor create(const std::vector<int64_t>& sizes, Fill fill, const std::string& dtype_text,
              const std::string& device_text, std::optional<uint64_t> seed) {
  const Shape shape = checked_shape(sizes);
  const DType dtype = resolve_dtype(dtype_text);
  const Device device = resolve_device(device_text);
  check_size(shape, dtype, device);
  Tensor host = Tensor::empty(shape, dtype, kCPU);
  std::mt19937_64 own(seed.value_or(0));
  std::mt19937_64& rng = seed ? own : generator();
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto next = [&]() -> float {
    switch (fill) {
      case Fill::kZeros: return 0.0f;
      case Fill::kUniform: return uniform(rng);
      case Fill::kNormal: return normal(rng);
    }
    return 0.0f;
  };
  const int64_t n = host.numel();
  for (int64_t i = 0; i < n; ++i) {
    const float v = next();
    switch (dtype) {
      case DType::kF32: host.data<float>()[i] = v; break;
      case DType::kF64: host.data<double>()[i] = v; break;
      case DType::kF16: host.data<uint16_t>()[i] = reference::float_to_half(v); break;
      case DType::kBF16: host.data<uint16_t>()[i] = reference::float_to_bf16(v); break;
    }
  }
  return host.to(device);
}

// Zero-copy: the tensor's storage holds a reference to the array, released (under the GIL) when the last
// tensor viewing it goes. The pure-Python side hands over only C-contiguous, aligned, writeable arrays
// in native byte order (np.require copies the others, once, and says so in docs/python.md).
Tensor from_numpy(const py::array& array) {
  const py::dtype dt = array.dtype();
  DType dtype;
  if (!dt.attr("isnative").cast<bool>()) throw py::value_error("from_numpy: the array must be in native byte order");
  if (dt.equal(py::dtype::of<float>())) dtype = DType::kF32;
  else if (dt.equal(py::dtype::of<double>())) dtype = DType::kF64;
  else if (dt.kind() == 'f' && dt.itemsize() == 2) dtype = DType::kF16;
  else throw py::type_error("from_numpy: strata takes float32, float64 or float16 arrays, not " + std::string(py::str(py::handle(dt))));
  const int flags = py::detail::array_proxy(array.ptr())->flags;
  constexpr int kNeeded = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_ |
                          py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  if ((flags & kNeeded) != kNeeded) throw py::value_error("from_numpy: the array must be C-contiguous, aligned and writeable");
  std::vector<int64_t> sizes(array.shape(), array.shape() + array.ndim());
  const Shape shape = checked_shape(sizes);
  PyObject* owner = array.ptr();
  Py_INCREF(owner);
  auto storage = std::make_shared<Storage>(
      const_cast<void*>(array.data()), size_t(array.nbytes()), kCPU,
      [](void* context, void*, size_t) {
        if (!Py_IsInitialized()) return;  // at exit the interpreter frees the array itself
        py::gil_scoped_acquire gil;
        Py_DECREF(static_cast<PyObject*>(context));
      },
      owner);
  return Tensor::from_storage(std::move(storage), shape, dtype);
}

// ---- values across the boundary -----------------------------------------------------------------

// Note [The crossing's fast path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The pybind11 row is pybind11's dispatcher plus what `call` does before the binding zone opens and
// after it closes. Measured per call at n=16 (docs/performance.md, bench/python_overhead_bench.py), the
// first version spent most of it on work no layer needs: a pybind11 isinstance<Tensor> and then a cast
// for each argument (two type-registry lookups), two std::strings per argument built for an error
// message that is almost never raised, and a heap-allocated vector for the boxed arguments. Now an
// argument whose type is exactly strata.Tensor is read straight from its pybind11 instance, error texts
// are built only on the way to an error, and up to kInlineArgs arguments are boxed on the stack.
// Everything else (other types, subclasses) takes pybind11's general path, unchanged.
PyTypeObject* g_tensor_type = nullptr;  // strata._strata.Tensor, set by bind_tensor
constexpr size_t kInlineArgs = 8;       // the binding layer's own limit (BoundOperator: 8 arguments)

// Where an argument was given, for the error message: "argument 2" or "argument 'alpha'".
struct ArgumentPlace {
  size_t position = 0;                 // 1-based; 0 when given by keyword
  const std::string* keyword = nullptr;
  std::string str() const { return keyword ? "argument '" + *keyword + "'" : "argument " + std::to_string(position); }
};

binding::IValue to_ivalue(const py::handle& o, const std::string& op, const ArgumentPlace& where) {
  if (Py_TYPE(o.ptr()) == g_tensor_type) {
    const py::detail::value_and_holder v = reinterpret_cast<py::detail::instance*>(o.ptr())->get_value_and_holder();
    if (v.holder_constructed()) return binding::IValue(*static_cast<const Tensor*>(v.value_ptr()));
  }
  if (o.is_none()) return {};
  if (py::isinstance<Tensor>(o)) return binding::IValue(o.cast<const Tensor&>());
  if (py::isinstance<py::bool_>(o)) return binding::IValue(o.cast<bool>());
  if (py::isinstance<py::int_>(o)) {
    const long long v = PyLong_AsLongLong(o.ptr());
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      throw py::value_error(op + "(): " + where.str() + " does not fit in 64 bits");
    }
    return binding::IValue(int64_t(v));
  }
  if (py::isinstance<py::float_>(o)) return binding::IValue(o.cast<double>());
  // A ScalarType argument (to_copy's dtype): strata._ops turned the Python dtype into strata's short name.
  if (py::isinstance<py::str>(o)) return binding::IValue(resolve_dtype(o.cast<std::string>()));
  throw py::type_error(op + "(): " + where.str() + " must be a Tensor, int, float, bool, dtype or None, not " +
                       std::string(py::str(o.get_type().attr("__name__"))));
}

py::object from_ivalue(const binding::IValue& v) {
  if (v.is_tensor()) return py::cast(v.tensor());
  if (v.is_int()) return py::int_(v.to_int());
  if (v.is_double()) return py::float_(v.to_double());
  if (v.is_bool()) return py::bool_(v.to_bool());
  if (v.is_dtype()) return py::str(python_dtype_name(v.to_dtype()));
  return py::none();
}

// One generic entry for every operator: boxed values through the real binding layer.
py::object call(const std::string& name, const py::tuple& args, const py::dict& kwargs) {
  const binding::BoundOperator& op = binding::find_operator(name);
  // See Note [The crossing's fast path].
  const size_t n = args.size();
  std::array<binding::IValue, kInlineArgs> inline_boxed;
  std::vector<binding::IValue> heap_boxed;  // more than the binding layer takes: it says so, quoting the schema
  if (n > kInlineArgs) heap_boxed.resize(n);
  binding::IValue* boxed = n > kInlineArgs ? heap_boxed.data() : inline_boxed.data();
  for (size_t i = 0; i < n; ++i) boxed[i] = to_ivalue(PyTuple_GET_ITEM(args.ptr(), Py_ssize_t(i)), name, {i + 1, nullptr});
  if (kwargs.empty()) {
    note_arguments(op, std::span<const binding::IValue>(boxed, n));  // strata.profile()'s header; one check when not
    return from_ivalue(op.call(std::span<const binding::IValue>(boxed, n)));
  }
  std::vector<std::string> names;  // binding::Kwarg holds a view
  std::vector<binding::Kwarg> kw;
  names.reserve(kwargs.size());
  kw.reserve(kwargs.size());
  for (auto [k, v] : kwargs) {
    names.push_back(py::cast<std::string>(k));
    kw.push_back({names.back(), to_ivalue(v, name, {0, &names.back()})});
  }
  note_arguments(op, std::span<const binding::IValue>(boxed, n), kw);
  return from_ivalue(op.call(std::span<const binding::IValue>(boxed, n), kw));
}

py::list operators() {
  py::list out;
  int index = 0;  // the operator's index for the _enter probe (Note [The python and pybind11 rows])
  for (const binding::BoundOperator* op : binding::all_operators()) {
    const binding::Schema& s = op->schema();
    py::list arguments;
    for (const binding::Argument& a : s.arguments) {
      py::dict d;
      d["name"] = a.name;
      d["type"] = binding::arg_type_name(a.type);
      d["has_default"] = a.default_value.has_value();
      d["default"] = a.default_value ? from_ivalue(*a.default_value) : py::none();
      d["keyword_only"] = a.keyword_only;
      arguments.append(d);
    }
    py::dict d;
    d["name"] = s.name;
    d["schema"] = s.text;
    d["returns"] = s.returns;
    d["arguments"] = arguments;
    d["index"] = index++;
    out.append(d);
  }
  return out;
}

py::tuple shape_tuple(const Shape& s) {
  py::tuple t(size_t(s.ndim));
  for (int i = 0; i < s.ndim; ++i) t[size_t(i)] = py::int_(s[i]);
  return t;
}

// Why a tensor has no numpy view, or "" if it has one.
std::string no_host_view(const Tensor& t) {
  if (!t.device().is_cpu())
    return "can't convert a " + t.device().str() + " tensor to numpy: copy it to the host first with .cpu()";
  if (t.dtype() == DType::kBF16) return "numpy has no bfloat16: use .numpy_float64() for a float64 copy of the values";
  return "";
}

int get_buffer(PyObject* obj, Py_buffer* view, int flags) {
  std::string why;
  try {
    why = no_host_view(py::handle(obj).cast<const Tensor&>());
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (!why.empty()) {
    if (view != nullptr) view->obj = nullptr;
    PyErr_SetString(PyExc_TypeError, why.c_str());
    return -1;
  }
  return py::detail::pybind11_getbuffer(obj, view, flags);
}

void bind_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor", py::buffer_protocol());
  g_tensor_type = reinterpret_cast<PyTypeObject*>(cls.ptr());  // Note [The crossing's fast path]
  cls
      .def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.sizes()); })
      .def_property_readonly("dtype", [](const Tensor& t) { return python_dtype_name(t.dtype()); })
      .def_property_readonly("device", [](const Tensor& t) { return t.device().str(); })
      .def_property("requires_grad", &Tensor::requires_grad, &Tensor::set_requires_grad)
      .def_property_readonly("grad_fn", [](const Tensor& t) -> py::object {
        if (!t.grad_fn()) return py::none();
        return py::str(t.grad_fn()->name());
      })
      // Autograd (layers/autograd, docs/autograd.md): the gradient a backward pass left in a leaf, and
      // the pass itself. The engine runs with the GIL held: its formulas are short dispatcher calls.
      .def_property_readonly("grad", [](const Tensor& t) -> py::object {
        Tensor g = t.grad();
        if (!g.defined()) return py::none();
        return py::cast(std::move(g));
      })
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def(
          "backward",
          [](const Tensor& t, py::object gradient, bool retain_graph) {
            autograd::BackwardOptions options;
            options.retain_graph = retain_graph;
            if (!gradient.is_none() && !py::isinstance<Tensor>(gradient)) {
              throw py::type_error("backward(): gradient must be a strata.Tensor or None, not " +
                                   std::string(py::str(py::type::of(gradient).attr("__name__"))));
            }
            const Tensor g = gradient.is_none() ? Tensor() : gradient.cast<Tensor>();
            return py::str(autograd::backward(t, g, options).path());
          },
          py::arg("gradient") = py::none(), py::arg("retain_graph") = false,
          "Runs the backward pass from this tensor (ones as its gradient if it has one element) and "
          "accumulates into every leaf's .grad; returns the walk, e.g. 'SumBackward > MmBackward > "
          "AccumulateGrad > AccumulateGrad'.")
      .def("_zero_grad", [](const Tensor& t) {
        if (t.autograd_meta() != nullptr) t.set_grad(Tensor());
      })
      .def_property_readonly("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("stride", [](const Tensor& t) { return shape_tuple(t.strides()); })
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def("_to", [](const Tensor& t, const std::string& device) { return t.to(resolve_device(device)); })
      .def("_values_float64", [](const Tensor& t) {
        std::vector<double> v = reference::to_double(t);
        py::array_t<double> out(std::vector<py::ssize_t>(t.sizes().dims.begin(), t.sizes().dims.begin() + t.dim()));
        std::copy(v.begin(), v.end(), out.mutable_data());
        return out;
      })
      .def("_str", &Tensor::str)
      .def("_no_host_view", &no_host_view)
      .def_buffer([](const Tensor& t) -> py::buffer_info {
        // Zero-copy view of host memory; numpy keeps the Tensor object alive while the view lives. Only
        // reached through get_buffer below, which has refused what has no host view.
        std::string format = t.dtype() == DType::kF32 ? py::format_descriptor<float>::format()
                             : t.dtype() == DType::kF64 ? py::format_descriptor<double>::format()
                                                        : std::string("e");
        const auto item = py::ssize_t(element_size(t.dtype()));
        std::vector<py::ssize_t> shape, strides;
        for (int i = 0; i < t.dim(); ++i) {
          shape.push_back(t.size(i));
          strides.push_back(t.strides()[i] * item);
        }
        return py::buffer_info(t.data_ptr(), item, format, t.dim(), shape, strides);
      });
  // pybind11 2.10 calls def_buffer's function with no exception handling (a throw there terminates the
  // process), so what has no host view is refused here first, as a Python error.
  auto* heap = reinterpret_cast<PyHeapTypeObject*>(cls.ptr());
  heap->as_buffer.bf_getbuffer = &get_buffer;
}

}  // namespace
}  // namespace strata::python

// The extension's body. Built as the extension module `_strata` it runs on import; built into the strata
// program's Python module (STRATA_PYTHON_EMBEDDED, Note [The Python module] in apps/strata/python_module.h)
// the program calls it to create `strata._strata` before importing the package.
#if STRATA_PYTHON_EMBEDDED
void strata::python::define_module(py::module_& m) {
#else
PYBIND11_MODULE(_strata, m) {
#endif
  using namespace strata;
  using namespace strata::python;
  m.doc() = "strata's extension module: tensors and one generic operator call through the binding layer";
  create_exceptions(m);
  bind_tensor(m);
  m.def("operators", &operators, "every operator's schema, from ops::AllOps through the binding layer");
  // strata.autocast's guard (layers/dispatch/autocast.h): alive from __enter__ to __exit__ on this thread.
  py::class_<AutocastGuard>(m, "_AutocastGuard")
      .def(py::init([](const std::string& d) { return std::make_unique<AutocastGuard>(resolve_dtype(d)); }),
           py::arg("dtype"));
  m.def("call", &call, py::arg("name"), py::arg("args"), py::arg("kwargs"),
        "boxes the arguments and calls binding::find_operator(name)");
  const auto sizes = py::arg("sizes"), dtype = py::arg("dtype"), device = py::arg("device"), seed = py::arg("seed");
  m.def("zeros", [](const std::vector<int64_t>& s, const std::string& d, const std::string& dev) {
    return create(s, Fill::kZeros, d, dev, std::nullopt);
  }, sizes, dtype, device);
  m.def("rand", [](const std::vector<int64_t>& s, const std::string& d, const std::string& dev, std::optional<uint64_t> sd) {
    return create(s, Fill::kUniform, d, dev, sd);
  }, sizes, dtype, device, seed);
  m.def("randn", [](const std::vector<int64_t>& s, const std::string& d, const std::string& dev, std::optional<uint64_t> sd) {
    return create(s, Fill::kNormal, d, dev, sd);
  }, sizes, dtype, device, seed);
  m.def("manual_seed", [](uint64_t s) { generator().seed(s); }, py::arg("seed"));
  m.def("from_numpy", &from_numpy, py::arg("array"));
  m.attr("cuda_build") = bool(STRATA_WITH_CUDA);
  add_probes(m.ptr());
  bind_profile(m);
  bind_layer_timing(m);
}
