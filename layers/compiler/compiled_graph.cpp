// compile(): fusion, codegen and the JIT for a captured graph; CompiledGraph::run(): guards, then one
// dispatched call per fused kernel.
//
// Note [One dispatch per fused kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every fused kernel is called through a dispatch of its own: it has a kernel table (an OperatorEntry, the
// dispatcher's own class) with its generated code as the CPU kernel; its key set is computed from the
// tensors it reads and the thread's state exactly as an operator's, and the winning key's kernel runs
// inside a Dispatch zone renamed after the key. A compiled run therefore has the rows of an eager one:
// the guards stand where binding stands (the inputs checked against what was compiled), then dispatch and
// library once per fused kernel; what compiling saves shows as fewer calls and fewer bytes, not as a
// different accounting. Inductor's generated wrapper calls its kernels as plain functions, with no
// dispatch: strata pays one key-set computation per fused kernel (tens of ns) to keep the columns
// comparable, and says so. A key with no kernel (Autograd, when an input requires grad: the compiled
// path runs forward only) is the dispatcher's usual error, naming the keys that have kernels. Extern
// kernels are full operator calls through binding and dispatch, as Inductor's extern kernels are ATen calls.
//
// Note [The compiled graph on a GPU]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A graph captured on CUDA tensors and compiled with CompileOptions::device_kernel fuses as on the CPU
// (plan_fusion's cuda_kernels), and each generated kernel's table gets the device kernel the callback
// returned as its CUDA kernel instead of a C++ build: the same dispatch per fused kernel, the key set now
// CUDA, then the device kernel in a Library zone named for what it runs (the CUDA module's cuBLASLt call
// or PTX launch). Extern kernels are operator calls as ever, reaching the ops' CUDA kernels. The layer
// includes no CUDA header: the callback is the CUDA module's (apps/cuda_module/compiled_kernels_cuda.cpp),
// the only code that talks to the driver. The C++ source is still generated (--emit cpp shows it), never
// compiled; the callback's NVRTC and JIT times are the compile and load phases.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "layers/compiler/internal.h"
#include "layers/dispatch/dispatch.h"
#include "lib/host_clock.h"
#include "lib/parallel.h"
#include "lib/zone.h"

namespace strata::compiler {

namespace {

struct Step {
  const FusedKernel* kernel = nullptr;
  const binding::BoundOperator* op = nullptr;  // extern: the operator it calls
  detail::KernelEntry entry = nullptr;          // generated: the loaded kernel
  DeviceKernel device;                          // generated for a GPU: the device's kernel
  size_t gemm = 0;                              // GEMM epilogue: the GEMM node
  std::string name, schema;                     // what the dispatcher's table calls it
  const char* zone = "";                        // the library zone's name, interned (Note [Zone names made at run time])
  OperatorEntry table;
};

}  // namespace

struct CompiledGraph::Impl {
  Graph graph;
  FusionPlan plan;
  CompileTimings timings;
  CompileOptions options;
  std::vector<KernelBuild> builds;
  std::vector<std::unique_ptr<Step>> steps;  // one per plan kernel; heap-held: the tables point at names
  std::vector<size_t> constants;
};

namespace {

struct StepCall {
  const CompiledGraph::Impl& impl;
  const Step& step;
  const std::vector<Tensor>& env;
};
using StepKernel = Tensor(DispatchKeySet, const StepCall&);

// The generated loop on the intra-op threads (Note [Intra-op threads] in lib/parallel.h), as the eager
// loops run: rows [r0, r1) of a [rows, cols] output in ranges of rows. Returns the threads it used.
int run_rows(detail::KernelEntry entry, const void* const* inputs, void* out, int64_t r0, int64_t r1, int64_t cols) {
  const int64_t grain = std::max<int64_t>(1, parallel::kGrainSize / std::max<int64_t>(cols, 1));
  const int threads = parallel::threads_for(r0, r1, grain);
  parallel::parallel_for(r0, r1, grain, [&](int64_t b, int64_t e) { entry(inputs, out, b, e, cols); });
  return threads;
}

// A pointwise kernel over n elements, as one row: each thread's range is a row of its own, the inputs' and
// the output's pointers moved to its first element (every input of a pointwise kernel is read at i).
int run_elements(detail::KernelEntry entry, const std::vector<const void*>& inputs, void* out, int64_t n,
                 size_t itemsize) {
  const int threads = parallel::threads_for(0, n, parallel::kGrainSize);
  parallel::parallel_for(0, n, parallel::kGrainSize, [&](int64_t b, int64_t e) {
    std::vector<const void*> moved(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) moved[i] = static_cast<const char*>(inputs[i]) + size_t(b) * itemsize;
    entry(moved.data(), static_cast<char*>(out) + size_t(b) * itemsize, 0, 1, e - b);
  });
  return threads;
}


// The GEMM through OpenBLAS, in blocks of rows when asked, the epilogue on each block after its GEMM.
// Returns the threads the epilogue used.
int gemm_with_epilogue(const StepCall& call, const void* const* inputs, Tensor& out) {
  const Node& n = call.impl.graph.nodes[call.step.gemm];
  const Tensor& a = call.env[*n.args[0].value];
  const Tensor& b = call.env[*n.args[1].value];
  const bool linear = n.op == "linear";  // input @ weight^T
  const int64_t m = a.size(0), k = a.size(1), cols = out.size(1);
  const int64_t ldb = linear ? k : cols;
  const CBLAS_TRANSPOSE trans_b = linear ? CblasTrans : CblasNoTrans;
  if (m == 0 || cols == 0) return 1;
  if (k == 0) {  // an empty sum: BLAS refuses the zero leading dimension, and the product is zeros
    std::memset(out.data_ptr(), 0, out.nbytes());
    return run_rows(call.step.entry, inputs, out.data_ptr(), 0, m, cols);
  }
  int threads = 1;
  const int64_t block = call.impl.options.gemm_row_block > 0 ? std::min(call.impl.options.gemm_row_block, m) : m;
  for (int64_t r0 = 0; r0 < m; r0 += block) {
    const int64_t rows = std::min(block, m - r0);
    if (out.dtype() == DType::kF32) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b, int(rows), int(cols), int(k), 1.0f, a.data<float>() + r0 * k,
                  int(k), b.data<float>(), int(ldb), 0.0f, out.data<float>() + r0 * cols, int(cols));
    } else {
      cblas_dgemm(CblasRowMajor, CblasNoTrans, trans_b, int(rows), int(cols), int(k), 1.0, a.data<double>() + r0 * k,
                  int(k), b.data<double>(), int(ldb), 0.0, out.data<double>() + r0 * cols, int(cols));
    }
    threads = std::max(threads, run_rows(call.step.entry, inputs, out.data_ptr(), r0, r0 + rows, cols));
  }
  return threads;
}

