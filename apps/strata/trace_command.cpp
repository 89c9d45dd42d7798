#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "apps/strata/commands.h"
#include "apps/strata/prepared_trace.h"
#if STRATA_WITH_CUDA
#include "apps/strata/cuda_module.h"
#endif
#include "measure/device_session.h"
#include "measure/harness.h"
#include "apps/strata/output_step.h"
#include "layers/autograd/engine.h"
#include "apps/strata/python_frontend.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "lib/machine.h"
#include "lib/output_file.h"
#include "measure/report_builder.h"
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

// The backward's figures: the seed's and each node's breakdowns, the wall of each timed call's whole
// backward, and the cold call's.
void describe_backward_figures(reports::BackwardReport& backward, const Timeline& timeline, const HarnessResult& run) {
  backward.ran = true;
  backward.walk = autograd::BackwardRecord{run.backward.walk}.path();
  backward.seed = reports::compute_breakdown(timeline, run.backward.seed);
  std::vector<double> total = backward.seed.wall.samples;
  for (size_t k = 0; k < run.backward.walk.size(); ++k) {
    reports::BackwardNodeReport node{run.backward.walk[k], reports::compute_breakdown(timeline, run.backward.nodes[k])};
    for (size_t i = 0; i < total.size() && i < node.steady.wall.samples.size(); ++i) total[i] += node.steady.wall.samples[i];
    backward.nodes.push_back(std::move(node));
  }
  backward.wall = reports::Distribution::of(std::move(total));
  std::vector<uint32_t> cold;
  for (uint32_t id = run.backward.cold_first; id <= run.backward.cold_last && id != 0; ++id) cold.push_back(id);
  double cold_ns = 0;
  for (double wall : reports::compute_breakdown(timeline, cold).wall.samples) cold_ns += wall;
  backward.cold_ns = cold_ns;
}

// --check with --backward: every leaf's gradient against the float64 reference (the gradient of sum(y) is
// ones); the run's one verdict (exit code 3) covers the gradients too, the worst of them if it failed.
void check_gradients(reports::TraceReport& report, const HarnessResult& run, const Prepared& prepared, bool tf32) {
  const Tensor& y = run.last_result.tensor();
  Tensor ones = Tensor::empty(y.sizes(), DType::kF64, kCPU);
  for (int64_t i = 0; i < ones.numel(); ++i) ones.data<double>()[i] = 1.0;
  const reference::Grads want = frontend::reference_gradients(prepared.spec, prepared.call, ones);
  const binding::Schema& schema = prepared.call.op->schema();
  for (size_t i = 0; i < prepared.call.args.size(); ++i) {
    const binding::IValue& arg = prepared.call.args[i];
    if (!arg.is_tensor() || !arg.tensor().requires_grad()) continue;
    reports::GradCheck check;
    check.argument = i < schema.arguments.size() ? schema.arguments[i].name : "argument " + std::to_string(i);
    check.tolerance = reference::tolerance(prepared.compute_dtype(), tf32);  // under Autocast, that dtype
    const Tensor grad = arg.tensor().grad();
    check.relative_error = grad.defined() ? reference::relative_error(grad, want[i]) : INFINITY;
    report.backward.checks.push_back(check);
    if (!check.passed() && report.check.passed()) {
      report.check.relative_error = check.relative_error;
      report.check.tolerance = check.tolerance;
    }
  }
}

