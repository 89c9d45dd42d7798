// --peer torch in libstrata_python.so: the same operator and inputs through PyTorch in the embedded
// interpreter (Note [The Python module] in python_module_abi.h): which torch function is strata's operator,
// the inputs converted with their exact values, eager and replayed timings, and torch.profiler's kernels.
#include <pybind11/embed.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "apps/python/embedded_interpreter.h"
#include "apps/python/torch_layers.h"
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


def same_result(a, b):
    """Whether two results are bit for bit the same tensor values (or the same tuple of them)."""
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_result(x, y) for x, y in zip(a, b))
    return bool(torch.equal(a.detach(), b.detach()))


def reached_builtins(fn, args, kwargs):
    """The builtins one call of fn reaches from Python code (sys.setprofile's c_call events); the caller
    keeps torch's own (Note [torch's rows])."""
    import sys
    seen = []

    def watch(frame, event, arg):
        if event == "c_call" and not any(arg is s for s in seen):
            seen.append(arg)
    sys.setprofile(watch)
    try:
        fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return seen


def input_keys(args, kwargs):
    """The union of the inputs' dispatch key sets, as raw words."""
    keys = 0
    for v in list(args) + list(kwargs.values()):
        for t in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(t, torch.Tensor):
                keys |= torch._C._dispatch_keys(t).raw_repr()
    return keys


def tls_logical():
    """c10's thread-local key sets as the dispatcher reads them (the stored words are XORed with defaults)."""
    return (torch._C._dispatch_tls_local_include_set().raw_repr(),
            torch._C._dispatch_tls_local_exclude_set().raw_repr())


_OP_NAMES = {}
_TABLES = {}


def op_name(op_struct):
    """at::_ops::<struct> -> "aten::add.Tensor": the struct is the name and overload joined by '_'."""
    if not _OP_NAMES:
        for full in torch._C._dispatch_get_all_op_names():
            ns, _, rest = full.partition("::")
            if ns != "aten":
                continue
            name, _, overload = rest.partition(".")
            _OP_NAMES[name + ("_" + overload if overload else "")] = (name, overload)
    return _OP_NAMES.get(op_struct)


def table(name, overload):
    """Per key of the op's dispatch table: whether it falls through (the dispatcher skips it)."""
    full = "aten::" + name + ("." + overload if overload else "")
    if full not in _TABLES:
        rows = {}
        for line in torch._C._dispatch_dump_table(full).splitlines():
            key, sep, what = line.partition(":")
            if sep:
                rows[key.strip()] = "fallthrough" in what
        _TABLES[full] = rows
    return _TABLES[full]


def key_set_in_memory_return(name, overload):
    """Whether the op's C++ function returns through a hidden pointer (then the key set is the second
    integer argument, else the first): a Tensor, SymInt, Scalar or list by value does; a Tensor& (a
    mutable alias), a tuple of them, a number or nothing does not."""
    schema = torch._C._dispatch_find_schema_or_throw("aten::" + name, overload).schema()
    def by_reference(r):
        return str(r.type) == "Tensor" and r.alias_info is not None and r.alias_info.is_write
    rets = schema.returns
    if not rets or all(by_reference(r) for r in rets):
        return False
    return not (len(rets) == 1 and str(rets[0].type) in ("bool", "float", "int", "ScalarType"))


def highest_key(keys, name, overload):
    """The key the dispatcher runs for this key set: the highest one whose table entry does not fall through."""
    rows = table(name, overload)
    ks = torch._C.DispatchKeySet.from_raw_repr(keys)
    for _ in range(64):
        k = ks.highestPriorityTypeId()
        key = str(k).split(".")[-1]
        if key == "Undefined":
            return ""
        if key in rows and not rows[key]:
            return key
        ks = ks.remove(k)
    return ""


def resolve_keys(items, inputs, masks):
    """items: (redispatch?, op struct, arg0, arg1, stored TLS included, stored TLS excluded). Per item:
    (op name, key; "" when it could not be read)."""
    out = []
    for redispatch, op_struct, a0, a1, inc, exc in items:
        names = op_name(op_struct)
        if names is None:
            out.append((op_struct, ""))
            continue
        name, overload = names
        label = "aten::" + name + ("." + overload if overload else "")
        try:
            if redispatch:
                keys = a1 if key_set_in_memory_return(name, overload) else a0
            else:
                inc, exc = inc ^ masks[0], exc ^ masks[1]
                keys = (inputs | inc) & ~exc
            out.append((label, highest_key(keys & ((1 << 64) - 1), name, overload)))
        except Exception:
            out.append((label, ""))
    return out
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
    in_place_ = !call.op->schema().arguments.empty() && call.op->schema().arguments.front().writes;
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

  void layers(int calls, reports::PeerReport& rep, Timeline& timeline) override;

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
  bool in_place_ = false;  // Note [In-place operators]: each call writes its first input
  std::string expression_, version_, device_;
};