// The CPU kernel of every generated fused kernel: output allocation and the generated code.
Tensor run_generated_cpu(DispatchKeySet, const StepCall& call) {
  STRATA_ZONE(zone, Layer::kLibrary, call.step.zone);
  const FusedKernel& k = *call.step.kernel;
  std::vector<const void*> inputs;
  inputs.reserve(k.inputs.size());
  for (size_t in : k.inputs) inputs.push_back(call.env[in].data_ptr());
  const ValueMeta& m = call.impl.graph.nodes[k.output].meta;
  Tensor out = Tensor::empty(m.shape, m.dtype, m.device);
  const int threads = k.kind == KernelKind::kGemmEpilogue
                          ? gemm_with_epilogue(call, inputs.data(), out)
                          : run_elements(call.step.entry, inputs, out.data_ptr(), out.numel(), element_size(m.dtype));
  zone.rename(zone_name_with_threads(call.step.zone, nullptr, threads));  // "k0 (generated loop, 2 threads)"
  return out;
}

// The CUDA kernel of a generated fused kernel (Note [The compiled graph on a GPU]).
Tensor run_generated_device(DispatchKeySet, const StepCall& call) {
  STRATA_ZONE(zone, Layer::kLibrary, call.step.zone);
  std::vector<Tensor> inputs;
  inputs.reserve(call.step.kernel->inputs.size());
  for (size_t in : call.step.kernel->inputs) inputs.push_back(call.env[in]);
  return call.step.device.run(inputs);
}

// Note [One dispatch per fused kernel]: Dispatcher::call's steps, over this kernel's own table.
Tensor dispatch_step(const CompiledGraph::Impl& impl, const Step& s, const std::vector<Tensor>& env) {
  STRATA_ZONE(zone, Layer::kDispatch, "keys");
  DispatchKeySet ks;
  for (size_t in : s.kernel->inputs) ks = ks | backend_key_set(env[in]);
  if (!grad_mode_enabled()) ks = ks.remove(DispatchKey::kAutograd);
  const LocalDispatchKeySet local = local_dispatch_key_set();
  ks = ((ks | local.included) - local.excluded) - s.table.fallthrough_keys();
  const DispatchKey key = ks.highest_priority();
  void* fn = s.table.kernel(key);
  if (fn == nullptr) [[unlikely]]
    s.table.throw_missing_kernel(key, ks);
  zone.rename(dispatch_key_name(key));
  return reinterpret_cast<StepKernel*>(fn)(ks, StepCall{impl, s, env});
}

// An op with no lowering: a full call through binding and dispatch, keyword-only arguments by name.
Tensor call_extern(const Graph& g, const Step& s, const std::vector<Tensor>& env) {
  return call_recorded(*s.op, g.nodes[s.kernel->output], env);
}

