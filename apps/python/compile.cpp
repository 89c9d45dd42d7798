// strata._strata._capture / _compile / _CompiledGraph: the C++ half of strata.compile (strata/_compile.py,
// docs/python.md). Capture calls the Python function with the Capture dispatch key on, so the Python ops it
// calls are recorded as the C++ ones are (layers/compiler, docs/compiled.md); the compiled graph runs its
// fused kernels, and its outputs join the autograd graph through one CompiledFunctionBackward node each.
//
// Note [Backward through a compiled function]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The compiled forward runs with grad mode off (its generated kernels have no Autograd kernel, and an
// Autograd node per op is exactly what compiling removes). When a tensor it reads requires grad, each
// output it returns gets one node, CompiledFunctionBackward, whose edges go to the inputs and constants
// (parameters) that output depends on and that require grad. The engine runs that node like any other:
// its apply() replays the captured graph EAGERLY with grad mode on, over fresh leaves that alias the saved
// inputs (zero-copy), then runs the existing engine from the replayed output with the incoming gradient
// and hands each leaf's gradient to the edge. So backward is eager: it recomputes the forward once (as
// activation checkpointing does) and walks the ops' own backward formulas; nothing of it is generated.
// AOTAutograd instead traces the joint forward+backward and compiles both, saving the forward's
// intermediates; strata saves only the inputs. The engine is re-entered from inside a node: it keeps its
// scratch in the nodes of the graph it walks, and the replayed graph is a fresh one, so the two walks
// share nothing. A node has kMaxArgs edges: an output that depends on more tensors requiring grad cannot
// have one, and strata.compile runs such a call eagerly and says why (_compile.py).
// Because the replay recomputes from the inputs and parameters as they are at backward time, one of them
// changed in place since the forward (an optimizer step, x.relu_()) would give a gradient of other values,
// silently. So the node records each one's storage version when it is made, and apply() refuses, in
// PyTorch's words (as eager autograd does for a tensor a node saved), when any has moved. This is
// stricter than eager for a tensor no eager node would have saved (add's operands): the replay reads every
// input and parameter, so it cannot tell which ones the gradient would not have needed.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "apps/python/crossing.h"
#include "apps/python/profile.h"
#include "layers/autograd/engine.h"
#include "layers/binding/binding.h"
#include "layers/compiler/compiler.h"
#include "layers/dispatch/autocast.h"
#include "layers/dispatch/autograd.h"
#include "layers/dispatch/dispatch.h"
#include "lib/error.h"
#include "lib/storage.h"
#include "lib/zone.h"

namespace py = pybind11;

namespace strata::python {
namespace {

// Grad mode on for the replay inside a node (the engine turned it off around apply()).
class EnableGradGuard {
 public:
  EnableGradGuard() : saved_(detail::t_grad_enabled) { detail::t_grad_enabled = true; }
  ~EnableGradGuard() { detail::t_grad_enabled = saved_; }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool saved_;
};

// The values of `t` as a tensor with no autograd history of its own: a zero-copy alias (it keeps a
// history-free copy of `t` alive, not its grad_fn). Every tensor strata makes is contiguous, and the
// guards refuse other inputs; a strided one could only be a constant from elsewhere, refused by name.
Tensor detached_alias(const Tensor& t) {
  if (!t.is_contiguous()) {
    throw UsageError("compiled backward: a tensor the graph reads (" + t.str() +
                     ") is not contiguous; the compiled function's backward replays contiguous tensors only");
  }
  auto* keep = new Tensor(t.without_autograd());
  auto storage = std::make_shared<Storage>(
      t.data_ptr(), t.nbytes(), t.device(),
      [](void* context, void*, size_t) { delete static_cast<Tensor*>(context); }, keep);
  return Tensor::from_storage(std::move(storage), t.sizes(), t.dtype());
}

// One call node of the graph, eagerly through binding and dispatch (keyword-only arguments by name).
Tensor call_node(const compiler::Node& n, const std::vector<Tensor>& env) {
  return compiler::call_recorded(binding::find_operator(n.op), n, env);
}

// Note [Backward through a compiled function].
class CompiledFunctionBackward final : public Node {
 public:
  // `sources`: graph node ids (inputs, constants) this output's edges stand for, in edge order; `values`:
  // every input and constant's tensor, by node id (undefined for call nodes).
  CompiledFunctionBackward(compiler::CompiledGraph graph, size_t output, std::vector<size_t> sources,
                           std::vector<Tensor> values)
      : Node(autograd_detail::next_sequence_nr()),
        graph_(std::move(graph)),
        output_(output),
        sources_(std::move(sources)),
        values_(std::move(values)),
        versions_(values_.size(), 0) {
    for (size_t id = 0; id < values_.size(); ++id)
      if (values_[id].defined()) versions_[id] = values_[id].storage()->version();
  }
  const char* name() const override { return "CompiledFunctionBackward"; }
  size_t num_saved() const override {  // the inputs and constants kept for the replay
    return size_t(std::count_if(values_.begin(), values_.end(), [](const Tensor& t) { return t.defined(); }));
  }

