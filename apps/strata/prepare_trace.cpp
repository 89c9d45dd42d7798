// prepare_trace: everything `strata trace`, compare and sweep were asked for, checked before any tensor
// is allocated or any file is touched; the device chosen and its session opened; the memory the run will
// hold checked against the machine; then the inputs. And the parts of a report that describe what was
// prepared (describe_context). See prepared_trace.h.
#include <algorithm>
#include <optional>
#include <sstream>

#include <spdlog/spdlog.h>

#include "apps/strata/gemm_algo_options.h"
#include "apps/strata/prepared_trace.h"
#if STRATA_WITH_CUDA
#include "measure/devices/cuda_module.h"
#endif
#include "apps/strata/python_frontend.h"
#include "layers/dispatch/dispatch.h"
#include "lib/error.h"
#include "lib/output_file.h"
#include "lib/zone.h"
#include "measure/report_builder.h"
#include "reports/model/units.h"
#include "reports/model/figures.h"

namespace strata::app {
namespace {

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

}  // namespace

frontend::PreparedCall fresh_inputs(const Prepared& prepared, const TraceOptions& options) {
  const size_t available = measure::available_bytes(prepared.choice.device);
  frontend::PreparedCall fresh = frontend::prepare_call(prepared.spec, prepared.dtype, prepared.choice.device,
                                                        options.seed, options.requires_grad, available);
  frontend::apply_input_views(fresh, options.views, options.seed, available);
  return fresh;
}

bool writes_in_place(const frontend::PreparedCall& call) {
  return call.op != nullptr && !call.op->schema().arguments.empty() && call.op->schema().arguments.front().writes;
}

namespace {

// "--frontend python" or "--peer torch": the option that asked for Python, for the refusals that name it.
std::string python_option(const TraceOptions& options) {
  return options.frontend != "cli" ? "--frontend " + options.frontend : "--peer " + options.peer;
}

// A sequence (mlp) is no operator: its own spec, its own sizing (frontend/sequence.h), and none of the
// options that apply to one operator. --view names its tensors by their nn.Sequential names instead
// (apply_sequence_views), for mlp in eager and graph modes.
frontend::SequenceSpec parse_sequence(const TraceOptions& options, Prepared& prepared) {
  if (!options.conv.given.empty())
    throw UsageError(options.conv.given + " apply to conv only; " + options.op + " takes no conv options");
  if (options.frontend != "cli" || !options.peer.empty()) {
    throw UsageError(python_option(options) + " drives one operator through Python; " + options.op +
                     " is a sequence of operators, run from C++ only (leave it out, or trace one of its ops: " +
                     frontend::sequence_operator_names(options.op) + ")");
  }
  if (!options.views.empty() && options.op != "mlp") {
    throw UsageError("--view names a tensor of mlp (input, 0.weight, 0.bias, ...); " + options.op +
                     " is a named program whose tensors have no such names (trace one of its ops with --view)");
  }
  if (!options.views.empty() && options.mode == "compiled") {
    // The compiled graph's guards take contiguous inputs (layers/compiler/compiled_graph.cpp): a view
    // would fail them at the first call, after the compile.
    throw UsageError("--view with --mode compiled: a compiled graph takes contiguous inputs only, so it cannot "
                     "read the view; use --mode eager or graph (both read the view as it lies)");
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
    const std::string& op = prepared.spec.op;
    if (op.substr(0, op.find('.')).ends_with('_')) {  // add_, mul_.Scalar: torch's in-place names
      throw UsageError("--backward: " + op + " writes its input in place, and the trace's inputs are leaves that "
                       "require grad, which autograd refuses to write in place (as torch); trace the out-of-place op (" +
                       op.substr(0, op.find('_')) + "), or an in-place op on a computed tensor from Python (docs/python.md)");
    }
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
  check_gemm_algo_options(options.op, options.gemm_algo);
  return sequence;
}

// --device: the compiled path generates C++ for the CPU, so --device auto means the CPU there
// (check_mode_options refuses a CUDA device). --tf32 is refused on the CPU here, for every build, rather
// than left to the device session of whichever build this is.
measure::DeviceChoice choose_trace_device(const TraceOptions& options) {
  const bool compiled_auto = options.mode == "compiled" && options.device == "auto";
  measure::DeviceChoice choice = measure::choose_device(frontend::parse_device(compiled_auto ? "cpu" : options.device),
                                      !options.no_device_timing);
  if (compiled_auto) choice.reason = "auto: the compiled path runs on the CPU";
  const auto clock = host_clock::info();
  spdlog::debug("device {} ({}); clock {} at {:.4f} ns/tick, {:.1f} ns per read", choice.device.str(),
                choice.reason.empty() ? "as requested" : choice.reason, clock.source, clock.ns_per_tick,
                clock.read_cost_ns);
  if (options.tf32 && choice.device.is_cpu()) {
    throw UsageError("--tf32 selects TF32 tensor-core math and needs a CUDA device; the CPU computes f32 in f32");
  }
  refuse_gemm_algo_on_cpu(options.gemm_algo, choice);
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
    // A view's forward allocates no output, but its backward makes the output's gradient: count it
    // (required_bytes counts every output, SpecCall::output_is_view).
    const size_t logical_bytes = sequence ? 0 : frontend::required_bytes(prepared.spec, prepared.dtype);
    frontend::check_fits(2 * std::max(forward_bytes, logical_bytes), measure::available_bytes(device), device,
                         prepared.spec.text + " with --backward (leave out --backward, or choose smaller sizes)");
  }
}

// The inputs, on the chosen device: the sequence's input and parameters, or the op's arguments, with --view's views
// and, for --frontend python and --peer torch, the same tensors handed to Python.
void make_inputs(const TraceOptions& options, Prepared& prepared, const std::optional<frontend::SequenceSpec>& sequence) {
  // Note [Peak bytes of a call]: what the op computes in decides its temporaries.
  const std::optional<DType> computed = prepared.autocast_casts ? prepared.autocast : std::nullopt;
  const Device device = prepared.choice.device;
  if (sequence) {
    prepared.sequence = std::make_unique<frontend::Sequence>(frontend::prepare_sequence(
        *sequence, prepared.dtype, device, options.seed, options.requires_grad, measure::available_bytes(device), computed));
    // --view: the input or a parameter, by its nn.Sequential name (Note [A sequence's tensor names]).
    frontend::apply_sequence_views(*prepared.sequence, options.views, options.seed, measure::available_bytes(device));
    prepared.call.description = prepared.sequence->description;
    prepared.call.flops = prepared.sequence->flops;
    prepared.call.bytes = prepared.sequence->bytes;
    return;
  }
  prepared.call = frontend::prepare_call(prepared.spec, prepared.dtype, device, options.seed, options.requires_grad,
                                         measure::available_bytes(device), computed);
  if (!options.views.empty() && !options.peer.empty()) {
    // The peer's inputs are torch tensors made from the values (python_embed.cpp: convert), contiguous: it
    // would time the contiguous op beside strata's view.
    throw UsageError("--view with --peer " + options.peer + ": the peer's inputs are contiguous copies of the values, "
                     "so it would not read the view strata reads; leave out --peer (--frontend python builds the "
                     "view with the Python API: docs/views.md)");
  }
  frontend::apply_input_views(prepared.call, options.views, options.seed, measure::available_bytes(device));
  prepare_python(prepared, options);  // --frontend python, --peer torch: the same tensors, handed to Python
}

}  // namespace

Prepared prepare_trace(const TraceOptions& options) {
  Prepared prepared;
  const std::optional<frontend::SequenceSpec> sequence = check_trace_options(options, prepared);
  prepared.choice = choose_trace_device(options);
  measure::SessionOptions session_options;
  session_options.tf32 = options.tf32;
  set_session_gemm_algo(options.gemm_algo, session_options);
  session_options.device_timing = !options.no_device_timing;
  prepared.session = measure::open_device_session(prepared.choice.device, session_options);
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
  if (prepared.choice.device.is_cuda() && measure::cuda_backend_load_ns() > 0) {
    report.notes.push_back("CUDA libraries loaded in " + reports::format_ns(measure::cuda_backend_load_ns()) +
                           " at device selection (libstrata_cuda.so with cudart, cuBLAS, cuBLASLt, cuDNN, CUPTI); "
                           "not part of the cold call");
  }
#endif
  return report;
}

void describe_harness_run(reports::TraceReport& report, const measure::HarnessResult& run) {
  report.warmup = static_cast<size_t>(run.warmup);
  report.repeat = static_cast<size_t>(run.repeat);
  report.repeat_auto = run.repeat_auto;
  report.planned_repeat = static_cast<size_t>(run.planned_repeat);
  report.untraced_call_ns = reports::Distribution::of(run.untraced_ns).median;
}

measure::HarnessOptions harness_options(const TraceOptions& options, const Prepared& prepared) {
  measure::HarnessOptions harness;
  harness.warmup = options.warmup;
  harness.repeat = options.repeat.value_or(0);
  harness.budget_s = options.budget_s;
  harness.backward = options.backward;
  harness.invoke = prepared.invoke;
  return harness;
}

}  // namespace strata::app