void check_guards(const Graph& g, const std::vector<Tensor>& inputs) {
  STRATA_ZONE(zone, Layer::kBinding, "guards (compiled graph)");
  if (inputs.size() != g.inputs.size()) {
    throw UsageError("compiled graph: called with " + std::to_string(inputs.size()) + " inputs, compiled for " +
                     std::to_string(g.inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueMeta& want = g.nodes[g.inputs[i]].meta;
    const Tensor& t = inputs[i];
    const ValueMeta got{t.sizes(), t.dtype(), t.device()};
    if (!t.defined() || !(got == want) || !t.is_contiguous()) {
      throw UsageError("compiled graph: guard failed on input " + std::to_string(i) + ": it is " +
                       (t.defined() ? got.str() + (t.is_contiguous() ? "" : " (not contiguous)") : "undefined") +
                       ", the graph was compiled for contiguous " + want.str() +
                       "; compile again for the new shape, dtype or device");
    }
    const size_t first = g.same_as[i];
    if (first != i && t.data_ptr() != inputs[first].data_ptr()) {
      throw UsageError("compiled graph: guard failed on input " + std::to_string(i) + ": it was the same tensor as input " +
                       std::to_string(first) + " when the graph was captured, and is another now; compile again");
    }
  }
}

std::unique_ptr<Step> make_step(const Graph& g, const FusedKernel& k) {
  auto s = std::make_unique<Step>();
  s->kernel = &k;
  s->name = k.name;
  if (k.kind == KernelKind::kExtern) {
    s->op = &binding::find_operator(g.nodes[k.output].op);
    return s;
  }
  const DType dtype = g.nodes[k.output].meta.dtype;
  s->schema = k.name + "(Tensor[] inputs) -> Tensor";
  s->table = OperatorEntry(s->name.c_str(), s->schema.c_str());
  if (k.kind == KernelKind::kGemmEpilogue) {
    s->gemm = detail::gemm_node(g, k);
    s->zone = intern_zone_name(k.name + (dtype == DType::kF32 ? " (cblas_sgemm" : " (cblas_dgemm") + " + generated epilogue)");
  } else {
    s->zone = intern_zone_name(k.name + " (generated loop)");
  }
  return s;
}

}  // namespace

CompiledGraph compile(const Captured& captured, const CompileOptions& options) {
  auto impl = std::make_shared<CompiledGraph::Impl>();
  impl->graph = captured.graph;
  impl->options = options;
  CompileTimings& t = impl->timings;
  t.capture_ns = captured.capture_ns;
  host_clock::calibrate();  // once per process, and not inside the phases' times
  int64_t t0 = host_clock::now_ns();
  {
    STRATA_ZONE(zone, Layer::kFrontend, "fusion");  // each phase a zone: the CLI's Chrome trace shows them
    impl->plan = plan_fusion(impl->graph, bool(options.device_kernel));
  }
  t.fusion_ns = double(host_clock::now_ns() - t0);
  const bool generates = std::any_of(impl->plan.kernels.begin(), impl->plan.kernels.end(),
                                     [](const FusedKernel& k) { return k.kind != KernelKind::kExtern; });
  detail::Toolchain tc;
  detail::CacheDir cache;
  if (generates && !options.device_kernel) {  // a graph of extern kernels, or a GPU's, needs no C++ compiler
    tc = detail::resolve_compiler(options.cxx, options.compile_timeout_s);
    cache = detail::resolve_cache_dir(options.cache_dir);
    t.compiler = tc.path;
    t.cache_dir = cache.path;
    t.cache_note = cache.note;
  }
  for (const FusedKernel& k : impl->plan.kernels) {
    std::unique_ptr<Step> s = make_step(impl->graph, k);
    if (k.kind != KernelKind::kExtern) {
      KernelBuild b;
      b.name = k.name;
      b.dtype = impl->graph.nodes[k.output].meta.dtype;
      t0 = host_clock::now_ns();
      {
        STRATA_ZONE(zone, Layer::kFrontend, "codegen");
        b.source = detail::generate_source(impl->graph, k, b.dtype);
      }
      b.codegen_ns = double(host_clock::now_ns() - t0);
      if (options.device_kernel) {
        s->device = options.device_kernel(impl->graph, k, b.dtype);
        s->zone = intern_zone_name(s->device.zone);
        b.device = s->device.info;
        b.compile_ns = s->device.info.nvrtc_ns;  // on a PTX cache hit, reading the file (Note [The PTX cache])
        b.load_ns = s->device.info.jit_ns;
        b.cache_hit = s->device.info.ptx_cache_hit;
        b.key = s->device.info.ptx_key;
        b.library_path = s->device.info.ptx_path;
        (b.cache_hit ? t.cache_hits : t.cache_misses) += 1;
        t.cache_dir = s->device.info.cache_dir;
        t.cache_note = s->device.info.cache_note;
        s->table.set_kernel(DispatchKey::kCUDA, reinterpret_cast<void*>(&run_generated_device),
                            "layers/compiler (generated for the GPU: " + s->device.info.path + ")");
        t.compiler = "NVRTC";
      } else {
        s->entry = detail::build_kernel(b, tc, cache);
        s->table.set_kernel(DispatchKey::kCPU, reinterpret_cast<void*>(&run_generated_cpu),
                            "layers/compiler (generated, " + b.library_path + ")");
        (b.cache_hit ? t.cache_hits : t.cache_misses) += 1;
        if (!b.cache_refused.empty()) {  // said where every front end shows the cache (the note)
          t.cache_note += std::string(t.cache_note.empty() ? "" : "; ") + "the cached " + b.name + " (" +
                          b.library_path + ") was refused and compiled again: " + b.cache_refused;
        }
      }
      t.codegen_ns += b.codegen_ns;
      t.compile_ns += b.compile_ns;
      t.load_ns += b.load_ns;
      impl->builds.push_back(std::move(b));
    }
    impl->steps.push_back(std::move(s));
  }
  for (size_t id = 0; id < impl->graph.nodes.size(); ++id) {
    if (impl->graph.nodes[id].kind == NodeKind::kConstant) impl->constants.push_back(id);
  }
  impl->options.device_kernel = nullptr;  // used up: it may hold references to its caller's locals
  return CompiledGraph(std::move(impl));
}

namespace {

// begin() now, end() on every way out: a step that throws must not leave its tag on later work.
class ObservedStep {
 public:
  ObservedStep(StepObserver* observer, size_t kernel) : observer_(observer) {
    if (observer_ != nullptr) observer_->begin(kernel);
  }
  ~ObservedStep() {
    if (observer_ != nullptr) observer_->end();
  }
  ObservedStep(const ObservedStep&) = delete;
  ObservedStep& operator=(const ObservedStep&) = delete;

 private:
  StepObserver* observer_;
};

}  // namespace

std::vector<Tensor> CompiledGraph::run(const std::vector<Tensor>& inputs, StepObserver* observer) const {
  const Impl& impl = *impl_;
  const Graph& g = impl.graph;
  check_guards(g, inputs);
  std::vector<Tensor> env(g.nodes.size());
  for (size_t i = 0; i < inputs.size(); ++i) env[g.inputs[i]] = inputs[i];
  for (size_t id : impl.constants) env[id] = g.nodes[id].constant;
  for (const std::unique_ptr<Step>& s : impl.steps) {
    const ObservedStep observed(observer, static_cast<size_t>(s->kernel - impl.plan.kernels.data()));
    env[s->kernel->output] = s->op != nullptr ? call_extern(g, *s, env) : dispatch_step(impl, *s, env);
  }
  std::vector<Tensor> out;
  out.reserve(g.outputs.size());
  for (size_t id : g.outputs) out.push_back(env[id]);
  return out;
}

const Graph& CompiledGraph::graph() const { return impl_->graph; }
const FusionPlan& CompiledGraph::plan() const { return impl_->plan; }
const CompileTimings& CompiledGraph::timings() const { return impl_->timings; }
const std::vector<KernelBuild>& CompiledGraph::builds() const { return impl_->builds; }

std::string CompiledGraph::emit_cpp() const {
  std::string s;
  for (const KernelBuild& b : impl_->builds) s += "// ---- " + b.name + "  (cache key " + b.key + ")\n" + b.source + "\n";
  return s;
}

double CompiledGraph::bytes_moved() const {
  const Graph& g = impl_->graph;
  auto bytes = [&](size_t id) { return double(g.nodes[id].meta.shape.numel()) * double(element_size(g.nodes[id].meta.dtype)); };
  double total = 0;
  for (const FusedKernel& k : impl_->plan.kernels) {
    for (size_t in : k.inputs) total += bytes(in);
    total += bytes(k.output);
  }
  return total;
}

Tensor call_recorded(const binding::BoundOperator& op, const Node& n, const std::vector<Tensor>& env) {
  const binding::Schema& schema = op.schema();
  std::vector<binding::IValue> args;
  std::vector<binding::Kwarg> kwargs;
  for (size_t i = 0; i < n.args.size(); ++i) {
    binding::IValue v = n.args[i].value ? binding::IValue(env[*n.args[i].value]) : n.args[i].scalar;
    if (i < schema.arguments.size() && schema.arguments[i].keyword_only) {
      kwargs.push_back({schema.arguments[i].name, std::move(v)});
    } else {
      args.push_back(std::move(v));
    }
  }
  return std::move(op.call(args, kwargs)).take_tensor();
}

}  // namespace strata::compiler