  GradList apply(const Tensor& grad) override {
    if (released_) {
      throw UsageError(
          "backward: trying to backward through a compiled function's graph a second time; "
          "pass retain_graph=True to the first backward()");
    }
    const compiler::Graph& g = graph_.graph();
    std::vector<Tensor> env(g.nodes.size());
    std::vector<Tensor> leaves;
    for (size_t id = 0; id < g.nodes.size(); ++id) {
      if (!values_[id].defined()) continue;
      check_version(g.nodes[id], values_[id], versions_[id]);
      env[id] = detached_alias(values_[id]);
    }
    for (size_t id : sources_) {
      env[id].set_requires_grad(true);
      leaves.push_back(env[id]);
    }
    {
      EnableGradGuard grad_on;
      for (size_t id = 0; id < g.nodes.size(); ++id) {
        if (g.nodes[id].kind == compiler::NodeKind::kCall) env[id] = call_node(g.nodes[id], env);
      }
    }
    autograd::backward(env[output_], grad);
    GradList out;
    for (size_t e = 0; e < leaves.size(); ++e) out[e] = leaves[e].grad();
    return out;
  }
  void release_saved() override { release_for_free(); }
  void release_for_free() override {
    values_.clear();
    released_ = true;
  }

 private:
  // PyTorch's words (as RecordedNode::check_version's), naming the input or parameter.
  static void check_version(const compiler::Node& n, const Tensor& t, uint32_t saved) {
    const uint32_t now = t.storage()->version();
    if (now == saved) return;
    const std::string which = n.kind == compiler::NodeKind::kInput ? "input " + std::to_string(n.input_index)
                                                                    : std::string("a parameter (constant)");
    throw UsageError("one of the variables needed for gradient computation has been modified by an inplace "
                     "operation: [" + std::string(dtype_name(t.dtype())) + " [" + t.sizes().str() + "] " +
                     t.device().str() + "], " + which + " of the compiled function, is at version " +
                     std::to_string(now) + "; expected version " + std::to_string(saved) +
                     " instead. Hint: CompiledFunctionBackward replays the forward from its inputs and "
                     "parameters, and an in-place op changed this one after the forward; change it after "
                     "backward(), or use the out-of-place op.");
  }