// The backward half of the report: the walk, the seed's and each node's rows in the builder's words
// (Note [One report builder]), and with --check every leaf's gradient.
void describe_backward(reports::TraceReport& report, const Timeline& timeline, const HarnessResult& run,
                       const Prepared& prepared, const TraceOptions& options) {
  describe_backward_figures(report.backward, timeline, run);
  measure::describe_backward_breakdown(report.backward.seed, report.probe_ns);
  for (reports::BackwardNodeReport& node : report.backward.nodes)
    measure::describe_backward_breakdown(node.steady, report.probe_ns);
  if (options.check) check_gradients(report, run, prepared, options.tf32);
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

void describe_backward_rows(reports::TraceReport& report, const Timeline& timeline, const HarnessResult& run,
                            const Prepared& prepared) {
  TraceOptions rows_only;  // no --check: the caller checks its own gradients (a sequence's parameters)
  describe_backward(report, timeline, run, prepared, rows_only);
}

namespace {

// "--frontend python" or "--peer torch": the option that asked for Python, for the refusals that name it.
std::string python_option(const TraceOptions& options) {
  return options.frontend != "cli" ? "--frontend " + options.frontend : "--peer " + options.peer;
}

// A sequence (mlp) is no operator: its own spec, its own sizing (frontend/sequence.h), and none of the
// options that apply to one operator.
frontend::SequenceSpec parse_sequence(const TraceOptions& options, Prepared& prepared) {
  if (!options.conv.given.empty())
    throw UsageError(options.conv.given + " apply to conv only; " + options.op + " takes no conv options");
  if (options.frontend != "cli" || !options.peer.empty()) {
    throw UsageError(python_option(options) + " drives one operator through Python; " + options.op +
                     " is a sequence of operators, run from C++ only (leave it out, or trace one of its ops: "
                     "linear, relu)");
  }
  if (!options.views.empty()) {
    throw UsageError("--view gives one operator's input as a view; " + options.op + " is a sequence of operators "
                     "(trace one of its ops with --view)");
  }
  frontend::SequenceSpec sequence = frontend::parse_sequence_spec(options.op, options.spec);
  prepared.spec.op = options.op;
  prepared.spec.text = sequence.text;
  return sequence;
}

void check_backward_options(const TraceOptions& options, const Prepared& prepared, bool sequence) {
  if (options.backward && !options.requires_grad) {
    throw UsageError("--backward needs --requires-grad: without it the inputs need no gradient, the Autograd key "
                     "records no graph, and there is nothing to walk (add --requires-grad)");
  }
  if (options.backward && !sequence && !frontend::differentiable(prepared.spec)) {
    throw UsageError("--backward: " + prepared.spec.op + " is a gradient op with no derivative in strata; --backward "
                     "applies to " + frontend::differentiable_op_names());
  }
}

void check_output_paths(const TraceOptions& options) {
  if (!options.json_path.empty()) check_output_path(options.json_path);
  if (!options.chrome_trace_path.empty()) check_output_path(options.chrome_trace_path);
  if (!options.json_path.empty() && !options.chrome_trace_path.empty() &&
      same_output_file(options.json_path, options.chrome_trace_path)) {
    throw UsageError("--json and --chrome-trace name the same file '" + options.json_path + "'");
  }
}

// --autocast: the dtype it casts to, refused beside a dtype or --tf32 it cannot apply to. Sets
// prepared.autocast and whether it casts for this op (a sequence's linears are cast, its relus take what
// they are given; an op, if it has an Autocast kernel).
void check_autocast_options(const TraceOptions& options, Prepared& prepared, bool sequence) {
  if (options.autocast.empty()) return;
  const std::optional<DType> to = parse_dtype(options.autocast);
  if (!to) {
    throw UsageError("unknown --autocast dtype '" + options.autocast +
                     "'; allowed: bf16, f16 (the dtype autocast casts to)");
  }
  if (!is_autocast_dtype(*to)) {
    throw UsageError("--autocast " + options.autocast + ": autocast casts to a low-precision dtype, bf16 or f16 (f32 "
                     "is what it casts from; leave --autocast out to compute in --dtype)");
  }
  if (prepared.dtype != DType::kF32) {
    throw UsageError("--autocast " + options.autocast + " casts f32 inputs, but --dtype is " + options.dtype +
                     (prepared.dtype == DType::kF64
                          ? " (autocast leaves f64 alone, as PyTorch's does)"
                          : " (already low precision: use --dtype f32 with --autocast, or --dtype alone)"));
  }
  if (options.tf32) {
    throw UsageError("--tf32 and --autocast " + options.autocast + " both choose the GEMMs' math: give one (--tf32 "
                     "computes f32 on TF32 tensor cores, --autocast casts the inputs to " + options.autocast + ")");
  }
  prepared.autocast = *to;
  prepared.autocast_casts =
      sequence || Dispatcher::instance().entry(prepared.spec.op_index).kernel(DispatchKey::kAutocast) != nullptr;
}

// Everything the user typed, checked before any tensor is allocated or any file is touched: the values,
// the frontend, the dtype, the spec, the mode, --backward, the output paths and --autocast. Returns the
// sequence's spec when the op is one (mlp, a named program).
std::optional<frontend::SequenceSpec> check_trace_options(const TraceOptions& options, Prepared& prepared) {
  validate_values(options);
  check_frontend_options(options);
  const std::optional<DType> dtype = parse_dtype(options.dtype);
  if (!dtype) throw UsageError("unknown dtype '" + options.dtype + "'; allowed: f32, f64, f16, bf16");
  prepared.dtype = *dtype;
  std::optional<frontend::SequenceSpec> sequence;
  if (frontend::is_sequence(options.op)) {
    sequence = parse_sequence(options, prepared);
  } else {
    prepared.spec = frontend::parse_op_spec(options.op, options.spec, options.conv);
  }
  check_mode_options(options, sequence.has_value());
  check_backward_options(options, prepared, sequence.has_value());
  check_output_paths(options);
  // f16/bf16 work on the CPU too: its kernels widen them to f32 (Note [Half types on the CPU]).
  if (options.tf32 && prepared.dtype != DType::kF32)
    throw UsageError("--tf32 applies to --dtype f32 only, got " + options.dtype);
  check_autocast_options(options, prepared, sequence.has_value());
  return sequence;
}

// --device: the compiled path generates C++ for the CPU, so --device auto means the CPU there
// (check_mode_options refuses a CUDA device). --tf32 is refused on the CPU here, for every build, rather
// than left to the device session of whichever build this is.
DeviceChoice choose_trace_device(const TraceOptions& options) {
  const bool compiled_auto = options.mode == "compiled" && options.device == "auto";
  DeviceChoice choice = choose_device(frontend::parse_device(compiled_auto ? "cpu" : options.device),
                                      !options.no_device_timing);
  if (compiled_auto) choice.reason = "auto: the compiled path runs on the CPU";
  const auto clock = host_clock::info();
  spdlog::debug("device {} ({}); clock {} at {:.4f} ns/tick, {:.1f} ns per read", choice.device.str(),
                choice.reason.empty() ? "as requested" : choice.reason, clock.source, clock.ns_per_tick,
                clock.read_cost_ns);
  if (options.tf32 && choice.device.is_cpu()) {
    throw UsageError("--tf32 selects TF32 tensor-core math and needs a CUDA device; the CPU computes f32 in f32");
  }
  return choice;
}

// What the run will hold besides the call's own inputs and output, against what the machine has: --check's
// float64 reference on the host, and --backward's gradients on the device.
void check_memory_budget(const TraceOptions& options, const Prepared& prepared,
                         const std::optional<frontend::SequenceSpec>& sequence) {
  if (options.check) {
    // The float64 reference holds host copies of the inputs and two of the output in double precision;
    // twice the op's own size in f64 bounds that from above.
    const size_t reference_bytes = 2 * (sequence ? frontend::required_bytes(*sequence, DType::kF64)
                                                 : frontend::required_bytes(prepared.spec, DType::kF64));
    frontend::check_fits(reference_bytes, frontend::available_host_bytes(), kCPU,
                         "--check's float64 reference for " + prepared.spec.text +
                             " (leave out --check, or choose smaller sizes)");
  }
  if (options.backward) {
    // The backward pass holds a gradient of every input and of the output besides what the forward holds
    // (and the gradient ops' workspaces, no larger than the forward's): twice the forward bounds it.
    // Note [Peak bytes of a call]: what the op computes in decides its temporaries.
    const DType in = prepared.compute_dtype();
    const Device device = prepared.choice.device;
    const size_t forward_bytes = sequence ? frontend::peak_bytes(*sequence, prepared.dtype, in, device)
                                          : frontend::peak_bytes(prepared.spec, prepared.dtype, in, device);
    frontend::check_fits(2 * forward_bytes, available_bytes(device), device,
                         prepared.spec.text + " with --backward (leave out --backward, or choose smaller sizes)");
  }
}

// The inputs, on the chosen device: the sequence's parameters, or the op's arguments with --view's views
// and, for --frontend python and --peer torch, the same tensors handed to Python.
void make_inputs(const TraceOptions& options, Prepared& prepared, const std::optional<frontend::SequenceSpec>& sequence) {
  // Note [Peak bytes of a call]: what the op computes in decides its temporaries.
  const std::optional<DType> computed = prepared.autocast_casts ? prepared.autocast : std::nullopt;
  const Device device = prepared.choice.device;
  if (sequence) {
    prepared.sequence = std::make_unique<frontend::Sequence>(frontend::prepare_sequence(
        *sequence, prepared.dtype, device, options.seed, options.requires_grad, available_bytes(device), computed));
    prepared.call.description = prepared.sequence->description;
    prepared.call.flops = prepared.sequence->flops;
    prepared.call.bytes = prepared.sequence->bytes;
    return;
  }
  prepared.call = frontend::prepare_call(prepared.spec, prepared.dtype, device, options.seed, options.requires_grad,
                                         available_bytes(device), computed);
  if (!options.views.empty() && (options.frontend != "cli" || !options.peer.empty())) {
    throw UsageError("--view applies to the C++ frontend for now: leave out " + python_option(options) +
                     " (from Python, make the view yourself: x.t(), x[:, ::2]; docs/views.md)");
  }
  frontend::apply_input_views(prepared.call, options.views, options.seed, available_bytes(device));
  prepare_python(prepared, options);  // --frontend python, --peer torch: the same tensors, handed to Python
}

}  // namespace

Prepared prepare_trace(const TraceOptions& options) {
  Prepared prepared;
  const std::optional<frontend::SequenceSpec> sequence = check_trace_options(options, prepared);
  prepared.choice = choose_trace_device(options);
  SessionOptions session_options;
  session_options.tf32 = options.tf32;
  session_options.device_timing = !options.no_device_timing;
  prepared.session = open_device_session(prepared.choice.device, session_options);
  check_memory_budget(options, prepared, sequence);
  make_inputs(options, prepared, sequence);
  // Last, once nothing else can refuse the run: every call from here on, on this thread, sees the key.
  if (prepared.autocast) prepared.autocast_guard = std::make_unique<AutocastGuard>(*prepared.autocast);
  return prepared;
}

void describe_autocast_fallthrough(const Prepared& prepared, std::string& keys, std::vector<std::string>& notes) {
  if (!prepared.autocast || prepared.autocast_casts) return;
  // The fallthrough leaves no span (it is one AND in the key set computation): say where the key went.
  keys = "Autocast (fallthrough) > " + keys;
  notes.push_back("--autocast " + std::string(dtype_name(*prepared.autocast)) + ": " + prepared.spec.op +
                  " has no autocast policy, so the Autocast key falls through (is masked out) and the op runs "
                  "in " + std::string(dtype_name(prepared.dtype)) + "; `strata ops` lists the ops autocast casts for");
}

reports::TraceReport describe_context(const Prepared& prepared, const TraceOptions& options) {
  reports::TraceReport report;
  report.op = prepared.spec.op;
  report.spec = prepared.spec.text;
  report.description = prepared.call.description;
  report.schema = prepared.call.op != nullptr ? prepared.call.op->schema().text : "";  // a sequence: one per step
  // With autocast casting: "autocast f32->bf16" (the inputs given, the dtype computed in); when the key
  // falls through for the op, the dtype is what it computes in and the key path says the rest.
  report.dtype = prepared.autocast_casts ? "autocast " + std::string(dtype_name(prepared.dtype)) + "->" +
                                               std::string(dtype_name(*prepared.autocast))
                                         : std::string(dtype_name(prepared.dtype)) + (options.tf32 ? " (tf32 math)" : "");
  report.element_dtype = prepared.compute_dtype();
  report.tf32 = options.tf32;
  report.device = prepared.choice.device.str();
  report.device_reason = prepared.choice.reason;
  report.flops = prepared.call.flops;
  report.bytes_moved = prepared.call.bytes_moved;
  // What the memory check counted (Note [Peak bytes of a call]), so that it can be set against a measured peak.
  report.figures.set("memory.checked_peak_bytes", double(prepared.call.bytes), "bytes");
  report.seed = options.seed;
  report.frontend = prepared.frontend;
  report.frontend_what = frontend_description(prepared);
  report.env = measure::host_environment();
  if (prepared.choice.device.is_cpu()) measure::describe_cpu_device(report);
#if STRATA_WITH_CUDA
  // One-time work like context creation, but before it: the CUDA libraries are loaded on the first CUDA use
  // (Note [The CUDA module]), at device selection, so no call pays it.
  if (prepared.choice.device.is_cuda() && cuda_backend_load_ns() > 0) {
    report.notes.push_back("CUDA libraries loaded in " + reports::format_ns(cuda_backend_load_ns()) +
                           " at device selection (libstrata_cuda.so with cudart, cuBLAS, cuBLASLt, cuDNN, CUPTI); "
                           "not part of the cold call");
  }
#endif
  return report;
}

void describe_harness_run(reports::TraceReport& report, const HarnessResult& run) {
  report.warmup = static_cast<size_t>(run.warmup);
  report.repeat = static_cast<size_t>(run.repeat);
  report.repeat_auto = run.repeat_auto;
  report.planned_repeat = static_cast<size_t>(run.planned_repeat);
  report.untraced_call_ns = reports::Distribution::of(run.untraced_ns).median;
}

HarnessOptions harness_options(const TraceOptions& options, const Prepared& prepared) {
  HarnessOptions harness;
  harness.warmup = options.warmup;
  harness.repeat = options.repeat.value_or(0);
  harness.budget_s = options.budget_s;
  harness.backward = options.backward;
  harness.invoke = prepared.invoke;
  return harness;
}

namespace {

// The figures of the timed and cold calls, their key path and what the probes cost.
void describe_measured_calls(reports::TraceReport& report, const Timeline& timeline, const HarnessResult& run,
                             const Prepared& prepared) {
  report.steady = reports::compute_breakdown(timeline, run.timed_ids);
  report.cold = reports::compute_breakdown(timeline, run.cold_ids);
  report.keys = measure::key_path(timeline, run.timed_ids.front());
  describe_autocast_fallthrough(prepared, report.keys, report.notes);
  describe_harness_run(report, run);
  report.probe_ns = measure_zone_cost_ns();
  // A row whose median is within twice one probe's cost is mostly the instrument itself: say so.
  measure::mark_rows_below_resolution(report, {.zone_ns = report.probe_ns});  // Note [Rows below resolution]
  size_t spans_in_timed = 0;
  for (const Span& span : timeline.spans()) spans_in_timed += (span.op_id >= run.timed_ids.front()) ? 1 : 0;
  report.probes_per_call = double(spans_in_timed) / double(run.timed_ids.size());
}

// The dispatch rows' words, from what this call actually did.
void describe_dispatch_rows(reports::TraceReport& report, const HarnessResult& run, const Prepared& prepared,
                            bool backward) {
  using reports::RowKind;
  for (const reports::BreakdownRow& row : report.steady.rows) {
    if (row.kind != RowKind::kDispatch) continue;
    if (row.key == "Autograd") {
      const auto& out = run.last_result.tensor();
      // A backward pass frees what the node saved; the count is what it saved when it was recorded.
      const size_t saved =
          backward ? frontend::saved_by_node(prepared.spec) : (out.grad_fn() ? out.grad_fn()->num_saved() : 0);
      report.describe(RowKind::kDispatch, row.key,
                      std::string("record ") + (out.grad_fn() ? out.grad_fn()->name() : "?") + " (saves " +
                          std::to_string(saved) + " tensors), redispatch");
    } else if (row.key == "Autocast") {
      report.describe(RowKind::kDispatch, row.key, autocast_row_text(prepared.call, *prepared.autocast));
    } else if (const size_t colon = row.key.find(':'); colon != std::string::npos) {
      // A call made inside the op (Note [Calls made by a wrapper kernel]): the Autocast kernel's casts,
      // one per cast input, or contiguous() of a view the kernel needs as contiguous memory (Note
      // [Contiguous inputs]).
      const std::string op = row.key.substr(0, colon), key = row.key.substr(colon + 1);
      report.describe(RowKind::kDispatch, row.key,
                      op + " " + key +
                          (key == "Autograd" ? ": record " + backward_node_of(op) + ", redispatch" : ": key set + lookup") +
                          (op == "contiguous" ? " (copies of strided inputs)" : " (all casts)"));
    } else {
      measure::describe_kernel_row(report, row.key);
    }
  }
}

// The library row on the CPU: the library calls the spans name, the GEMM's shape, and the output's
// allocation unless the op allocates none (a view, Note [Views through the dispatcher], or an in-place op
// on its direct path, Note [In-place operators], whose zone says when it took a temporary).
void describe_cpu_library_row(reports::TraceReport& report, const Prepared& prepared) {
  using reports::RowKind;
  std::string library;
  for (const reports::BreakdownRow& row : report.steady.rows)
    if (row.kind == RowKind::kLibrary)
      for (const auto& name : row.names) library += (library.empty() ? "" : " > ") + name;
  const bool allocates_nothing = ops::AllOps::visit(prepared.spec.op_index, [](auto op) {
    using Op = decltype(op);
    return (requires { Op::kStridedInputs; } && !std::is_same_v<Op, ops::Contiguous>) || ops::kInPlace<Op>;
  });
  const std::string& gemm = prepared.call.gemm_shape;
  report.describe(RowKind::kLibrary, "",
                  library + (gemm.empty() ? "" : " " + gemm) + (allocates_nothing ? "" : ", output alloc"));
}

// Words for each row (Note [One report builder]).
void describe_op_rows(reports::TraceReport& report, const HarnessResult& run, const Prepared& prepared,
                      bool backward) {
  const measure::Caller caller = report.frontend == "python" ? measure::Caller::kPython : measure::Caller::kCpp;
  measure::describe_binding_row(report);
  if (caller == measure::Caller::kPython) {
    measure::add_python_frontend_note(report);
    measure::describe_python_rows(report);
  }
  describe_dispatch_rows(report, run, prepared, backward);
  if (prepared.choice.device.is_cpu()) {
    describe_cpu_library_row(report, prepared);
    measure::describe_cpu_device_rows(report);
    measure::describe_wall_row(report, caller, measure::WallEnd::kLibrary);
  } else {
    measure::describe_wall_row(report, caller, measure::WallEnd::kKernel);
  }
}

// The figures read from the rows and the device, and the notes on how far to trust them.
void add_run_figures(reports::TraceReport& report, DeviceSession& session) {
  reports::add_steady_join_figures(report.figures, report.steady);
  session.describe(report);
  reports::add_rate_figures(report);
  const double load = load_average();
  if (load >= 0) report.figures.set("host.load_average_1min", load, "ratio");
  if (std::string spread = reports::spread_note(report.steady.wall, load_context(load)); !spread.empty())
    report.notes.push_back(spread);
}

// --check: the last result against the float64 reference.
void check_result(reports::TraceReport& report, const HarnessResult& run, const Prepared& prepared, bool tf32) {
  const frontend::PreparedCall& call = prepared.call;
  report.check.ran = true;
  if (!call.op->schema().arguments.empty() && call.op->schema().arguments.front().writes) {
    // An in-place op (Note [In-place operators]): every timed call wrote self, so the last result is
    // self after all of them. The check is one more call, untraced, against the reference of self as
    // it is before that call.
    const std::vector<double> expected = frontend::reference_result(prepared.spec, call);
    const tracing::ActiveScope untraced(nullptr);
    report.check.relative_error = reference::relative_error(call.op->call(call.args).tensor(), expected);
  } else {
    report.check.relative_error =
        reference::relative_error(run.last_result.tensor(), frontend::reference_result(prepared.spec, call));
  }
  report.check.tolerance = reference::tolerance(prepared.compute_dtype(), tf32);
}

// The table, the JSON and the Chrome trace of one op's run.
CommandOutput trace_output(const reports::TraceReport& report, const Timeline& timeline, const Timeline& peer_timeline,
                           const HarnessResult& run, DeviceSession& session) {
  CommandOutput output;
  output.print_table = [&](std::ostream& out) { reports::print_trace_table(report, out); };
  output.json = [&] { return reports::trace_report_json(report); };
  output.chrome_trace = [&](reports::ChromeTraceWriter& writer) {
    writer.add_metadata("op", report.spec + "  " + report.description + "  " + report.dtype);
    writer.add_metadata("device", report.device);
    for (const auto& [key, value] : report.env.device) writer.add_metadata(key, value);
    reports::TraceMetadata kineto;
    kineto.gpus = session.trace_gpus();
    for (uint32_t id : run.timed_ids) kineto.steps.push_back({id});
    writer.set_trace_metadata(std::move(kineto));
    writer.add_timeline(timeline, report.frontend == "python" ? "eager (--frontend python)" : "eager");
    if (report.peer) writer.add_timeline(peer_timeline, "torch peer (" + report.peer->expression + ")", 1);
  };
  output.chrome_trace_hint = " (open in https://ui.perfetto.dev or chrome://tracing)";
  output.check = report.check;
  output.tolerance_name = report.dtype + " tolerance";
  return output;
}

}  // namespace

int run_trace(const TraceOptions& options) {
  Prepared prepared = prepare_trace(options);
  if (prepared.sequence && options.mode != "eager") return run_program_trace(options, prepared);
  if (prepared.sequence) return run_sequence_trace(options, prepared);
  DeviceSession& session = *prepared.session;

  Timeline timeline;
  const HarnessResult run = run_harness(prepared.call, harness_options(options, prepared), timeline, session);
  session.finish(timeline);
  // --peer: after strata's calls and the device session's flush, so neither run sees the other's work.
  Timeline peer_timeline(16);
  std::optional<reports::PeerReport> peer;
  if (prepared.peer_call)
    peer = run_peer(prepared, run.warmup, run.repeat, run.last_result, run.untraced_ns, peer_timeline);

  reports::TraceReport report = describe_context(prepared, options);
  describe_measured_calls(report, timeline, run, prepared);
  describe_op_rows(report, run, prepared, options.backward);
  add_run_figures(report, session);
  if (peer) {
    report.peer = std::move(peer);
    if (report.frontend == "cli") {
      report.notes.push_back("strata's calls were made from C++ (--frontend cli) and torch's from Python: add "
                             "--frontend python to compare like with like");
    }
  }
  if (options.check) check_result(report, run, prepared, options.tf32);
  if (options.backward) describe_backward(report, timeline, run, prepared, options);
  return write_command_output(options, trace_output(report, timeline, peer_timeline, run, session), std::cout,
                              std::cerr);
}

}  // namespace strata::app
