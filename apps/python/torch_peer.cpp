// --peer torch in libstrata_python.so: the same operator and inputs through PyTorch in the embedded
// interpreter (Note [The Python module] in python_module_abi.h): which torch function is strata's operator,
// the inputs converted with their exact values, eager and replayed timings, and torch.profiler's kernels.
#include <pybind11/embed.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "apps/python/embedded_interpreter.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "lib/host_clock.h"

namespace py = pybind11;

namespace strata::python_module {
namespace {

// The Python side of --peer torch: which torch function is strata's operator (by schema name; arguments
// in schema order, keyword-only ones by name), the inputs converted with their exact values, and
// torch.profiler's per-op figures.
constexpr const char* kTorchPeerSource = R"py(
import numpy as np
import torch
import torch.nn.functional as F

# strata schema name -> (torch callable, its name as written). The names are the declarations' kTorchName
# (layers/ops), in TORCH_NAMES before this runs; each is looked up when called, so that a torch without one
# of them still serves the ops it has.
def torch_function(dotted):
    target = torch
    for part in dotted.split(".")[1:]:
        target = getattr(target, part)
    return target


def call_by_name(dotted):
    return lambda *args, **kwargs: torch_function(dotted)(*args, **kwargs)


# The ops whose arguments torch takes differently: strata passes alpha positionally (its schema), torch.add,
# torch.sub and the Tensor methods add_ and sub_ take it by keyword only.
ADAPTERS = {
    "add.Scalar": lambda self, other, alpha=1: torch.add(self, other, alpha=alpha),
    "sub": lambda self, other, alpha=1: torch.sub(self, other, alpha=alpha),
    "sub.Scalar": lambda self, other, alpha=1: torch.sub(self, other, alpha=alpha),
    "add_.Scalar": lambda self, other, alpha=1: self.add_(other, alpha=alpha),
    "sub_": lambda self, other, alpha=1: self.sub_(other, alpha=alpha),
    "sub_.Scalar": lambda self, other, alpha=1: self.sub_(other, alpha=alpha),
}
# The in-place ops (Note [In-place operators]) are torch's Tensor methods (torch.Tensor.relu_ called with
# self), writing the peer's own copy of the inputs, as strata's calls write strata's.
OPS = {name: (ADAPTERS.get(name) or call_by_name(dotted), dotted) for name, dotted in TORCH_NAMES.items()}
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16}


def convert(value, device):
    """A strata.Tensor as a torch tensor with the same values (every strata dtype is exact in float64)."""
    if not hasattr(value, "numpy_float64"):
        return value
    t = torch.from_numpy(value.numpy_float64()).to(DTYPES[value.dtype]).to(device)
    if value.requires_grad:
        t.requires_grad_(True)
    return t


def cuda_description():
    if not torch.cuda.is_available():
        return "built without CUDA" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, no usable device"
    return f"CUDA {torch.version.cuda}, {torch.cuda.device_count()} device(s)"


def make_call(fn, args, kwargs, backward, autocast, device):
    """fn(*args, **kwargs) as strata's call runs: under torch.autocast and followed by y.sum().backward()
    where strata's is. None for the plain call, which C++ makes directly (no Python frame of ours)."""
    if not backward and not autocast:
        return None
    dtype = DTYPES[autocast] if autocast else None
    device_type = device.split(":")[0]

    def call():
        if dtype is not None:
            with torch.autocast(device_type=device_type, dtype=dtype):
                y = fn(*args, **kwargs)
        else:
            y = fn(*args, **kwargs)
        if backward:
            y.sum().backward()
        return y
    return call


def compare_modes(fn, args, kwargs, cuda, k):
    """compare --peer torch: (eager round, replay setup, replay round, replay kind, why no replay), rounds of k
    calls. torch's counterpart of strata's replay: a CUDA Graph of the k calls on a GPU; torch.compile of
    the function on the CPU (inductor, torch 2.x)."""
    sync = torch.cuda.synchronize if cuda else None