  compiler::CompiledGraph graph_;
  size_t output_;
  std::vector<size_t> sources_;
  std::vector<Tensor> values_;
  std::vector<uint32_t> versions_;  // each value's storage version when the forward ran
  bool released_ = false;
};

// Note [Compiled calls in strata.profile()]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// While a profile records on this thread, a compiled call is numbered like an operator call, under its
// compiled function's own index (profile.h: compiled_call_index), so p.table() has a block for it:
// "strata.compile(relu_matmul)". Its spans are the run's own zones: guards (binding), a dispatch and a
// library zone per fused kernel, extern kernels as full operator calls; and one Layer::kPybind11 span
// around the whole C++ run, whose self time is the rest of the call (the environment, the results, the
// backward nodes). The Python wrapper's guard key (strata.compile's __call__) runs before it and is not
// in the rows: the python row of an operator call is measured by probes in generated frontend code,
// which a compiled function's __call__ does not have.
class ProfiledRun {
 public:
  explicit ProfiledRun(uint16_t index) {
    Timeline* t = tracing::active();
    if (t == nullptr || t->op() != 0) return;  // not recording, or inside a call already numbered
    id_ = next_profiled_call(index);
    if (id_ == 0) return;
    timeline_ = t;
    t->set_op(id_);
    span_ = t->open(Layer::kPybind11, "_CompiledGraph.run");
  }
  ~ProfiledRun() {
    if (timeline_ == nullptr || timeline_ != tracing::active()) return;  // the profile ended meanwhile
    timeline_->close(span_);
    timeline_->set_op(0);
  }
  ProfiledRun(const ProfiledRun&) = delete;
  ProfiledRun& operator=(const ProfiledRun&) = delete;
  void failed() const {
    if (timeline_ != nullptr) mark_profiled_call_failed(id_);
  }

 private:
  Timeline* timeline_ = nullptr;
  uint32_t id_ = 0;
  int32_t span_ = -1;
};

// The inputs and constants that node `id` depends on (walking the graph backwards from it).
std::vector<bool> depends_on(const compiler::Graph& g, size_t id) {
  std::vector<bool> reach(g.nodes.size(), false);
  reach[id] = true;
  for (size_t n = id + 1; n-- > 0;) {
    if (!reach[n]) continue;
    for (const compiler::Arg& a : g.nodes[n].args)
      if (a.value) reach[*a.value] = true;
  }
  return reach;
}

// Runs the compiled graph; when a tensor it reads requires grad (and grad mode is on), with grad mode off,
// then attaches a CompiledFunctionBackward to each output that a call made.
std::vector<Tensor> run_with_grad(const compiler::CompiledGraph& cg, const std::vector<Tensor>& inputs) {
  const compiler::Graph& g = cg.graph();
  std::vector<Tensor> values(g.nodes.size());
  bool needs_grad = false;
  for (size_t i = 0; i < inputs.size() && i < g.inputs.size(); ++i) values[g.inputs[i]] = inputs[i];
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    if (g.nodes[id].kind == compiler::NodeKind::kConstant) values[id] = g.nodes[id].constant;
    needs_grad = needs_grad || (values[id].defined() && values[id].requires_grad());
  }
  if (!needs_grad || !grad_mode_enabled()) return cg.run(inputs);
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = cg.run(inputs);
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    const size_t id = g.outputs[o];
    if (g.nodes[id].kind != compiler::NodeKind::kCall) continue;  // an input or constant returned as is
    const std::vector<bool> reach = depends_on(g, id);
    std::vector<size_t> sources;
    for (size_t n = 0; n < g.nodes.size(); ++n)
      if (reach[n] && values[n].defined() && values[n].requires_grad()) sources.push_back(n);
    if (sources.empty()) continue;
    if (sources.size() > kMaxArgs) {
      throw UsageError(
          "compiled backward: output " + std::to_string(o) + " depends on " + std::to_string(sources.size()) +
          " tensors that require grad; a backward node has at most " + std::to_string(kMaxArgs) + " edges");
    }
    auto node = std::make_shared<CompiledFunctionBackward>(cg, id, sources, values);
    for (size_t e = 0; e < sources.size(); ++e) node->set_next(e, gradient_edge(values[sources[e]]));
    Tensor& out = outputs[o];
    if (out.grad_fn() != nullptr || out.requires_grad()) out = detached_alias(out);  // one output twice
    // An identity of its own (Note [Autograd identity]): the output may be a tensor the function returned
    // as it was given, whose history this node must not become.
    out = out.without_autograd();
    out.set_grad_fn(std::move(node));
    out.set_requires_grad(true);
  }
  return outputs;
}

