// `strata trace mlp BxIN[xHIDDEN...]xOUT`: a small model, every step a real call with its own op id
// (Note [Sequences are not operators], frontend/sequence.h), measured by the same harness as one op
// (Note [What the harness runs]). The report is the whole forward as one breakdown, then the op log,
// each step's rows, host tax against compute and the verdict (reports/sequence.h). docs/sequences.md.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "apps/strata/commands.h"
#include "apps/strata/device_session.h"
#include "apps/strata/harness.h"
#include "apps/strata/output_step.h"
#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "reports/figures.h"
#include "reports/json_report.h"
#include "reports/sequence.h"
#include "reports/table.h"

namespace strata::app {

int run_sequence_trace(const TraceOptions& o, Prepared& p) {
  frontend::Sequence& sequence = *p.sequence;
  DeviceSession* session = p.session.get();

  HarnessOptions h;
  h.warmup = o.warmup;
  h.repeat = o.repeat.value_or(0);
  h.budget_s = o.budget_s;
  h.backward = o.backward;  // sum(output).backward() after every forward (Note [Backward in the harness])
  Timeline timeline;
  HarnessResult run = run_harness(sequence, h, timeline, *session);
  session->finish(timeline);

  std::vector<std::string> descriptions;
  for (const frontend::SequenceStep& s : sequence.steps) descriptions.push_back(s.description);
  reports::SequenceFigures seq = reports::compute_sequence(timeline, run.timed_ids, run.steps, descriptions);
  const reports::SequenceFigures cold = reports::compute_sequence(timeline, run.cold_ids, run.steps, descriptions);
  // The backward as a sequence of its own: the seed's sum, then every node in the engine's order, timed
  // call by timed call (the same layout as the forward's steps).
  reports::SequenceFigures backward;
  if (o.backward) {
    std::vector<uint32_t> ids;
    std::vector<std::string> names{"sum (seed)"};
    for (const char* node : run.backward.walk) names.emplace_back(node);
    for (size_t i = 0; i < run.backward.seed.size(); ++i) {
      ids.push_back(run.backward.seed[i]);
      for (const std::vector<uint32_t>& node : run.backward.nodes) ids.push_back(node[i]);
    }
    backward = reports::compute_sequence(timeline, ids, names.size(), names);
  }

  reports::TraceReport rep = describe_context(p, o);
  rep.steady = seq.total;
  rep.cold = cold.total;
  rep.keys = std::to_string(seq.steps) + " ops per forward (see the op log)";
  rep.warmup = static_cast<size_t>(run.warmup);
  rep.repeat = static_cast<size_t>(run.repeat);
  rep.repeat_auto = run.repeat_auto;
  rep.planned_repeat = static_cast<size_t>(run.planned_repeat);
  rep.probe_ns = measure_zone_cost_ns();
  seq.probe_ns = rep.probe_ns;
  backward.probe_ns = rep.probe_ns;
  // A row of the forward is a sum over its S ops, each read by its own probes: it is below what the
  // timers resolve under twice one probe's cost per op (the per-op table marks each op's own medians).
  reports::mark_rows_below_resolution(
      rep, {.zone_ns = rep.probe_ns, .spans_per_row = double(seq.steps), .scope = " per op of the forward"});
  size_t spans_in_timed = 0;
  for (const Span& s : timeline.spans()) spans_in_timed += (s.op_id >= run.timed_ids.front()) ? 1 : 0;
  rep.probes_per_call = double(spans_in_timed) / double(seq.forwards);
  rep.untraced_call_ns = reports::Distribution::of(run.untraced_ns).median;

  using reports::RowKind;
  rep.describe(RowKind::kBinding, "", "schema match + unboxing, " + std::to_string(seq.steps) + " calls");
  for (const reports::BreakdownRow& row : rep.steady.rows) {
    if (row.kind != RowKind::kDispatch) continue;
    if (row.key == "Autograd") {
      const Tensor& out = run.last_result.tensor();
      rep.describe(RowKind::kDispatch, row.key,
                   std::string("record a backward node per op (last: ") + (out.grad_fn() ? out.grad_fn()->name() : "?") +
                       "), redispatch");
    } else {
      rep.describe(RowKind::kDispatch, row.key, row.key + " kernels: key set + table lookup, all ops");
    }
  }
  if (p.choice.device.is_cpu()) {
    std::string lib;
    for (const reports::BreakdownRow& row : rep.steady.rows)
      if (row.kind == RowKind::kLibrary)
        for (const auto& n : row.names) lib += (lib.empty() ? "" : " + ") + n;
    rep.describe(RowKind::kLibrary, "", lib + ", output allocs");
    reports::describe_cpu_device_rows(rep);
    rep.describe(RowKind::kWall, "", "first binding begin -> last library end");
  } else {
    rep.describe(RowKind::kWall, "", "first binding begin -> last kernel end");
  }
  reports::add_steady_join_figures(rep.figures, rep.steady);
  rep.figures.set("sequence.ops_per_forward", double(seq.steps), "count");
  rep.figures.set("sequence.host_tax_median", seq.host_tax.median, "ns");
  rep.figures.set("sequence.compute_median", seq.compute.median, "ns");
  rep.figures.set("sequence.compute_share", seq.compute_share, "ratio");
  if (seq.on_gpu) {
    rep.figures.set("sequence.gpu_idle_median", seq.kernel_idle.median, "ns");
    rep.figures.set("sequence.launch_share", seq.launch_share, "ratio");
    rep.figures.set("sequence.kernels_per_forward", seq.kernels_per_forward, "count");
  }
  if (o.backward) {
    describe_backward_rows(rep, timeline, run, p);
    rep.figures.set("sequence.backward_steps", double(backward.steps), "count");
    rep.figures.set("sequence.backward_host_tax_median", backward.host_tax.median, "ns");
    rep.figures.set("sequence.backward_compute_median", backward.compute.median, "ns");
    rep.figures.set("sequence.backward_compute_share", backward.compute_share, "ratio");
  }
  session->describe(rep);
  reports::add_rate_figures(rep);
  if (std::string spread = reports::spread_note(rep.steady.wall, ""); !spread.empty()) rep.notes.push_back(spread);

  if (o.check) {
    rep.check.ran = true;
    rep.check.relative_error = reference::relative_error(run.last_result.tensor(), frontend::reference_result(sequence));
    rep.check.tolerance = frontend::sequence_tolerance(sequence.spec, p.autocast.value_or(p.dtype), o.tf32);
    rep.notes.push_back("--check compares the model's output with a float64 forward of the same input and parameters; "
                        "tolerance = the " + rep.dtype + " tolerance of one op x " +
                        std::to_string(sequence.spec.linears()) + " Linear layers");
    if (o.backward) {
      // Every parameter's .grad from the last timed backward against the float64 gradient of sum(output).
      const std::vector<std::vector<double>> want = frontend::reference_parameter_gradients(sequence);
      const double tolerance = frontend::sequence_gradient_tolerance(sequence.spec, p.autocast.value_or(p.dtype), o.tf32);
      for (size_t i = 0; i < sequence.parameters.size(); ++i) {
        reports::GradCheck c;
        c.argument = frontend::parameter_name(i);
        c.tolerance = tolerance;
        const Tensor g = sequence.parameters[i].grad();
        c.relative_error = g.defined() ? reference::relative_error(g, want[i]) : INFINITY;
        rep.backward.checks.push_back(c);
        if (!c.passed() && rep.check.passed()) {  // the run's one verdict (exit 3) covers the gradients
          rep.check.relative_error = c.relative_error;
          rep.check.tolerance = c.tolerance;
        }
      }
      rep.notes.push_back("--check with --backward: every parameter's gradient of sum(output) against a float64 "
                          "backward; tolerance twice the forward's (a gradient passes back through as many GEMMs)");
    }
  }

  CommandOutput output;
  output.print_table = [&](std::ostream& out) {
    reports::print_trace_table(rep, out);
    reports::print_sequence_table(seq, out);
    if (o.backward) reports::print_sequence_table(backward, out, "backward");
  };
  output.json = [&] { return reports::sequence_report_json(rep, seq, o.backward ? &backward : nullptr); };
  output.chrome_trace = [&](reports::ChromeTraceWriter& writer) {
    writer.add_metadata("op", rep.spec + "  " + rep.description + "  " + rep.dtype);
    writer.add_metadata("device", rep.device);
    for (const auto& [k, v] : rep.env.device) writer.add_metadata(k, v);
    reports::TraceMetadata kineto;
    kineto.gpus = session->trace_gpus();
    // One ProfilerStep per forward (all its ops), as a training loop's step annotation would show it.
    // With --backward the step holds the backward's seed and nodes too: one training step.
    for (size_t i = 0; i < run.timed_ids.size(); i += run.steps) {
      std::vector<uint32_t> step(run.timed_ids.begin() + static_cast<std::ptrdiff_t>(i),
                                 run.timed_ids.begin() + static_cast<std::ptrdiff_t>(i + run.steps));
      if (o.backward && i / run.steps < run.backward.seed.size()) {
        step.push_back(run.backward.seed[i / run.steps]);
        for (const std::vector<uint32_t>& node : run.backward.nodes) step.push_back(node[i / run.steps]);
      }
      kineto.steps.push_back(std::move(step));
    }
    writer.set_trace_metadata(std::move(kineto));
    writer.add_timeline(timeline, "eager");
  };
  output.chrome_trace_hint = " (open in https://ui.perfetto.dev or chrome://tracing)";
  output.check = rep.check;
  output.tolerance_name = rep.dtype + " tolerance (x " + std::to_string(sequence.spec.linears()) + " layers)";
  return write_command_output(o, output, std::cout, std::cerr);
}

}  // namespace strata::app