// A name the Chrome trace keeps a pointer to (spans hold `const char*`), alive as long as the process.
const char* kept_name(const std::string& name) {
  static std::deque<std::string> names;
  for (const std::string& n : names)
    if (n == name) return n.c_str();
  names.push_back(name);
  return names.back().c_str();
}

// "sgemm_" stays; ATen's loop drivers get their C++ names.
std::string library_name(const std::string& symbol) {
  if (symbol.rfind("_ZN2at18TensorIteratorBase8for_each", 0) == 0) return "TensorIteratorBase::for_each";
  if (symbol.rfind("_ZN2at18TensorIteratorBase15serial_for_each", 0) == 0) return "TensorIteratorBase::serial_for_each";
  return symbol;
}

double total_wall(const std::pair<uint64_t, uint64_t>& w) {
  return double(host_clock::ticks_to_ns(w.second) - host_clock::ticks_to_ns(w.first));
}

// One row being filled: per probed call, its time.
struct RowSamples {
  reports::RowKind kind;
  std::string key;
  std::vector<std::string> names;
  std::vector<double> ns;
};

void TorchCall::layers(int calls, reports::PeerReport& rep, Timeline& timeline) {
  using torch_layers::ProbeKind;
  using torch_layers::ProbeSpan;
  const bool plain = wrapped_.is_none();
  py::object fn = plain ? fn_ : wrapped_;
  py::tuple args = plain ? args_ : py::tuple();
  py::dict kwargs = plain ? kwargs_ : py::dict();
  std::unique_ptr<torch_layers::Interposer> probes;
  uint64_t masks[2] = {0, 0};
  try {
    std::vector<PyObject*> builtins{fn_.ptr()};
    py::list reached = namespace_["reached_builtins"](fn, args, kwargs);
    for (auto b : reached) builtins.push_back(b.ptr());
    probes = std::make_unique<torch_layers::Interposer>(builtins);
    uint64_t included = 0, excluded = 0;
    if (!probes->read_tls(included, excluded)) {
      rep.rows_note = "this torch's libc10.so exports no c10::impl::raw_local_dispatch_key_set, so the key of a "
                      "dispatcher call cannot be read (docs/torch-layers.md)";
      return;
    }
    py::tuple logical = namespace_["tls_logical"]();
    masks[0] = included ^ logical[0].cast<uint64_t>();
    masks[1] = excluded ^ logical[1].cast<uint64_t>();
  } catch (py::error_already_set& e) {
    rep.rows_note = "this torch lacks what its rows need: " + python_error_text(e);
    return;
  } catch (const Error& e) {
    rep.rows_note = e.what();
    return;
  }
  const torch_layers::ProbeCost cost = probes->calibrate();
  rep.probe_outer_ns = cost.outer_ns;
  rep.probe_inner_ns = cost.inner_ns;

  // The calls, made as call() makes them (the previous result is freed inside the timed window), in
  // blocks: untraced calls, then as many with the probes in, so that both see the machine in one state and
  // the rows are reconciled with untraced calls of the same moment.
  constexpr int kBlock = 20;
  std::vector<std::vector<ProbeSpan>> spans;
  std::vector<std::pair<uint64_t, uint64_t>> walls;
  std::vector<double> untraced;
  spans.reserve(size_t(calls));
  py::object last;
  std::string failure;
  auto timed_call = [&](std::pair<uint64_t, uint64_t>& wall) {
    wall.first = host_clock::ticks();
    last = py::object();
    PyObject* out = PyObject_Call(fn.ptr(), args.ptr(), kwargs.ptr());
    if (out != nullptr && cuda_) sync_();
    wall.second = host_clock::ticks();
    if (out == nullptr) {
      py::error_already_set e;
      failure = expression_ + " raised with the probes in: " + python_error_text(e);
      return false;
    }
    last = py::reinterpret_steal<py::object>(out);
    return true;
  };
  py::object untraced_result;  // of the last untraced call, to hold the probed calls' result against
  for (int done = 0; done < calls && failure.empty(); done += kBlock) {
    const int n = std::min(kBlock, calls - done);
    std::pair<uint64_t, uint64_t> wall;
    for (int i = 0; i < n && timed_call(wall); ++i) untraced.push_back(total_wall(wall));
    if (!failure.empty()) break;
    untraced_result = last;
    probes->install();
    for (int i = 0; i < n; ++i) {
      probes->begin_call();
      if (!timed_call(wall)) break;
      if (!probes->balanced()) {
        failure = "an exception went through a probe: a span was left open";
        break;
      }
      spans.push_back(probes->spans());
      walls.push_back(wall);
    }
    probes->remove();
  }
  // The probes change nothing torch computes: the last probed call's result against the last untraced one's,
  // bit for bit (an in-place op's calls each start from the previous one's output, so there it is not asked).
  if (failure.empty() && !in_place_ && last && untraced_result) {
    try {
      rep.probed_result_identical = namespace_["same_result"](untraced_result, last).cast<bool>() ? 1 : 0;
    } catch (py::error_already_set& e) {
      rep.probed_result_identical = -1;
    }
  }
  last = py::object();
  if (failure.empty() && !probes->restored()) failure = "a probed entry point did not get its old value back";
  if (!failure.empty()) {
    rep.rows_note = failure;
    return;
  }
  rep.rows_wall = reports::Distribution::of(untraced);
  rep.layered_calls = calls;

  // The key of every distinct dispatcher entry, asked of torch once.
  const std::vector<torch_layers::ProbeTarget>& targets = probes->targets();
  using KeyQuery = std::tuple<bool, std::string, uint64_t, uint64_t, uint64_t, uint64_t>;
  std::map<KeyQuery, size_t> queries;
  py::list items;
  auto query_of = [&](const ProbeSpan& s) {
    const torch_layers::ProbeTarget& t = targets[s.target];
    const bool redispatch = t.kind == ProbeKind::kOpRedispatch;
    // A call's key depends on the thread-local sets, a redispatch's on its arguments only.
    return KeyQuery{redispatch, t.op_struct, redispatch ? s.arg0 : 0, redispatch ? s.arg1 : 0,
                    redispatch ? 0 : s.tls_included, redispatch ? 0 : s.tls_excluded};
  };
  for (const auto& call : spans) {
    for (const ProbeSpan& s : call) {
      const ProbeKind kind = targets[s.target].kind;
      if (kind != ProbeKind::kOpCall && kind != ProbeKind::kOpRedispatch) continue;
      KeyQuery q = query_of(s);
      if (queries.count(q) != 0) continue;
      queries.emplace(q, queries.size());
      items.append(py::make_tuple(std::get<0>(q), std::get<1>(q), std::get<2>(q), std::get<3>(q), std::get<4>(q),
                                  std::get<5>(q)));
    }
  }
  std::vector<std::pair<std::string, std::string>> resolved;  // per query: op label, key
  try {
    py::list out = namespace_["resolve_keys"](items, namespace_["input_keys"](args_, kwargs_),
                                               py::make_tuple(masks[0], masks[1]));
    for (auto item : out) {
      py::tuple t = item.cast<py::tuple>();
      resolved.emplace_back(t[0].cast<std::string>(), t[1].cast<std::string>());
    }
  } catch (py::error_already_set& e) {
    rep.rows_note = "this torch could not name the dispatch keys: " + python_error_text(e);
    return;
  }

  // Each span's self time, less the probes' cost, into its row; the rest of the wall is the python row.
  std::vector<RowSamples> rows{{reports::RowKind::kPython, "", {}, {}}};
  auto row = [&](reports::RowKind kind, const std::string& key) -> RowSamples& {
    for (RowSamples& r : rows)
      if (r.kind == kind && r.key == key) return r;
    rows.push_back({kind, key, {}, std::vector<double>(rows.front().ns.size(), 0.0)});
    return rows.back();
  };
  auto add_name = [](RowSamples& r, const std::string& n) {
    if (std::find(r.names.begin(), r.names.end(), n) == r.names.end()) r.names.push_back(n);
  };
  add_name(rows.front(), plain ? "the interpreter's call, freeing the last result" : "torch's Python code, the interpreter");
  bool any_library = false, any_unread_key = false;
  std::map<std::string, double> op_self;  // over every probed call
  size_t probes_total = 0;
  for (size_t c = 0; c < spans.size(); ++c) {
    const std::vector<ProbeSpan>& call = spans[c];
    for (RowSamples& r : rows) r.ns.push_back(0.0);
    std::vector<double> total(call.size()), child_total(call.size(), 0.0);
    std::vector<int> children(call.size(), 0);
    std::vector<bool> reaches_dispatch(call.size(), false);
    for (size_t i = 0; i < call.size(); ++i) {
      total[i] = double(host_clock::ticks_to_ns(call[i].end) - host_clock::ticks_to_ns(call[i].begin));
      const ProbeKind kind = targets[call[i].target].kind;
      for (int32_t p = call[i].parent; p >= 0 && (kind == ProbeKind::kOpCall || kind == ProbeKind::kOpRedispatch);
           p = call[size_t(p)].parent)
        reaches_dispatch[size_t(p)] = true;
      if (call[i].parent >= 0) {
        child_total[size_t(call[i].parent)] += total[i];
        children[size_t(call[i].parent)] += 1;
      }
    }
    double top = 0;
    int tops = 0;
    const int32_t base = static_cast<int32_t>(timeline.spans().size());
    timeline.add_span(Layer::kHarness, kept_name("torch peer call, probed"), walls[c].first, walls[c].second, -1, 0);
    std::vector<std::string> op_of(call.size());  // the aten op a span runs under, as torch.profiler names it
    for (size_t i = 0; i < call.size(); ++i) {
      const ProbeSpan& s = call[i];
      const torch_layers::ProbeTarget& t = targets[s.target];
      const double self = total[i] - child_total[i] - children[i] * cost.outer_ns - cost.inner_ns;
      if (s.parent >= 0) op_of[i] = op_of[size_t(s.parent)];
      if (s.parent < 0) top += total[i], ++tops;
      reports::RowKind kind = reports::RowKind::kLibrary;
      std::string key, name = library_name(t.symbol);
      Layer layer = Layer::kLibrary;
      if (t.kind == ProbeKind::kBinding) {
        const bool binding = reaches_dispatch[i];
        kind = binding ? reports::RowKind::kBinding : reports::RowKind::kPython;
        layer = binding ? Layer::kBinding : Layer::kPython;
        name = "torch._C " + t.symbol;
      } else if (t.kind == ProbeKind::kOpCall || t.kind == ProbeKind::kOpRedispatch) {
        const auto& [label, k] = resolved[queries.at(query_of(s))];
        kind = reports::RowKind::kDispatch;
        key = k.empty() ? "?" : k;
        any_unread_key = any_unread_key || k.empty();
        layer = Layer::kDispatch;
        name = label;
        op_of[i] = label.substr(0, label.find('.'));
      } else {
        any_library = true;
      }
      // An op's self time as torch.profiler counts it: from the dispatcher's entry, less the ops it calls.
      if (t.kind != ProbeKind::kBinding && !op_of[i].empty()) op_self[op_of[i]] += self;
      RowSamples& r = row(kind, key);
      r.ns.back() += self;
      add_name(r, name);
      const std::string span_name = kind == reports::RowKind::kDispatch ? key + ": " + name : name;
      timeline.add_span(layer, kept_name(span_name), s.begin, s.end, s.parent < 0 ? base : base + 1 + s.parent, 0);
    }
    probes_total += call.size();
    rows.front().ns.back() += total_wall(walls[c]) - top - tops * cost.outer_ns;
  }
  rep.probes_per_call = spans.empty() ? 0 : double(probes_total) / double(spans.size());
  for (const auto& op : op_self) rep.op_self.push_back({op.first, op.second / double(spans.size())});
  for (RowSamples& r : rows) {
    reports::PeerReport::LayerRow out;
    out.kind = r.kind;
    out.key = r.key;
    out.names = r.names;
    out.ns = reports::Distribution::of(r.ns);
    rep.rows.push_back(std::move(out));
  }
  // python first, then binding, then the dispatch rows in the order the dispatcher walked them, library last.
  std::stable_sort(rep.rows.begin(), rep.rows.end(),
                   [](const auto& a, const auto& b) { return static_cast<int>(a.kind) < static_cast<int>(b.kind); });
  if (!any_library) {
    rep.inseparable.push_back("library: no kernel-library entry point (a BLAS routine, ATen's TensorIterator loop "
                              "driver) was reached through the GOT: the library's work, if any, is inside the lowest "
                              "dispatch row");
  }
  const auto& binding_names = std::find_if(rep.rows.begin(), rep.rows.end(), [](const auto& r) {
    return r.kind == reports::RowKind::kBinding;
  });
  if (binding_names != rep.rows.end() &&
      std::find(binding_names->names.begin(), binding_names->names.end(), "torch._C run_backward") !=
          binding_names->names.end()) {
    rep.inseparable.push_back("binding: torch._C run_backward holds the autograd engine's own work (the graph walk, "
                              "each node's call) beside its argument handling: the wheel exports no point between them");
  }
  if (any_unread_key) {
    rep.inseparable.push_back("dispatch/?: the key of some dispatcher entries could not be read from this torch");
  }
  rep.inseparable.push_back("each dispatch row holds the dispatcher's own work (key set, table lookup) and the "
                            "kernel that key runs: the wheel exports no point between them");
}

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