// A compiled graph and what strata.profile() calls it.
struct PyCompiledGraph {
  compiler::CompiledGraph graph;
  uint16_t profile_index;
};

std::vector<Tensor> run_compiled(const PyCompiledGraph& g, const std::vector<Tensor>& inputs) {
  ProfiledRun profiled(g.profile_index);
  try {
    return run_with_grad(g.graph, inputs);
  } catch (...) {
    profiled.failed();
    throw;
  }
}

py::dict timings_dict(const compiler::CompileTimings& t) {
  py::dict d;
  d["capture_ns"] = t.capture_ns;
  d["fusion_ns"] = t.fusion_ns;
  d["codegen_ns"] = t.codegen_ns;
  d["compile_ns"] = t.compile_ns;
  d["load_ns"] = t.load_ns;
  d["total_ns"] = t.total_ns();
  d["cache_hits"] = t.cache_hits;
  d["cache_misses"] = t.cache_misses;
  d["cache_dir"] = t.cache_dir;
  d["cache_note"] = t.cache_note;
  d["compiler"] = t.compiler;
  return d;
}

py::list kernels_list(const compiler::CompiledGraph& cg) {
  const compiler::Graph& g = cg.graph();
  py::list out;
  for (const compiler::FusedKernel& k : cg.plan().kernels) {
    py::dict d;
    std::vector<std::string> ops;
    for (size_t n : k.nodes) ops.push_back(g.nodes[n].op);
    d["name"] = k.name;
    d["kind"] = k.kind == compiler::KernelKind::kExtern         ? "extern"
                : k.kind == compiler::KernelKind::kGemmEpilogue ? "gemm_epilogue"
                                                                : "pointwise";
    d["what"] = std::string(compiler::kernel_kind_name(k.kind));
    d["ops"] = ops;
    d["extern_reason"] = compiler::extern_reason(g, k);
    out.append(d);
  }
  return out;
}

py::list builds_list(const compiler::CompiledGraph& cg) {
  py::list out;
  for (const compiler::KernelBuild& b : cg.builds()) {
    py::dict d;
    d["name"] = b.name;
    d["dtype"] = std::string(dtype_name(b.dtype));
    d["key"] = b.key;
    d["cache_hit"] = b.cache_hit;
    d["codegen_ns"] = b.codegen_ns;
    d["compile_ns"] = b.compile_ns;
    d["load_ns"] = b.load_ns;
    d["library_path"] = b.library_path;
    out.append(d);
  }
  return out;
}

// The tensor half of a compiled call's guard key in one crossing (Note [Guards and versions] in
// strata/_compile.py): per argument ("tensor", shape, dtype, device, contiguous) or None for a constant;
// for each tensor the first tensor argument it is; the thread's autocast state; how many tensors require
// grad. None when a capture runs on this thread (the call is then inlined into that capture's graph).
py::object guard_key(const py::tuple& values) {
  if (local_dispatch_key_set().included.has(DispatchKey::kCapture)) return py::none();
  const size_t n = values.size();
  py::tuple described(n);
  std::vector<const void*> ptrs;
  py::list aliasing;
  int needs_grad = 0;
  for (size_t i = 0; i < n; ++i) {
    py::handle v = values[i];
    if (!py::isinstance<Tensor>(v)) {
      described[i] = py::none();
      continue;
    }
    const Tensor& t = v.cast<const Tensor&>();
    py::tuple shape(size_t(t.dim()));
    for (int d = 0; d < t.dim(); ++d) shape[size_t(d)] = py::int_(t.size(d));
    described[i] = py::make_tuple("tensor", shape, python_dtype_name(t.dtype()), t.device().str(), t.is_contiguous());
    const void* p = t.data_ptr();
    aliasing.append(size_t(std::find(ptrs.begin(), ptrs.end(), p) - ptrs.begin()));
    ptrs.push_back(p);
    needs_grad += t.requires_grad() ? 1 : 0;
  }
  const AutocastState a = autocast_state();
  return py::make_tuple(described, py::tuple(aliasing), py::make_tuple(a.enabled, std::string(dtype_name(a.dtype))),
                        needs_grad);
}

}  // namespace

