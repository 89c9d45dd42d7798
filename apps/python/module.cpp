// strata._strata: the pybind11 extension behind `import strata` (layer 0 in docs/layers.md).
//
// It is deliberately thin. Tensors are strata::Tensor objects held by pybind11 (this file: creation,
// devices, the Tensor class); operators are NOT bound one by one: the crossing (crossing.cpp) boxes
// Python values into binding::IValue and goes through the binding layer, exactly as the CLI does, and
// `operators()` describes every bound operator's schema so that the pure-Python frontend (strata/_ops.py)
// generates one function per operator. Both come from ops::AllOps through the binding layer (Note [One
// declaration per operator]): a new declaration appears in Python with no edit here. strata's C++
// errors become Python exceptions (Note [Errors across the language boundary] in crossing.cpp).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "apps/python/crossing.h"
#include "apps/python/native_backtrace.h"
#include "apps/python/profile.h"
#include "layers/autograd/engine.h"
#include "layers/binding/binding.h"
#include "layers/dispatch/autocast.h"
#include "layers/dispatch/dispatch.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "lib/parallel.h"
#include "measure/cpu_threads.h"
#include "lib/storage.h"
#include "lib/tensor.h"
#if STRATA_PYTHON_EMBEDDED
#include "apps/python/embedded.h"
#elif STRATA_WITH_CUDA
#include "apps/python/cuda_device.h"
#endif

namespace py = pybind11;