    def eager():
        for _ in range(k):
            fn(*args, **kwargs)
        if sync is not None:
            sync()
    if cuda:
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the default stream first, as torch's CUDA Graphs docs ask
            for _ in range(3):
                fn(*args, **kwargs)
        torch.cuda.current_stream().wait_stream(side)

        def capture():
            with torch.cuda.graph(graph):
                for _ in range(k):
                    fn(*args, **kwargs)
            sync()

        def replay():
            graph.replay()
            sync()
        return eager, capture, replay, "CUDA Graph (torch.cuda.CUDAGraph)", ""
    if not hasattr(torch, "compile"):
        return eager, None, None, "", f"PyTorch {torch.__version__} has no torch.compile (2.0 and later): eager only"
    compiled = torch.compile(fn)

    def first_call():  # compiles
        compiled(*args, **kwargs)

    def replay():
        for _ in range(k):
            compiled(*args, **kwargs)
    return eager, first_call, replay, "torch.compile (inductor)", ""


def dtype_name(out):
    return str(out.dtype).replace("torch.", "")


def result_float64(out):
    return out.detach().to("cpu", torch.float64).numpy().ravel()


def profile(fn, args, kwargs, sync, calls, cuda):
    from torch.profiler import ProfilerActivity
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(calls):
            fn(*args, **kwargs)
            if sync is not None:
                sync()
    rows = []
    totals = []
    for e in prof.key_averages():
        device_self = getattr(e, "self_device_time_total", None)
        if device_self is None:
            device_self = getattr(e, "self_cuda_time_total", 0)
        if str(e.device_type).endswith("CUDA"):
            rows.append((e.key, True, device_self, e.count))
        elif e.key.startswith("aten::"):
            rows.append((e.key, False, e.self_cpu_time_total, e.count))
        totals += [float(e.self_cpu_time_total), float(device_self)]
    rows.sort(key=lambda r: (r[1], -r[2]))
    # Some builds (torch 1.13 without Kineto) record whole microseconds per event: say so, so that a
    # mean under that is read as what it is.
    whole_us = bool(totals) and all(t.is_integer() for t in totals)
    return [(k, kernel, us * 1e3 / calls, count / calls) for k, kernel, us, count in rows], 1000.0 if whole_us else 0.0
)py";

class TorchCall final : public PeerCall {
 public:
  TorchCall(const frontend::PreparedCall& call, const std::string& package_dir, const PeerOptions& options)
      : options_(options) {
    import_strata(package_dir);  // converts strata tensors through the package's Tensor methods
    py::dict ns;
    try {
      ns = torch_peer_namespace();
    } catch (py::error_already_set& e) {
      throw UnavailableError(std::string("PyTorch is not importable by the embedded ") + STRATA_PYTHON_EXECUTABLE +
                             " with environment " + python_environment() + " (" + python_error_text(e) +
                             "): run scripts/install-python-deps (it makes ~/.cache/strata/venv with torch 2.x, "
                             "used by default; docs/build.md), or set VIRTUAL_ENV or STRATA_VENV to an environment "
                             "with torch, or install python3-torch (Debian, torch 1.13)");
    }
    torch_ = py::module_::import("torch");
    const std::string name = call.op->schema().name;
    py::dict ops = ns["OPS"];
    if (!ops.contains(name)) {
      std::string known;
      for (auto item : ops) known += (known.empty() ? "" : ", ") + item.first.cast<std::string>();
      throw UsageError("--peer torch: strata's " + name + " has no PyTorch counterpart here; ops with one: " + known);
    }
    py::tuple entry = ops[py::str(name)];
    fn_ = entry[0];
    const Device device = call.args.front().tensor().device();
    const std::string torch_device = device.is_cpu() ? "cpu" : "cuda:" + std::to_string(device.index);
    device_ = torch_device;
    cuda_ = device.is_cuda();
    try {
      if (cuda_ && !torch_.attr("cuda").attr("is_available")().cast<bool>()) {
        throw UnavailableError("--peer torch: this PyTorch (" + torch_.attr("__version__").cast<std::string>() +
                               ") cannot use the GPU: " + ns["cuda_description"]().cast<std::string>());
      }
      py::tuple strata_args;
      python_arguments(call, strata_args, kwargs_);
      args_ = py::tuple(strata_args.size());
      py::object convert = ns["convert"];
      for (size_t i = 0; i < strata_args.size(); ++i) args_[i] = convert(strata_args[i], torch_device);
      if (cuda_) sync_ = torch_.attr("cuda").attr("synchronize");
      wrapped_ = ns["make_call"](
          fn_, args_, kwargs_, options.backward,
          options.autocast.empty() ? py::object(py::none()) : py::str(options.autocast), torch_device);
    } catch (py::error_already_set& e) {
      throw UnavailableError("--peer torch: the inputs could not be made in torch: " + python_error_text(e));
    }
    work_ = options.backward ? "forward + y.sum().backward()" : "forward";
    if (!options.autocast.empty()) {
      work_ += ", under torch.autocast(\"" + std::string(cuda_ ? "cuda" : "cpu") + "\", torch." +
               options.autocast + ")";
    }
    namespace_ = ns;
    expression_ = entry[1].cast<std::string>() + "(" + argument_text(call) + ")";
    // Which torch, and from where: the embedded Python finds an environment by itself (Note [The embedded
    // Python's environment]), so the report says which one it used.
    const std::string torch_file = py::str(torch_.attr("__file__")).cast<std::string>();
    version_ = "PyTorch " + torch_.attr("__version__").cast<std::string>() + " (" +
               std::to_string(torch_.attr("get_num_threads")().cast<int>()) + " intra-op threads; " +
               ns["cuda_description"]().cast<std::string>() + "; " + torch_file.substr(0, torch_file.rfind('/')) +
               ", Python " + py::module_::import("platform").attr("python_version")().cast<std::string>() +
               " embedded from " + STRATA_PYTHON_EXECUTABLE + ")";
  }