void bind_compiler(py::module_& m) {
  m.def("_guard_key", &guard_key, py::arg("values"));
  // No compiler: its own class, an UnavailableError, so that callers may tell it from other refusals.
  // Held for the life of the process, as crossing.cpp's classes are (a static py::object would be
  // released after the interpreter is gone).
  static PyObject* unavailable =
      PyErr_NewException("strata.CompilerUnavailableError", m.attr("UnavailableError").ptr(), nullptr);
  m.attr("CompilerUnavailableError") = py::reinterpret_borrow<py::object>(unavailable);
  py::class_<compiler::Captured>(m, "_Captured")
      .def_property_readonly("graph", [](const compiler::Captured& c) { return c.graph.str(); })
      .def_property_readonly("eager_outputs", [](const compiler::Captured& c) { return c.eager_outputs; })
      .def_property_readonly("capture_ns", [](const compiler::Captured& c) { return c.capture_ns; })
      .def_property_readonly("ops", [](const compiler::Captured& c) {
        std::vector<std::string> ops;
        for (const compiler::Node& n : c.graph.nodes)
          if (n.kind == compiler::NodeKind::kCall) ops.push_back(n.op);
        return ops;
      });
  // fn(list of tensors) -> list of tensors, called once with the Capture key on (Python errors, graph
  // breaks among them, propagate out of capture unchanged).
  m.def(
      "_capture",
      [](const py::function& fn, const std::vector<Tensor>& inputs) {
        return compiler::capture(
            [&fn](const std::vector<Tensor>& in) { return fn(py::cast(in)).cast<std::vector<Tensor>>(); },
            inputs);
      },
      py::arg("fn"), py::arg("inputs"));
  m.def(
      "_compile",
      [](const compiler::Captured& c, const std::string& cache_dir, const std::string& cxx,
         const std::string& label) {
        compiler::CompileOptions options;
        options.cache_dir = cache_dir;
        options.cxx = cxx;
        try {
          return PyCompiledGraph{compiler::compile(c, options), compiled_call_index(label)};
        } catch (const compiler::CompilerUnavailableError& e) {
          PyErr_SetString(unavailable, e.what());
          throw py::error_already_set();
        }
      },
      py::arg("captured"), py::arg("cache_dir") = "", py::arg("cxx") = "", py::arg("label") = "");
  using G = PyCompiledGraph;
  py::class_<G>(m, "_CompiledGraph")
      .def("run", &run_compiled, py::arg("inputs"))
      .def_property_readonly("graph", [](const G& g) { return g.graph.graph().str(); })
      .def_property_readonly("plan", [](const G& g) { return g.graph.plan().str(g.graph.graph()); })
      .def("emit_cpp", [](const G& g) { return g.graph.emit_cpp(); })
      .def("timings", [](const G& g) { return timings_dict(g.graph.timings()); })
      .def("builds", [](const G& g) { return builds_list(g.graph); })
      .def("kernels", [](const G& g) { return kernels_list(g.graph); })
      .def_property_readonly("calls", [](const G& g) { return g.graph.graph().calls(); })
      .def("bytes_moved", [](const G& g) { return g.graph.bytes_moved(); })
      .def("eager_bytes_moved", [](const G& g) { return compiler::eager_bytes_moved(g.graph.graph()); })
      .def_property_readonly("constants_requiring_grad", [](const G& g) {
        size_t n = 0;
        for (const compiler::Node& node : g.graph.graph().nodes)
          n += node.kind == compiler::NodeKind::kConstant && node.constant.requires_grad() ? 1 : 0;
        return n;
      });
  m.attr("_max_grad_edges") = kMaxArgs;
}

}  // namespace strata::python