namespace strata::python {
#if !STRATA_PYTHON_EMBEDDED
// compile.cpp: strata.compile's C++ half. Not in the strata program's Python module, which links no
// compiler layer (its symbols resolve against the executable's).
void bind_compiler(py::module_& m);
#endif
namespace {

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
  // The CUDA module the strata program loads: its kernels are registered on this first CUDA use.
  return module_cuda_device(request, text);
#else
  throw UnavailableError("device '" + text +
                         "': this strata was built without CUDA support (STRATA_CUDA=OFF or no toolkit); use "
                         "device='cpu'");
#endif
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
  if (device.is_cpu()) {
    const frontend::HostMemory host = frontend::host_memory();
    try {
      frontend::check_fits(size_t(bytes), host.bytes, device, "a tensor of size [" + shape.str() + "]");
    } catch (const UsageError& e) {
      // Where the host figure came from: a refusal on the CPU is rare enough to say what was read.
      throw UsageError(std::string(e.what()) + " (" + host.source + ")");
    }
    return;
  }
  const size_t available =
#if STRATA_PYTHON_EMBEDDED
      embedded_available_bytes(device);
#elif STRATA_WITH_CUDA
      module_available_bytes(device);
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

enum class Fill { kZeros, kUniform, kNormal, kValue };

// The values strata.zeros/rand/randn/full fill: float draws, or full's number (a double).
std::function<double()> filler(Fill fill, std::mt19937_64& rng, double value) {
  switch (fill) {
    case Fill::kUniform:
      return [&rng, uniform = std::uniform_real_distribution<float>(0.0f, 1.0f)]() mutable { return uniform(rng); };
    case Fill::kNormal:
      return [&rng, normal = std::normal_distribution<float>(0.0f, 1.0f)]() mutable { return normal(rng); };
    case Fill::kValue: return [value] { return value; };
    case Fill::kZeros: break;
  }
  return [] { return 0.0; };
}

// value is full's number: stored in f64 as it is, in the other dtypes rounded to f32 first, as torch.full's
// c10::Half(double) / BFloat16(double) conversions do (the draws are floats already: exact either way).
Tensor create(const std::vector<int64_t>& sizes, Fill fill, const std::string& dtype_text,
              const std::string& device_text, std::optional<uint64_t> seed, double value = 0.0) {
  const Shape shape = checked_shape(sizes);
  const DType dtype = resolve_dtype(dtype_text);
  const Device device = resolve_device(device_text);
  check_size(shape, dtype, device);
  Tensor host = Tensor::empty(shape, dtype, kCPU);
  std::mt19937_64 own(seed.value_or(0));
  const std::function<double()> next = filler(fill, seed ? own : generator(), value);
  const int64_t n = host.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double v = next();
    switch (dtype) {
      case DType::kF32: host.data<float>()[i] = static_cast<float>(v); break;
      case DType::kF64: host.data<double>()[i] = v; break;
      case DType::kF16: host.data<uint16_t>()[i] = reference::float_to_half(static_cast<float>(v)); break;
      case DType::kBF16: host.data<uint16_t>()[i] = reference::float_to_bf16(static_cast<float>(v)); break;
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
  constexpr int kNeeded = py::detail::npy_api::NPY_ARRAY_ALIGNED_ | py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  if ((flags & kNeeded) != kNeeded) throw py::value_error("from_numpy: the array must be aligned and writeable");
  std::vector<int64_t> sizes(array.shape(), array.shape() + array.ndim());
  const Shape shape = checked_shape(sizes);
  // A strided array is shared as it lies, a view with the array's strides (torch.from_numpy's rule): numpy
  // counts strides in bytes, a tensor in elements. Negative strides would put elements below the data
  // pointer, which a storage offset cannot express here; torch refuses them in the same words.
  const auto itemsize = static_cast<int64_t>(dt.itemsize());
  Shape strides = shape;
  int64_t span = shape.numel() == 0 ? 0 : 1;  // elements from the first to one past the last, inclusive
  for (int i = 0; i < shape.ndim; ++i) {
    const auto bytes = static_cast<int64_t>(array.strides()[i]);
    if (bytes < 0)
      throw py::value_error(
          "At least one stride in the given numpy array is negative, and tensors with negative strides are not "
          "currently supported. (You can probably work around this by making a copy of your array  with "
          "array.copy().) ");
    if (bytes % itemsize != 0)
      throw py::value_error("given numpy array strides not a multiple of the element byte size. Copy the numpy "
                            "array to reallocate the memory.");
    strides[i] = bytes / itemsize;
    if (shape.numel() != 0) span += (shape[i] - 1) * strides[i];
  }
  PyObject* owner = array.ptr();
  Py_INCREF(owner);
  auto storage = std::make_shared<Storage>(
      const_cast<void*>(array.data()), size_t(span * itemsize), kCPU,
      [](void* context, void*, size_t) {
        if (!Py_IsInitialized()) return;  // at exit the interpreter frees the array itself
        py::gil_scoped_acquire gil;
        Py_DECREF(static_cast<PyObject*>(context));
      },
      owner);
  return Tensor::from_storage(std::move(storage), shape, strides, dtype);  // a tensor of its own, strided
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

// Whether strata.compile's capture runs on this thread (the Capture key is on).
bool capturing() { return local_dispatch_key_set().included.has(DispatchKey::kCapture); }

int get_buffer(PyObject* obj, Py_buffer* view, int flags) {
  if (capturing()) {  // np.asarray(t) inside a capture reads values: a graph break (Note [Graph breaks])
    try {
      py::module_::import("strata._errors")
          .attr("break_if_capturing")(
              "data-dependent Python: np.asarray(tensor) reads a captured tensor's values, "
              "which the graph cannot know");
    } catch (py::error_already_set& e) {
      if (view != nullptr) view->obj = nullptr;
      e.restore();
      return -1;
    }
  }
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
  bind_crossing(m, reinterpret_cast<PyTypeObject*>(cls.ptr()));  // _op, call, operators (crossing.cpp)
  bind_indexing(m);  // _index: x[index] (indexing.cpp)
  cls
      .def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.sizes()); })
      .def_property_readonly("dtype", [](const Tensor& t) { return python_dtype_name(t.dtype()); })
      .def_property_readonly("device", [](const Tensor& t) { return t.device().str(); })
      // torch's setter: only a leaf's flag changes; a computed tensor's (a view of a tensor that requires
      // grad included) follows its inputs, and setting it either way raises, in torch's words.
      .def_property("requires_grad", &Tensor::requires_grad,
                    [](Tensor& t, bool value) {
                      if (!t.is_leaf()) {
                        throw UsageError(std::string("you can only change requires_grad flags of leaf variables.") +
                                         (value ? "" : " If you want to use a computed variable in a subgraph that "
                                                       "doesn't require differentiation use var_no_grad = var.detach().") +
                                         " (this tensor was computed by " + t.grad_fn()->name() + ")");
                      }
                      t.set_requires_grad(value);
                    })
      .def_property_readonly("grad_fn", [](const Tensor& t) -> py::object {
        const std::shared_ptr<GradNode> fn = t.grad_fn();
        if (fn == nullptr) return py::none();
        return py::str(fn->name());
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
      // torch's detach(): the same storage, sizes and strides, no grad_fn and requires_grad off, so
      // backward stops there; a tensor of its own, not a view, as torch's is (Tensor::detach).
      .def("detach", &Tensor::detach)
      // torch's x._is_view(): made by a view op, sharing its base's memory (detach's result is not one).
      .def("_is_view", &Tensor::is_view)
      .def("_strides", [](const Tensor& t) { return shape_tuple(t.strides()); })  // stride(): strata/_views.py
      .def("storage_offset", [](const Tensor& t) { return t.storage_offset(); })
      // torch's x._version: in-place writes to this tensor's memory, through it or any view of it
      // (Note [Version counter] in lib/storage.h).
      .def_property_readonly("_version", [](const Tensor& t) { return t.defined() ? t.storage()->version() : 0u; })
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
// program's Python module (STRATA_PYTHON_EMBEDDED, Note [The Python module] in python_module_abi.h) the
// program calls it to create `strata._strata` before importing the package.
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
  // strata.autocast's state on the calling thread (layers/dispatch/autocast.h): read and set on __enter__,
  // put back on __exit__ (Note [Autocast contexts] in strata/__init__.py).
  m.def("_autocast_state", [] {
    const AutocastState state = autocast_state();
    return py::make_tuple(state.enabled, std::string(dtype_name(state.dtype)));
  });
  m.def("_set_autocast_state", [](bool enabled, const std::string& d) { set_autocast_state({enabled, resolve_dtype(d)}); },
        py::arg("enabled"), py::arg("dtype"));
  const auto sizes = py::arg("sizes"), dtype = py::arg("dtype"), device = py::arg("device"), seed = py::arg("seed");
  m.def("zeros", [](const std::vector<int64_t>& s, const std::string& d, const std::string& dev) {
    return create(s, Fill::kZeros, d, dev, std::nullopt);
  }, sizes, dtype, device);
  m.def("full", [](const std::vector<int64_t>& s, double value, const std::string& d, const std::string& dev) {
    return create(s, Fill::kValue, d, dev, std::nullopt, value);
  }, sizes, py::arg("value"), dtype, device);
  m.def("rand", [](const std::vector<int64_t>& s, const std::string& d, const std::string& dev, std::optional<uint64_t> sd) {
    return create(s, Fill::kUniform, d, dev, sd);
  }, sizes, dtype, device, seed);
  m.def("randn", [](const std::vector<int64_t>& s, const std::string& d, const std::string& dev, std::optional<uint64_t> sd) {
    return create(s, Fill::kNormal, d, dev, sd);
  }, sizes, dtype, device, seed);
  // Grad mode (strata.no_grad()): this thread's flag the dispatcher reads (NoGradGuard's), set around a
  // with-block by the Python context manager.
  m.def("_grad_enabled", [] { return grad_mode_enabled(); });
  m.def("_set_grad_enabled", [](bool enabled) { detail::t_grad_enabled = enabled; }, py::arg("enabled"));
  m.def("manual_seed", [](uint64_t s) { generator().seed(s); }, py::arg("seed"));
  // strata.set_num_threads / get_num_threads, as torch's: the intra-op and OpenBLAS threads
  // (measure/cpu_threads.h). The package checks the argument's type; the count is checked here.
  m.def("_set_num_threads", [](int64_t n) {
    if (n < 1 || n > parallel::kMaxThreads)
      throw UsageError("set_num_threads: " + std::to_string(n) + " is out of range: it must be an integer from 1 to " +
                       std::to_string(parallel::kMaxThreads));
    measure::set_cpu_threads(int(n), "strata.set_num_threads");
  }, py::arg("n"));
  m.def("get_num_threads", [] { return parallel::num_threads(); });
  m.def("_apply_thread_environment", &measure::apply_cpu_threads_from_environment);
  m.def("from_numpy", &from_numpy, py::arg("array"));
  m.attr("cuda_build") = bool(STRATA_WITH_CUDA);
  // The operators with a CUDA kernel in the dispatcher: none until the first CUDA use loads the CUDA
  // module (tests/python check the loading path with it, GPU or not).
  m.def("_cuda_kernel_ops", [] {
    std::vector<std::string> names;
    for (const OperatorEntry& e : Dispatcher::instance().operators())
      if (e.kernel(DispatchKey::kCUDA) != nullptr) names.emplace_back(e.name());
    return names;
  });
  // Whether a capture runs on this thread: the package turns data-dependent reads into graph breaks then
  // (Note [Graph breaks] in strata/_errors.py).
  m.def("_capturing", &capturing);
  add_probes(m.ptr());
  bind_profile(m);
  bind_layer_timing(m);
#if !STRATA_PYTHON_EMBEDDED
  bind_compiler(m);
  // Off unless STRATA_NATIVE_BACKTRACE is set (Note [A native backtrace on a crash]); the CLI's embedded
  // module leaves the program's signals alone.
  m.attr("_native_backtrace") = install_native_backtrace_if_asked();
#endif
}