  void call() override {
    last_ = py::object();
    PyObject* out = wrapped_.is_none() ? PyObject_Call(fn_.ptr(), args_.ptr(), kwargs_.ptr())
                                       : PyObject_CallNoArgs(wrapped_.ptr());
    if (out == nullptr) {
      py::error_already_set e;
      // torch refusing the op (a dtype it has no kernel for on this device, say): valid, but not here.
      throw UnavailableError("--peer torch: " + expression_ + " (" + work_ + ") raised " + python_error_text(e));
    }
    last_ = py::reinterpret_steal<py::object>(out);
    if (cuda_) sync_();
    if (!dtype_checked_) check_result_dtype();
  }
  std::string expression() const override { return expression_; }
  std::string version() const override { return version_; }
  std::string work() const override { return work_; }

  PeerRounds compare_rounds(int64_t k, int64_t warmup, int64_t rounds) override {
    PeerRounds r;
    auto timed = [&](const py::object& round, std::vector<double>& out) {
      for (int64_t i = 0; i < warmup; ++i) round();
      for (int64_t i = 0; i < rounds; ++i) {
        const uint64_t t0 = host_clock::ticks();
        round();
        out.push_back(host_clock::elapsed_ns(t0));
      }
    };
    try {
      const bool plain = wrapped_.is_none();
      py::tuple modes = namespace_["compare_modes"](plain ? fn_ : wrapped_, plain ? args_ : py::tuple(),
                                                    plain ? kwargs_ : py::dict(), cuda_, k);
      r.replay_kind = modes[3].cast<std::string>();
      r.why_no_replay = modes[4].cast<std::string>();
      timed(modes[0], r.eager_ns);
      if (!modes[1].is_none()) {
        const uint64_t t0 = host_clock::ticks();
        modes[1]();
        r.setup_ns = host_clock::elapsed_ns(t0);
        timed(modes[2], r.replay_ns);
      }
    } catch (py::error_already_set& e) {
      if (r.eager_ns.empty()) throw UnavailableError("--peer torch: " + expression_ + " raised " + python_error_text(e));
      // torch's replay failing (inductor without a compiler, a capture it refuses) leaves its eager figures.
      r.why_no_replay = r.replay_kind + " failed: " + python_error_text(e);
      r.replay_kind.clear();
      r.replay_ns.clear();
    }
    return r;
  }

