// `strata trace OP SPEC`: one op measured by the harness (measure/harness.h), its rows worded by the
// report builder (Note [One report builder]), then printed and written (command_output.h). prepare_trace.cpp
// checks the options and prepares the call; mlp and programs go on in sequence_command.cpp and
// program_command.cpp.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

#include "apps/strata/commands.h"
#include "apps/strata/command_output.h"
#include "apps/strata/prepared_trace.h"
#include "apps/strata/python_frontend.h"
#include "layers/autograd/engine.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "lib/machine.h"
#include "lib/zone.h"
#include "measure/device_session.h"
#include "measure/harness.h"
#include "measure/instruction_count.h"
#include "measure/report_builder.h"
#include "reports/model/figures.h"
#include "reports/model/units.h"
#include "reports/formats/json_report.h"
#include "reports/formats/table.h"

namespace strata::app {
namespace {

// The backward's figures: the seed's and each node's breakdowns, the wall of each timed call's whole
// backward, and the cold call's.
void describe_backward_figures(reports::BackwardReport& backward, const Timeline& timeline, const measure::HarnessResult& run) {
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
void check_gradients(reports::TraceReport& report, const measure::HarnessResult& run, const Prepared& prepared, bool tf32) {
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
void describe_backward(reports::TraceReport& report, const Timeline& timeline, const measure::HarnessResult& run,
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

void describe_backward_rows(reports::TraceReport& report, const Timeline& timeline, const measure::HarnessResult& run,
                            const Prepared& prepared) {
  TraceOptions rows_only;  // no --check: the caller checks its own gradients (a sequence's parameters)
  describe_backward(report, timeline, run, prepared, rows_only);
}

namespace {

// The figures of the timed and cold calls, their key path and what the probes cost.
void describe_measured_calls(reports::TraceReport& report, const Timeline& timeline, const measure::HarnessResult& run,
                             const Prepared& prepared) {
  report.steady = reports::compute_breakdown(timeline, run.timed_ids);
  report.cold = reports::compute_breakdown(timeline, run.cold_ids);
  report.keys = measure::key_path(timeline, run.timed_ids.front());
  describe_autocast_fallthrough(prepared, report.keys, report.notes);
  describe_harness_run(report, run);
  report.probe_ns = measure_zone_cost_ns();
  // A row whose median is within twice one probe's cost is mostly the instrument itself: say so.
  measure::mark_rows_below_resolution(report, {.zone_ns = report.probe_ns, .scope = ""});  // Note [Rows below resolution]
  size_t spans_in_timed = 0;
  for (const Span& span : timeline.spans()) spans_in_timed += (span.op_id >= run.timed_ids.front()) ? 1 : 0;
  report.probes_per_call = double(spans_in_timed) / double(run.timed_ids.size());
}

// The dispatch rows' words, from what this call actually did.
void describe_dispatch_rows(reports::TraceReport& report, const measure::HarnessResult& run, const Prepared& prepared,
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
void describe_op_rows(reports::TraceReport& report, const measure::HarnessResult& run, const Prepared& prepared,
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
void add_run_figures(reports::TraceReport& report, measure::DeviceSession& session) {
  reports::add_steady_join_figures(report.figures, report.steady);
  session.describe(report);
  reports::add_rate_figures(report);
  const double load = load_average();
  if (load >= 0) report.figures.set("host.load_average_1min", load, "ratio");
  if (std::string spread = reports::spread_note(report.steady.wall, load_context(load)); !spread.empty())
    report.notes.push_back(spread);
}

// Note [Contiguous inputs]: a kernel that needs contiguous memory copied a strided input through a call
// of its own; its dispatch row and the copy's span inside the library row say it happened, this line says
// what it cost: the inputs that are strided, their bytes, and the copy calls' whole time per call.
void add_implicit_copy_note(reports::TraceReport& report, const Prepared& prepared) {
  const reports::LayerBreakdown& steady = report.steady;
  if (steady.implicit_copies == 0 || steady.calls == 0) return;
  const frontend::PreparedCall& call = prepared.call;
  std::string inputs;
  for (size_t i = 0; i < call.args.size(); ++i) {
    if (!call.args[i].is_tensor() || call.args[i].tensor().is_contiguous()) continue;
    const Tensor& t = call.args[i].tensor();
    const auto& arguments = call.op->schema().arguments;
    inputs += (inputs.empty() ? "" : ", ") + (i < arguments.size() ? arguments[i].name : "input") + " " +
              format_bytes(double(t.numel()) * double(element_size(t.dtype())));
  }
  const double per_call = double(steady.implicit_copies) / double(steady.calls);
  const double median = steady.implicit_copy.median;
  const bool cpu = prepared.choice.device.is_cpu();
  char count[32];
  std::snprintf(count, sizeof count, "%g", per_call);
  report.notes.push_back(
      "implicit copy: " + report.op + " copied " + count + " strided input" + (per_call == 1 ? "" : "s") +
      " to contiguous memory per call" + (inputs.empty() ? "" : " (" + inputs + ")") + ", a contiguous() call each: " +
      reports::format_ns(median) + " median per call" + (cpu ? "" : " on the host (the copy kernel's time is in the gpu row)") +
      ", " + reports::format_percent(reports::share_of(median, steady.wall.median)) + " of the wall" +
      (median < 2 * report.probe_ns ? " (under twice one probe's cost: about that or less)" : "") +
      "; its lookup is the dispatch row contiguous:" + (cpu ? "CPU" : "CUDA") + ", its copy a span inside the library row");
}

// --check: the last result against the float64 reference.
void check_result(reports::TraceReport& report, const measure::HarnessResult& run, const Prepared& prepared,
                  const TraceOptions& options) {
  const frontend::PreparedCall& call = prepared.call;
  report.check.ran = true;
  if (writes_in_place(call)) {
    // An in-place op (Note [In-place operators]): every timed call wrote self, so self is no longer the
    // inputs' values but thousands of calls away from them: div_ by values under 1 in magnitude grows
    // self to inf (inf - inf made the error NaN, and the check failed on a correct kernel), mul_ shrinks it
    // to zeros (and the check passed whatever the kernel computed). The check is one call on fresh inputs,
    // the trace's own (the same seed and views), untraced, against their reference.
    frontend::PreparedCall fresh = fresh_inputs(prepared, options);
    const std::vector<double> expected = frontend::reference_result(prepared.spec, fresh);
    const tracing::ActiveScope untraced(nullptr);
    report.check.relative_error = reference::relative_error(fresh.op->call(fresh.args).tensor(), expected);
  } else {
    report.check.relative_error =
        reference::relative_error(run.last_result.tensor(), frontend::reference_result(prepared.spec, call));
  }
  report.check.tolerance = reference::tolerance(prepared.compute_dtype(), options.tf32);
}

// The table, the JSON and the Chrome trace of one op's run.
CommandOutput trace_output(const reports::TraceReport& report, const Timeline& timeline, const Timeline& peer_timeline,
                           const measure::HarnessResult& run, measure::DeviceSession& session) {
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

// --count instructions (Note [Instructions per row]): what it can count, checked before valgrind starts,
// and the options the child runs with: the CPU (a GPU's work is no instruction of this CPU, and CUDA under
// valgrind is not a run worth timing) and few calls (each boundary writes a dump).
TraceOptions counting_options(const TraceOptions& options) {
  TraceOptions counted = options;
  if (options.count.empty()) return counted;
  if (options.count != "instructions")
    throw UsageError("unknown --count '" + options.count + "'; allowed: instructions");
  if (!options.peer.empty())
    throw UsageError("--count instructions counts strata's own rows; torch's (--peer torch) are not counted yet "
                     "(docs/instructions.md): leave out one of the two");
  if (options.frontend != "cli")
    throw UsageError("--count instructions counts calls made from the CLI (--frontend cli); --frontend " +
                     options.frontend + " is not counted yet (docs/instructions.md)");
  if (options.device != "auto" && options.device != "cpu")
    throw UsageError("--count instructions counts the CPU's calls; --device " + options.device +
                     " is not counted (allowed: cpu, auto)");
  counted.device = "cpu";
  if (!counted.repeat && !options.budget_given) counted.repeat = 10;
  return counted;
}

// The instructions of each host row, and binding + dispatch together as one figure (the overhead that
// tests/apps/count_instructions.sh holds under a bound), with a note that the times are valgrind's.
void describe_instructions(reports::TraceReport& report, const Timeline& timeline, const measure::HarnessResult& run,
                           const std::vector<uint64_t>& self_instructions) {
  const std::vector<double> binding_dispatch =
      measure::attribute_instructions(report.steady, timeline, run.timed_ids, self_instructions);
  report.figures.set("instructions.binding_dispatch", reports::median_of(binding_dispatch), "instructions");
  report.notes.push_back("instructions: counted under valgrind's callgrind, each row's own (its spans minus their "
                         "children), median per call over " + std::to_string(run.timed_ids.size()) +
                         " calls; the times were taken under valgrind too, many times slower than a normal run: "
                         "read them only against each other");
}

}  // namespace

int run_trace(const TraceOptions& typed) {
  const TraceOptions options = counting_options(typed);
  const bool counting = !options.count.empty();
  if (counting && !measure::counting_instructions_here()) return run_trace_under_callgrind();
  Prepared prepared = prepare_trace(options);
  if (counting && prepared.sequence)
    throw UsageError("--count instructions counts one op's calls; " + options.op + " is a sequence of ops, not counted yet");
  if (prepared.sequence && options.mode != "eager") return run_program_trace(options, prepared);
  if (prepared.sequence) return run_sequence_trace(options, prepared);
  measure::DeviceSession& session = *prepared.session;

  Timeline timeline;
  std::optional<measure::InstructionCounter> counter;
  if (counting) counter.emplace(timeline);
  const measure::HarnessResult run = measure::run_harness(prepared.call, harness_options(options, prepared), timeline, session);
  const std::vector<uint64_t> self_instructions = counter ? counter->finish() : std::vector<uint64_t>{};
  session.finish(timeline);
  // --peer: after strata's calls and the device session's flush, so neither run sees the other's work.
  Timeline peer_timeline(16);
  std::optional<reports::PeerReport> peer;
  if (prepared.peer_call)
    peer = run_peer(prepared, options, run.warmup, run.repeat, run.last_result, run.untraced_ns, peer_timeline);

  reports::TraceReport report = describe_context(prepared, options);
  describe_measured_calls(report, timeline, run, prepared);
  describe_op_rows(report, run, prepared, options.backward);
  if (counting) describe_instructions(report, timeline, run, self_instructions);
  add_run_figures(report, session);
  add_implicit_copy_note(report, prepared);
  if (peer) {
    report.peer = std::move(peer);
    if (report.frontend == "cli") measure::add_cpp_beside_python_peer_note(report);
  }
  if (options.check) check_result(report, run, prepared, options);
  if (options.backward) describe_backward(report, timeline, run, prepared, options);
  const int code = write_command_output(options, trace_output(report, timeline, peer_timeline, run, session),
                                        std::cout, std::cerr);
  // torch's rows could not be measured (Note [torch's rows]): every other figure is written, and the run
  // says what was missing with the exit code of a request this machine cannot serve.
  if (code == 0 && report.peer && !report.peer->rows_note.empty()) {
    std::cerr << "strata: --peer torch: torch's rows: " << report.peer->rows_note << "\n";
    return static_cast<int>(ExitCode::kUnavailable);
  }
  return code;
}

}  // namespace strata::app
