#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "apps/strata/commands.h"
#if STRATA_WITH_CUDA
#include "apps/strata/cuda_module.h"
#endif
#include "apps/strata/device_session.h"
#include "apps/strata/harness.h"
#include "apps/strata/output_step.h"
#include "layers/autograd/engine.h"
#include "apps/strata/python_frontend.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "lib/machine.h"
#include "lib/output_file.h"
#include "reports/figures.h"
#include "reports/json_report.h"
#include "reports/table.h"

namespace strata::app {
namespace {

// What the machine was doing around the run, for the spread note: the 1-minute load average against the
// CPU count (a load above the CPU count means the timed calls shared cores). Negative when unreadable.
double load_average() {
  std::ifstream loadavg("/proc/loadavg");
  double one_minute = 0;
  if (!(loadavg >> one_minute)) return -1;
  return one_minute;
}

std::string load_context(double one_minute) {
  if (one_minute < 0) return {};
  char buf[96];
  std::snprintf(buf, sizeof buf, "load average %.2f over the last minute on %u CPUs", one_minute,
                std::thread::hardware_concurrency());
  return buf;
}

// The dispatch key path one call took, from the spans of one timed call ("Autograd > CPU"). Calls a
// wrapper kernel made (Autocast's casts) have their own rows, "to_copy:CPU": not part of the op's path
// (Note [Calls made by a wrapper kernel]).
std::string key_path(const Timeline& timeline, uint32_t op_id) {
  std::string path;
  for (const Span& s : timeline.spans()) {
    if (s.op_id == op_id && s.layer == Layer::kDispatch && std::string_view(s.name).find(':') == std::string_view::npos)
      path += (path.empty() ? "" : " > ") + std::string(s.name);
  }
  return path;
}

void validate_values(const TraceOptions& o) {
  if (o.repeat && (*o.repeat < 1 || *o.repeat > 1'000'000)) {
    throw UsageError("--repeat must be between 1 and 1000000, got " + std::to_string(*o.repeat) +
                     " (leave it out to size the run automatically)");
  }
  if (o.warmup < 0 || o.warmup > 1'000'000) {
    throw UsageError("--warmup must be between 0 and 1000000, got " + std::to_string(o.warmup));
  }
  if (!(o.budget_s > 0 && o.budget_s <= 3600)) {
    std::ostringstream got;
    got << o.budget_s;  // as typed ("0", "1e-3"), not std::to_string's "0.000000"
    throw UsageError("--budget must be more than 0 and at most 3600 seconds, got " + got.str());
  }
  // Either sizes the timed calls; beside an explicit --repeat, --budget would be ignored without a word.
  if (o.repeat && o.budget_given) {
    throw UsageError("--budget sizes the run when --repeat is not given; with --repeat " + std::to_string(*o.repeat) +
                     " it would be ignored: give one of them");
  }
}

// The backward half of the report: the walk, the seed's and each node's rows, and with --check every
// leaf's gradient against the float64 reference (the gradient of sum(y) is ones).
void describe_backward(reports::TraceReport& rep, const Timeline& timeline, const HarnessResult& run,
                       const Prepared& p, const TraceOptions& o) {
  using reports::RowKind;
  reports::BackwardReport& b = rep.backward;
  b.ran = true;
  b.walk = autograd::BackwardRecord{run.backward.walk}.path();
  b.seed = reports::compute_breakdown(timeline, run.backward.seed);
  std::vector<double> total = b.seed.wall.samples;
  for (size_t k = 0; k < run.backward.walk.size(); ++k) {
    reports::BackwardNodeReport node{run.backward.walk[k], reports::compute_breakdown(timeline, run.backward.nodes[k])};
    for (size_t i = 0; i < total.size() && i < node.steady.wall.samples.size(); ++i) total[i] += node.steady.wall.samples[i];
    b.nodes.push_back(std::move(node));
  }
  b.wall = reports::Distribution::of(std::move(total));
  {
    std::vector<uint32_t> cold;
    for (uint32_t id = run.backward.cold_first; id <= run.backward.cold_last && id != 0; ++id) cold.push_back(id);
    double cold_ns = 0;
    for (double w : reports::compute_breakdown(timeline, cold).wall.samples) cold_ns += w;
    b.cold_ns = cold_ns;
  }
  // Words for the rows, and the instrument's resolution as in the forward table.
  auto describe = [&](reports::LayerBreakdown& br) {
    for (reports::BreakdownRow& row : br.rows) {
      row.below_resolution = row.applicable && row.ns.median < 2 * rep.probe_ns;
      if (row.kind == RowKind::kBinding && row.ns.median <= 0) {
        row.applicable = false;
        row.na_reason = "n/a: the engine calls each operator's typed entry point (as PyTorch's calls at::mm), no boxing";
      }
      if (row.kind == RowKind::kDispatch && row.key == "Autograd") row.what = "Autograd: record SumBackward, redispatch";
      if (row.kind == RowKind::kDispatch && row.key == "engine") {
        row.what = "engine: walk, buffers, accumulate, free";
      }
    }
  };
  describe(b.seed);
  for (reports::BackwardNodeReport& n : b.nodes) describe(n.steady);
  if (o.check) {
    // The gradient of y.sum() with respect to y: ones of y's shape, on the host.
    const Tensor& y = run.last_result.tensor();
    Tensor ones = Tensor::empty(y.sizes(), DType::kF64, kCPU);
    for (int64_t i = 0; i < ones.numel(); ++i) ones.data<double>()[i] = 1.0;
    const reference::Grads want = frontend::reference_gradients(p.spec, p.call, ones);
    const binding::Schema& schema = p.call.op->schema();
    for (size_t i = 0; i < p.call.args.size(); ++i) {
      const binding::IValue& a = p.call.args[i];
      if (!a.is_tensor() || !a.tensor().requires_grad()) continue;
      reports::GradCheck c;
      c.argument = i < schema.arguments.size() ? schema.arguments[i].name : "argument " + std::to_string(i);
      c.tolerance = reference::tolerance(p.compute_dtype(), o.tf32);  // under Autocast, that dtype
      const Tensor g = a.tensor().grad();
      c.relative_error = g.defined() ? reference::relative_error(g, want[i]) : INFINITY;
      b.checks.push_back(c);
      // The run's one verdict (exit code 3) covers the gradients too: the worst of them, if it failed.
      if (!c.passed() && rep.check.passed()) {
        rep.check.relative_error = c.relative_error;
        rep.check.tolerance = c.tolerance;
      }
    }
  }
}

// The node an operator's Autograd key records, from its declaration ("ToCopyBackward").
std::string backward_node_of(const std::string& op) {
  std::string node = "?";
  ops::AllOps::for_each([&](auto decl) {
    using Op = decltype(decl);
    if (op == Op::kName) node = Op::kBackward.node;
  });
  return node;
}

// The Autocast row's words: which inputs it casts, and which it leaves because they already have the
// target dtype (PyTorch's cached_cast skips those too).
std::string autocast_row_text(const frontend::PreparedCall& call, DType to) {
  std::string cast, kept;
  const auto& params = call.op->schema().arguments;
  for (size_t i = 0; i < call.args.size() && i < params.size(); ++i) {
    if (!call.args[i].is_tensor()) continue;
    const Tensor& t = call.args[i].tensor();
    std::string& list = autocast_eligible(t, to) ? cast : kept;
    list += (list.empty() ? "" : ", ") + params[i].name;
  }
  const std::string target(dtype_name(to));
  std::string text = "Autocast: " + (cast.empty() ? std::string("no cast") : "cast " + cast + " to " + target);
  if (!kept.empty()) text += "; " + kept + " already " + target + " or f64: not cast";
  return text + ", redispatch";
}

}  // namespace

void describe_backward_rows(reports::TraceReport& rep, const Timeline& timeline, const HarnessResult& run,
                            const Prepared& p) {
  TraceOptions rows_only;  // no --check: the caller checks its own gradients (a sequence's parameters)
  describe_backward(rep, timeline, run, p, rows_only);
}

Prepared prepare_trace(const TraceOptions& o) {
  // Everything the user typed is checked before any tensor is allocated or any file is touched.
  validate_values(o);
  check_frontend_options(o);
  Prepared p;
  const std::optional<DType> dtype = parse_dtype(o.dtype);
  if (!dtype) throw UsageError("unknown dtype '" + o.dtype + "'; allowed: f32, f64, f16, bf16");
  p.dtype = *dtype;
  std::optional<frontend::SequenceSpec> sequence;
  if (frontend::is_sequence(o.op)) {
    // A sequence (mlp) is no operator: its own spec, its own sizing (frontend/sequence.h).
    if (!o.conv.given.empty()) throw UsageError(o.conv.given + " apply to conv only; " + o.op + " takes no conv options");
    if (o.frontend != "cli" || !o.peer.empty()) {
      throw UsageError(std::string(o.frontend != "cli" ? "--frontend " + o.frontend : "--peer " + o.peer) + " drives one "
                       "operator through Python; " + o.op + " is a sequence of operators, run from C++ only (leave it "
                       "out, or trace one of its ops: linear, relu)");
    }
    if (!o.views.empty()) {
      throw UsageError("--view gives one operator's input as a view; " + o.op + " is a sequence of operators (trace "
                       "one of its ops with --view)");
    }
    sequence = frontend::parse_sequence_spec(o.op, o.spec);
    p.spec.op = o.op;
    p.spec.text = sequence->text;
  } else {
    p.spec = frontend::parse_op_spec(o.op, o.spec, o.conv);
  }
  check_mode_options(o, sequence.has_value());
  if (o.backward && !o.requires_grad) {
    throw UsageError("--backward needs --requires-grad: without it the inputs need no gradient, the Autograd key "
                     "records no graph, and there is nothing to walk (add --requires-grad)");
  }
  if (o.backward && !sequence && !frontend::differentiable(p.spec)) {
    throw UsageError("--backward: " + p.spec.op + " is a gradient op with no derivative in strata; --backward "
                     "applies to " + frontend::differentiable_op_names());
  }
  if (!o.json_path.empty()) check_output_path(o.json_path);
  if (!o.chrome_trace_path.empty()) check_output_path(o.chrome_trace_path);
  if (!o.json_path.empty() && !o.chrome_trace_path.empty() && same_output_file(o.json_path, o.chrome_trace_path)) {
    throw UsageError("--json and --chrome-trace name the same file '" + o.json_path + "'");
  }
  // The compiled path generates C++ for the CPU: --device auto means the CPU there (check_mode_options
  // refuses a CUDA device).
  p.choice = choose_device(frontend::parse_device(o.mode == "compiled" && o.device == "auto" ? "cpu" : o.device),
                           !o.no_device_timing);
  if (o.mode == "compiled" && o.device == "auto") p.choice.reason = "auto: the compiled path runs on the CPU";
  const auto clock = host_clock::info();
  spdlog::debug("device {} ({}); clock {} at {:.4f} ns/tick, {:.1f} ns per read", p.choice.device.str(),
                p.choice.reason.empty() ? "as requested" : p.choice.reason, clock.source, clock.ns_per_tick,
                clock.read_cost_ns);
  // f16/bf16 work on the CPU too: its kernels widen them to f32 (Note [Half types on the CPU]).
  if (o.tf32 && p.dtype != DType::kF32) throw UsageError("--tf32 applies to --dtype f32 only, got " + o.dtype);
  if (!o.autocast.empty()) {
    const std::optional<DType> to = parse_dtype(o.autocast);
    if (!to) throw UsageError("unknown --autocast dtype '" + o.autocast + "'; allowed: bf16, f16 (the dtype autocast casts to)");
    if (!is_autocast_dtype(*to)) {
      throw UsageError("--autocast " + o.autocast + ": autocast casts to a low-precision dtype, bf16 or f16 (f32 is "
                       "what it casts from; leave --autocast out to compute in --dtype)");
    }
    if (p.dtype != DType::kF32) {
      throw UsageError("--autocast " + o.autocast + " casts f32 inputs, but --dtype is " + o.dtype +
                       (p.dtype == DType::kF64 ? " (autocast leaves f64 alone, as PyTorch's does)"
                                               : " (already low precision: use --dtype f32 with --autocast, or --dtype alone)"));
    }
    if (o.tf32) {
      throw UsageError("--tf32 and --autocast " + o.autocast + " both choose the GEMMs' math: give one (--tf32 computes "
                       "f32 on TF32 tensor cores, --autocast casts the inputs to " + o.autocast + ")");
    }
    p.autocast = *to;
    // A sequence's linears are cast (its relus take what they are given); an op, if it has an Autocast kernel.
    p.autocast_casts = sequence.has_value() ||
                       Dispatcher::instance().entry(p.spec.op_index).kernel(DispatchKey::kAutocast) != nullptr;
  }
  // Refused here, for every build, rather than left to the device session of whichever build this is.
  if (o.tf32 && p.choice.device.is_cpu()) {
    throw UsageError("--tf32 selects TF32 tensor-core math and needs a CUDA device; the CPU computes f32 in f32");
  }

  SessionOptions session_options;
  session_options.tf32 = o.tf32;
  session_options.device_timing = !o.no_device_timing;
  p.session = open_device_session(p.choice.device, session_options);
  if (o.check) {
    // The float64 reference holds host copies of the inputs and two of the output in double precision;
    // twice the op's own size in f64 bounds that from above.
    const size_t reference_bytes = 2 * (sequence ? frontend::required_bytes(*sequence, DType::kF64)
                                                 : frontend::required_bytes(p.spec, DType::kF64));
    frontend::check_fits(reference_bytes, frontend::available_host_bytes(), kCPU,
                         "--check's float64 reference for " + p.spec.text + " (leave out --check, or choose smaller sizes)");
  }
  // Note [Peak bytes of a call]: what the op computes in decides its temporaries.
  const std::optional<DType> computed = p.autocast_casts ? p.autocast : std::nullopt;
  if (o.backward) {
    // The backward pass holds a gradient of every input and of the output besides what the forward holds
    // (and the gradient ops' workspaces, no larger than the forward's): twice the forward bounds it.
    const DType in = computed.value_or(p.dtype);
    const size_t forward_bytes = sequence ? frontend::peak_bytes(*sequence, p.dtype, in, p.choice.device)
                                          : frontend::peak_bytes(p.spec, p.dtype, in, p.choice.device);
    frontend::check_fits(2 * forward_bytes, available_bytes(p.choice.device), p.choice.device,
                         p.spec.text + " with --backward (leave out --backward, or choose smaller sizes)");
  }
  if (sequence) {
    p.sequence = std::make_unique<frontend::Sequence>(frontend::prepare_sequence(
        *sequence, p.dtype, p.choice.device, o.seed, o.requires_grad, available_bytes(p.choice.device), computed));
    p.call.description = p.sequence->description;
    p.call.flops = p.sequence->flops;
    p.call.bytes = p.sequence->bytes;
    if (p.autocast) p.autocast_guard = std::make_unique<AutocastGuard>(*p.autocast);  // as for one op, below
    return p;
  }
  p.call = frontend::prepare_call(p.spec, p.dtype, p.choice.device, o.seed, o.requires_grad,
                                  available_bytes(p.choice.device), computed);
  if (!o.views.empty() && (o.frontend != "cli" || !o.peer.empty())) {
    throw UsageError("--view applies to the C++ frontend for now: leave out " +
                     std::string(o.frontend != "cli" ? "--frontend " + o.frontend : "--peer " + o.peer) +
                     " (from Python, make the view yourself: x.t(), x[:, ::2]; docs/views.md)");
  }
  frontend::apply_input_views(p.call, o.views, o.seed, available_bytes(p.choice.device));
  prepare_python(p, o);  // --frontend python, --peer torch: the same tensors, handed to Python
  // Last, once nothing else can refuse the run: every call from here on, on this thread, sees the key.
  if (p.autocast) p.autocast_guard = std::make_unique<AutocastGuard>(*p.autocast);
  return p;
}

void describe_autocast_fallthrough(const Prepared& p, std::string& keys, std::vector<std::string>& notes) {
  if (!p.autocast || p.autocast_casts) return;
  // The fallthrough leaves no span (it is one AND in the key set computation): say where the key went.
  keys = "Autocast (fallthrough) > " + keys;
  notes.push_back("--autocast " + std::string(dtype_name(*p.autocast)) + ": " + p.spec.op +
                  " has no autocast policy, so the Autocast key falls through (is masked out) and the op runs "
                  "in " + std::string(dtype_name(p.dtype)) + "; `strata ops` lists the ops autocast casts for");
}

reports::TraceReport describe_context(const Prepared& p, const TraceOptions& o) {
  reports::TraceReport rep;
  rep.op = p.spec.op;
  rep.spec = p.spec.text;
  rep.description = p.call.description;
  rep.schema = p.call.op != nullptr ? p.call.op->schema().text : "";  // a sequence has one per step
  // With autocast casting: "autocast f32->bf16" (the inputs given, the dtype computed in); when the key
  // falls through for the op, the dtype is what it computes in and the key path says the rest.
  rep.dtype = p.autocast_casts
                  ? "autocast " + std::string(dtype_name(p.dtype)) + "->" + std::string(dtype_name(*p.autocast))
                  : std::string(dtype_name(p.dtype)) + (o.tf32 ? " (tf32 math)" : "");
  rep.element_dtype = p.compute_dtype();
  rep.tf32 = o.tf32;
  rep.device = p.choice.device.str();
  rep.device_reason = p.choice.reason;
  rep.flops = p.call.flops;
  rep.bytes_moved = p.call.bytes_moved;
  // What the memory check counted (Note [Peak bytes of a call]), so that it can be set against a measured peak.
  rep.figures.set("memory.checked_peak_bytes", double(p.call.bytes), "bytes");
  rep.seed = o.seed;
  rep.frontend = p.frontend;
  rep.frontend_what = frontend_description(p);
  const auto clock = host_clock::info();
  rep.env.strata_version = STRATA_VERSION;
  rep.env.cpu_model = cpu_model();
  rep.env.cpu_threads = static_cast<int>(std::thread::hardware_concurrency());
  rep.env.blas_config = kernels::cpu::blas_config();
  rep.env.blas_threads = kernels::cpu::blas_threads();
  rep.env.clock_source = std::string(clock.source);
  rep.env.clock_ns_per_tick = clock.ns_per_tick;
  rep.env.clock_read_ns = clock.read_cost_ns;
  if (p.choice.device.is_cpu()) {
    rep.device = "cpu (" + std::to_string(rep.env.blas_threads) + " OpenBLAS threads)";
    if (std::string warning = kernels::cpu::blas_kernel_warning(); !warning.empty()) rep.notes.push_back(warning);
  }
#if STRATA_WITH_CUDA
  // One-time work like context creation, but before it: the CUDA libraries are loaded on the first CUDA use
  // (Note [The CUDA module]), at device selection, so no call pays it.
  if (p.choice.device.is_cuda() && cuda_backend_load_ns() > 0) {
    rep.notes.push_back("CUDA libraries loaded in " + reports::format_ns(cuda_backend_load_ns()) +
                        " at device selection (libstrata_cuda.so with cudart, cuBLAS, cuBLASLt, cuDNN, CUPTI); "
                        "not part of the cold call");
  }
#endif
  return rep;
}

int run_trace(const TraceOptions& o) {
  Prepared p = prepare_trace(o);
  if (p.sequence && o.mode != "eager") return run_program_trace(o, p);
  if (p.sequence) return run_sequence_trace(o, p);
  const frontend::OpSpec& spec = p.spec;
  const frontend::PreparedCall& call = p.call;
  const DeviceChoice& choice = p.choice;
  DeviceSession* session = p.session.get();

  HarnessOptions h;
  h.warmup = o.warmup;
  h.repeat = o.repeat.value_or(0);
  h.budget_s = o.budget_s;
  h.backward = o.backward;
  h.invoke = p.invoke;
  Timeline timeline;
  HarnessResult run = run_harness(call, h, timeline, *session);
  session->finish(timeline);
  // --peer: after strata's calls and the device session's flush, so neither run sees the other's work.
  Timeline peer_timeline(16);
  std::optional<reports::PeerReport> peer;
  if (p.peer_call) peer = run_peer(p, run.warmup, run.repeat, run.last_result, run.untraced_ns, peer_timeline);

  reports::TraceReport rep = describe_context(p, o);
  rep.steady = reports::compute_breakdown(timeline, run.timed_ids);
  rep.cold = reports::compute_breakdown(timeline, run.cold_ids);
  rep.keys = key_path(timeline, run.timed_ids.front());
  describe_autocast_fallthrough(p, rep.keys, rep.notes);
  rep.warmup = static_cast<size_t>(run.warmup);
  rep.repeat = static_cast<size_t>(run.repeat);
  rep.repeat_auto = run.repeat_auto;
  rep.planned_repeat = static_cast<size_t>(run.planned_repeat);
  rep.probe_ns = measure_zone_cost_ns();
  // A row whose median is within twice one probe's cost is mostly the instrument itself: say so.
  reports::mark_rows_below_resolution(rep, {.zone_ns = rep.probe_ns});  // Note [Rows below resolution]
  size_t spans_in_timed = 0;
  for (const Span& s : timeline.spans()) spans_in_timed += (s.op_id >= run.timed_ids.front()) ? 1 : 0;
  rep.probes_per_call = double(spans_in_timed) / double(run.timed_ids.size());
  rep.untraced_call_ns = reports::Distribution::of(run.untraced_ns).median;

  // Words for each row, from what this call actually did.
  using reports::RowKind;
  rep.describe(RowKind::kBinding, "", "schema " + rep.schema.substr(0, rep.schema.find(" ->")));
  if (rep.frontend == "python") {
    rep.notes.push_back("with --frontend python the wall row runs from the frontend function's first statement to "
                        "its return; 'tracing off' (and --peer's wall) is timed from C++ around the whole Python call, "
                        "so it also holds entering and leaving the interpreter and the result's conversion");
    reports::describe_python_rows(rep);
  }
  for (const reports::BreakdownRow& row : rep.steady.rows) {
    if (row.kind != RowKind::kDispatch) continue;
    if (row.key == "Autograd") {
      const auto& out = run.last_result.tensor();
      // A backward pass frees what the node saved; the count is what it saved when it was recorded.
      const size_t saved = o.backward ? frontend::saved_by_node(spec) : (out.grad_fn() ? out.grad_fn()->num_saved() : 0);
      rep.describe(RowKind::kDispatch, row.key,
                   std::string("record ") + (out.grad_fn() ? out.grad_fn()->name() : "?") + " (saves " +
                       std::to_string(saved) + " tensors), redispatch");
    } else if (row.key == "Autocast") {
      rep.describe(RowKind::kDispatch, row.key, autocast_row_text(call, *p.autocast));
    } else if (const size_t colon = row.key.find(':'); colon != std::string::npos) {
      // A call made inside the op (Note [Calls made by a wrapper kernel]): the Autocast kernel's casts,
      // one per cast input, or contiguous() of a view the kernel needs as contiguous memory (Note
      // [Contiguous inputs]).
      const std::string op = row.key.substr(0, colon), key = row.key.substr(colon + 1);
      rep.describe(RowKind::kDispatch, row.key,
                   op + " " + key + (key == "Autograd" ? ": record " + backward_node_of(op) + ", redispatch" : ": key set + lookup") +
                       (op == "contiguous" ? " (copies of strided inputs)" : " (all casts)"));
    } else {
      rep.describe(RowKind::kDispatch, row.key, row.key + " kernel: key set + table lookup");
    }
  }
  if (choice.device.is_cpu()) {
    std::string lib;
    for (const reports::BreakdownRow& row : rep.steady.rows)
      if (row.kind == RowKind::kLibrary)
        for (const auto& n : row.names) lib += (lib.empty() ? "" : " > ") + n;
    // A view allocates nothing (Note [Views through the dispatcher]), nor does an in-place op on its
    // direct path (Note [In-place operators]; its zone says when it took a temporary): the row must not
    // say they do.
    const bool view = ops::AllOps::visit(spec.op_index, [](auto op) {
      using Op = decltype(op);
      return (requires { Op::kStridedInputs; } && !std::is_same_v<Op, ops::Contiguous>) || ops::kInPlace<Op>;
    });
    rep.describe(RowKind::kLibrary, "",
                 lib + (call.gemm_shape.empty() ? "" : " " + call.gemm_shape) + (view ? "" : ", output alloc"));
    reports::describe_cpu_device_rows(rep);
    rep.describe(RowKind::kWall, "", rep.frontend == "python" ? "python entry -> return" : "binding begin -> library end");
  } else {
    rep.describe(RowKind::kWall, "", rep.frontend == "python" ? "python entry -> return / last kernel end"
                                                              : "binding begin -> last kernel end");
  }
  reports::add_steady_join_figures(rep.figures, rep.steady);
  session->describe(rep);
  reports::add_rate_figures(rep);
  const double load = load_average();
  if (load >= 0) rep.figures.set("host.load_average_1min", load, "ratio");
  if (std::string spread = reports::spread_note(rep.steady.wall, load_context(load)); !spread.empty())
    rep.notes.push_back(spread);

  if (peer) {
    rep.peer = std::move(peer);
    if (rep.frontend == "cli") {
      rep.notes.push_back("strata's calls were made from C++ (--frontend cli) and torch's from Python: add "
                          "--frontend python to compare like with like");
    }
  }
  if (o.check) {
    rep.check.ran = true;
    if (!call.op->schema().arguments.empty() && call.op->schema().arguments.front().writes) {
      // An in-place op (Note [In-place operators]): every timed call wrote self, so the last result is
      // self after all of them. The check is one more call, untraced, against the reference of self as
      // it is before that call.
      const std::vector<double> expected = frontend::reference_result(spec, call);
      const tracing::ActiveScope untraced(nullptr);
      rep.check.relative_error = reference::relative_error(call.op->call(call.args).tensor(), expected);
    } else {
      rep.check.relative_error = reference::relative_error(run.last_result.tensor(), frontend::reference_result(spec, call));
    }
    rep.check.tolerance = reference::tolerance(p.compute_dtype(), o.tf32);
  }
  if (o.backward) describe_backward(rep, timeline, run, p, o);

  CommandOutput output;
  output.print_table = [&](std::ostream& out) { reports::print_trace_table(rep, out); };
  output.json = [&] { return reports::trace_report_json(rep); };
  output.chrome_trace = [&](reports::ChromeTraceWriter& writer) {
    writer.add_metadata("op", rep.spec + "  " + rep.description + "  " + rep.dtype);
    writer.add_metadata("device", rep.device);
    for (const auto& [k, v] : rep.env.device) writer.add_metadata(k, v);
    reports::TraceMetadata kineto;
    kineto.gpus = session->trace_gpus();
    for (uint32_t id : run.timed_ids) kineto.steps.push_back({id});
    writer.set_trace_metadata(std::move(kineto));
    writer.add_timeline(timeline, rep.frontend == "python" ? "eager (--frontend python)" : "eager");
    if (rep.peer) writer.add_timeline(peer_timeline, "torch peer (" + rep.peer->expression + ")", 1);
  };
  output.chrome_trace_hint = " (open in https://ui.perfetto.dev or chrome://tracing)";
  output.check = rep.check;
  output.tolerance_name = rep.dtype + " tolerance";
  return write_command_output(o, output, std::cout, std::cerr);
}

}  // namespace strata::app
