// `strata trace mlp BxIN[xHIDDEN...]xOUT`: a small model, every step a real call with its own op id
// (Note [Sequences are not operators], frontend/sequence.h), measured by the same harness as one op
// (Note [What the harness runs]). The report is the whole forward as one breakdown, then the op log,
// each step's rows, host tax against compute and the verdict (reports/model/sequence.h). docs/sequences.md.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "apps/strata/command_output.h"
#include "apps/strata/prepared_trace.h"
#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "lib/machine.h"
#include "measure/device_session.h"
#include "measure/harness.h"
#include "measure/report_builder.h"
#include "reports/formats/sequence_table.h"
#include "reports/model/figures.h"
#include "reports/formats/json_report.h"
#include "reports/model/sequence.h"
#include "reports/formats/table.h"

namespace strata::app {
namespace {

// The backward as a sequence of its own: the seed's sum, then every node in the engine's order, timed
// call by timed call (the same layout as the forward's steps).
reports::SequenceFigures backward_sequence(const Timeline& timeline, const measure::HarnessResult& run) {
  std::vector<uint32_t> ids;
  std::vector<std::string> names{"sum (seed)"};
  for (const char* node : run.backward.walk) names.emplace_back(node);
  for (size_t i = 0; i < run.backward.seed.size(); ++i) {
    ids.push_back(run.backward.seed[i]);
    for (const std::vector<uint32_t>& node : run.backward.nodes) ids.push_back(node[i]);
  }
  return reports::compute_sequence(timeline, ids, names.size(), names);
}

// The whole forward as one breakdown, what the harness ran, and what the probes cost.
void describe_forwards(reports::TraceReport& report, const reports::SequenceFigures& forwards,
                       const reports::SequenceFigures& cold, const Timeline& timeline, const measure::HarnessResult& run) {
  report.steady = forwards.total;
  report.cold = cold.total;
  report.keys = std::to_string(forwards.steps) + " ops per forward (see the op log)";
  describe_harness_run(report, run);
  report.probe_ns = measure_zone_cost_ns();
  // A row of the forward is a sum over its S ops, each read by its own probes: it is below what the
  // timers resolve under twice one probe's cost per op (the per-op table marks each op's own medians).
  measure::mark_rows_below_resolution(report, {.zone_ns = report.probe_ns, .spans_per_row = double(forwards.steps),
                                               .scope = " per op of the forward"});
  size_t spans_in_timed = 0;
  for (const Span& span : timeline.spans()) spans_in_timed += (span.op_id >= run.timed_ids.front()) ? 1 : 0;
  report.probes_per_call = double(spans_in_timed) / double(forwards.forwards);
}

// Words for each row of the whole forward (Note [One report builder]).
void describe_sequence_rows(reports::TraceReport& report, const measure::HarnessResult& run, size_t steps, bool on_cpu) {
  using reports::RowKind;
  report.describe(RowKind::kBinding, "", "schema match + unboxing, " + std::to_string(steps) + " calls");
  for (const reports::BreakdownRow& row : report.steady.rows) {
    if (row.kind != RowKind::kDispatch) continue;
    if (row.key == "Autograd") {
      const Tensor& out = run.last_result.tensor();
      report.describe(RowKind::kDispatch, row.key,
                      std::string("record a backward node per op (last: ") +
                          (out.grad_fn() ? out.grad_fn()->name() : "?") + "), redispatch");
    } else if (row.key.starts_with("contiguous:")) {
      // --view: a step's kernel made a strided input contiguous, a call of its own (Note [Contiguous
      // inputs]); the same words as a single op's trace.
      report.describe(RowKind::kDispatch, row.key,
                      "contiguous " + row.key.substr(row.key.find(':') + 1) + ": key set + lookup (copies of strided inputs)");
    } else {
      measure::describe_kernel_row(report, row.key, /*all_ops=*/true);
    }
  }
  if (on_cpu) {
    std::string library;
    for (const reports::BreakdownRow& row : report.steady.rows)
      if (row.kind == RowKind::kLibrary)
        for (const auto& name : row.names) library += (library.empty() ? "" : " + ") + name;
    report.describe(RowKind::kLibrary, "", library + ", output allocs");
    measure::describe_cpu_device_rows(report);
  }
  measure::describe_wall_row(report, measure::Caller::kCpp, on_cpu ? measure::WallEnd::kLibrary : measure::WallEnd::kKernel,
                             /*sequence=*/true);
}

void add_sequence_figures(reports::Figures& figures, const reports::SequenceFigures& forwards,
                          const reports::SequenceFigures* backward) {
  figures.set("sequence.ops_per_forward", double(forwards.steps), "count");
  figures.set("sequence.host_tax_median", forwards.host_tax.median, "ns");
  figures.set("sequence.compute_median", forwards.compute.median, "ns");
  figures.set("sequence.compute_share", forwards.compute_share, "ratio");
  if (forwards.on_gpu) {
    figures.set("sequence.gpu_idle_median", forwards.kernel_idle.median, "ns");
    figures.set("sequence.launch_share", forwards.launch_share, "ratio");
    figures.set("sequence.kernels_per_forward", forwards.kernels_per_forward, "count");
  }
  if (backward != nullptr) {
    figures.set("sequence.backward_steps", double(backward->steps), "count");
    figures.set("sequence.backward_host_tax_median", backward->host_tax.median, "ns");
    figures.set("sequence.backward_compute_median", backward->compute.median, "ns");
    figures.set("sequence.backward_compute_share", backward->compute_share, "ratio");
  }
}

// --check with --backward: every parameter's .grad from the last timed backward against the float64
// gradient of sum(output); the run's one verdict (exit 3) covers the gradients.
void check_parameter_gradients(reports::TraceReport& report, const Prepared& prepared, bool tf32) {
  const frontend::Sequence& sequence = *prepared.sequence;
  const std::vector<std::vector<double>> want = frontend::reference_parameter_gradients(sequence);
  const double tolerance =
      frontend::sequence_gradient_tolerance(sequence.spec, prepared.autocast.value_or(prepared.dtype), tf32);
  for (size_t i = 0; i < sequence.parameters.size(); ++i) {
    reports::GradCheck check;
    check.argument = frontend::parameter_name(i);
    check.tolerance = tolerance;
    const Tensor grad = sequence.parameters[i].grad();
    check.relative_error = grad.defined() ? reference::relative_error(grad, want[i]) : INFINITY;
    report.backward.checks.push_back(check);
    if (!check.passed() && report.check.passed()) {
      report.check.relative_error = check.relative_error;
      report.check.tolerance = check.tolerance;
    }
  }
  report.notes.push_back("--check with --backward: every parameter's gradient of sum(output) against a float64 "
                         "backward; tolerance twice the forward's (a gradient passes back through as many GEMMs)");
}

// --check: the model's output against a float64 forward of the same input and parameters.
void check_sequence(reports::TraceReport& report, const measure::HarnessResult& run, const Prepared& prepared,
                    const TraceOptions& options) {
  const frontend::Sequence& sequence = *prepared.sequence;
  report.check.ran = true;
  report.check.relative_error =
      reference::relative_error(run.last_result.tensor(), frontend::reference_result(sequence));
  report.check.tolerance =
      frontend::sequence_tolerance(sequence.spec, prepared.autocast.value_or(prepared.dtype), options.tf32);
  report.notes.push_back("--check compares the model's output with a float64 forward of the same input and parameters; "
                         "tolerance = the " + report.dtype + " tolerance of one op x " +
                         std::to_string(sequence.spec.linears()) + " Linear layers");
  if (options.backward) check_parameter_gradients(report, prepared, options.tf32);
}

// One ProfilerStep per forward (all its ops), as a training loop's step annotation would show it. With
// --backward the step holds the backward's seed and nodes too: one training step.
std::vector<std::vector<uint32_t>> profiler_steps(const measure::HarnessResult& run, bool backward) {
  std::vector<std::vector<uint32_t>> steps;
  for (size_t i = 0; i < run.timed_ids.size(); i += run.steps) {
    std::vector<uint32_t> step(run.timed_ids.begin() + static_cast<std::ptrdiff_t>(i),
                               run.timed_ids.begin() + static_cast<std::ptrdiff_t>(i + run.steps));
    if (backward && i / run.steps < run.backward.seed.size()) {
      step.push_back(run.backward.seed[i / run.steps]);
      for (const std::vector<uint32_t>& node : run.backward.nodes) step.push_back(node[i / run.steps]);
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

}  // namespace

int run_sequence_trace(const TraceOptions& options, Prepared& prepared) {
  frontend::Sequence& sequence = *prepared.sequence;
  measure::DeviceSession& session = *prepared.session;
  // sum(output).backward() after every forward with --backward (Note [Backward in the harness])
  Timeline timeline;
  const measure::HarnessResult run = measure::run_harness(sequence, harness_options(options, prepared), timeline, session);
  session.finish(timeline);

  std::vector<std::string> descriptions;
  for (const frontend::SequenceStep& step : sequence.steps) descriptions.push_back(step.description);
  reports::SequenceFigures forwards = reports::compute_sequence(timeline, run.timed_ids, run.steps, descriptions);
  const reports::SequenceFigures cold = reports::compute_sequence(timeline, run.cold_ids, run.steps, descriptions);
  reports::SequenceFigures backward;
  if (options.backward) backward = backward_sequence(timeline, run);

  reports::TraceReport report = describe_context(prepared, options);
  describe_forwards(report, forwards, cold, timeline, run);
  forwards.probe_ns = report.probe_ns;
  backward.probe_ns = report.probe_ns;
  describe_sequence_rows(report, run, forwards.steps, prepared.choice.device.is_cpu());
  reports::add_steady_join_figures(report.figures, report.steady);
  add_sequence_figures(report.figures, forwards, options.backward ? &backward : nullptr);
  if (options.backward) describe_backward_rows(report, timeline, run, prepared);
  session.describe(report);
  reports::add_rate_figures(report);
  if (std::string spread = reports::spread_note(report.steady.wall, load_context(load_average())); !spread.empty()) report.notes.push_back(spread);
  if (options.check) check_sequence(report, run, prepared, options);

  CommandOutput output;
  output.print_table = [&](std::ostream& out) {
    reports::print_trace_table(report, out);
    reports::print_sequence_table(forwards, out);
    if (options.backward) reports::print_sequence_table(backward, out, "backward");
  };
  output.json = [&] { return reports::sequence_report_json(report, forwards, options.backward ? &backward : nullptr); };
  output.chrome_trace = [&](reports::ChromeTraceWriter& writer) {
    writer.add_metadata("op", report.spec + "  " + report.description + "  " + report.dtype);
    writer.add_metadata("device", report.device);
    for (const auto& [key, value] : report.env.device) writer.add_metadata(key, value);
    reports::TraceMetadata kineto;
    kineto.gpus = session.trace_gpus();
    kineto.steps = profiler_steps(run, options.backward);
    writer.set_trace_metadata(std::move(kineto));
    writer.add_timeline(timeline, "eager");
  };
  output.chrome_trace_hint = " (open in https://ui.perfetto.dev or chrome://tracing)";
  output.check = report.check;
  output.tolerance_name = report.dtype + " tolerance (x " + std::to_string(sequence.spec.linears()) + " layers)";
  return write_command_output(options, output, std::cout, std::cerr);
}

}  // namespace strata::app