  double relative_difference(const Tensor& strata_result) override {
    if (!last_) return -1;
    py::array_t<double> values = namespace_["result_float64"](last_);
    std::vector<double> ref(values.data(), values.data() + values.size());
    return reference::relative_error(strata_result, ref);
  }

  std::vector<double> result_on(const frontend::PreparedCall& fresh) override {
    try {
      py::tuple strata_args;
      py::dict kwargs;
      python_arguments(fresh, strata_args, kwargs);
      py::tuple args(strata_args.size());
      py::object convert = namespace_["convert"];
      for (size_t i = 0; i < strata_args.size(); ++i) args[i] = convert(strata_args[i], device_);
      py::array_t<double> values = namespace_["result_float64"](fn_(*args, **kwargs));
      return std::vector<double>(values.data(), values.data() + values.size());
    } catch (py::error_already_set& e) {
      throw UnavailableError("--peer torch: " + expression_ + " on fresh inputs raised " + python_error_text(e));
    }
  }

  std::vector<reports::PeerReport::ProfileRow> profile(int calls, double& resolution_ns, std::string& why) override {
    std::vector<reports::PeerReport::ProfileRow> rows;
    try {
      const bool plain = wrapped_.is_none();
      py::tuple result = namespace_["profile"](plain ? fn_ : wrapped_, plain ? args_ : py::tuple(),
                                               plain ? kwargs_ : py::dict(), cuda_ ? sync_ : py::none(), calls, cuda_);
      resolution_ns = result[1].cast<double>();
      for (auto item : result[0].cast<py::list>()) {
        py::tuple t = item.cast<py::tuple>();
        rows.push_back({t[0].cast<std::string>(), t[1].cast<bool>(), t[2].cast<double>(), t[3].cast<double>()});
      }
    } catch (py::error_already_set& e) {
      why = "torch.profiler failed: " + python_error_text(e);
    }
    return rows;
  }

 private:
  // Once, after the first call: torch computed in the dtype strata did, or the two sides did different
  // work (torch 1.13's CPU autocast, for one, knows no float16: it warns and computes float32).
  void check_result_dtype() {
    dtype_checked_ = true;
    const std::string got = namespace_["dtype_name"](last_).cast<std::string>();
    if (!options_.result_dtype.empty() && got != options_.result_dtype) {
      throw UnavailableError("--peer torch: " + expression_ + " (" + work_ + ") computed " + got +
                             " where strata computed " + options_.result_dtype + ": this PyTorch (" +
                             torch_.attr("__version__").cast<std::string>() +
                             ") does not do the same work here, so its time would not compare");
    }
  }

  PeerOptions options_;
  bool dtype_checked_ = false;
  std::string work_;
  py::module_ torch_;
  py::dict namespace_;
  py::object fn_, sync_, last_, wrapped_ = py::none();
  py::tuple args_;
  py::dict kwargs_;
  bool cuda_ = false;
  std::string expression_, version_, device_;
};

}  // namespace

py::dict torch_peer_namespace() {
  static py::dict* s_namespace = nullptr;
  if (s_namespace == nullptr) {
    auto* ns = new py::dict();  // lives as long as the interpreter: never finalised
    (*ns)["__name__"] = "strata_torch_peer";
    py::dict torch_names;  // the declarations' kTorchName, by operator name
    ops::AllOps::for_each([&](auto decl) {
      using Op = decltype(decl);
      if constexpr (ops::kHasTorchName<Op>) torch_names[py::str(Op::kName)] = Op::kTorchName;
    });
    (*ns)["TORCH_NAMES"] = torch_names;
    py::exec(kTorchPeerSource, *ns);
    s_namespace = ns;
  }
  return *s_namespace;
}

std::unique_ptr<PeerCall> make_torch_call(const frontend::PreparedCall& call, const std::string& package_dir,
                                          const PeerOptions& options) {
  return std::make_unique<TorchCall>(call, package_dir, options);
}

}  // namespace strata::python_module
