// `strata trace PROGRAM SPEC --mode graph | compiled`: a program (mlp or a named one, frontend/programs.h)
// run whole, once per timed call. graph: the forward captured once and replayed (a plan replay on the CPU,
// a CUDA Graph on a GPU). compiled: captured at the dispatcher, fused, generated as C++, compiled and
// loaded (layers/compiler, docs/compiled.md), then each timed call is one run of the compiled graph:
// binding (its guards), one dispatch per fused kernel, the kernels. The cold phases get rows of their own.
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/strata/prepared_trace.h"
#include "apps/strata/compiled_program.h"
#include "measure/harness.h"
#include "apps/strata/output_step.h"
#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "measure/report_builder.h"
#include "lib/zone.h"
#include "reports/json_report.h"
#include "reports/sequence.h"
#include "reports/table.h"

namespace strata::app {

void check_mode_options(const TraceOptions& o, bool sequence) {
  if (o.mode != "eager" && o.mode != "graph" && o.mode != "compiled") {
    throw UsageError("unknown --mode '" + o.mode +
                     "'; allowed: eager (every op through binding and dispatch), graph "
                     "(captured once, replayed), compiled (captured, fused, compiled to C++)");
  }
  if (!o.emit.empty() && o.emit != "cpp" && o.emit != "ptx" && o.emit != "sass")
    throw UsageError("unknown --emit '" + o.emit + "'; allowed: cpp, ptx, sass (with --mode compiled)");
  if (!o.emit.empty() && o.mode != "compiled") {
    throw UsageError("--emit " + o.emit +
                     " prints the generated code of a compiled graph; it needs --mode compiled (got --mode " +
                     o.mode + ")");
  }
  if (!o.arch.empty() && o.emit != "ptx" && o.emit != "sass") {
    throw UsageError(
        "--arch names the GPU architecture of --emit ptx or sass; add --emit ptx or sass, or leave --arch out");
  }
  if (!o.arch.empty()) compiler::cuda::check_arch(o.arch);
  const bool program = sequence && o.op != "mlp";
  if (o.mode != "eager" && !sequence) {
    throw UsageError("--mode " + o.mode + " runs a program: mlp, " + frontend::program_names() + "; " + o.op +
                     " is one operator (strata compare " + o.op + " replays it beside eager)");
  }
  if (program && !o.autocast.empty()) {
    throw UsageError("--autocast applies to single ops and mlp; " + o.op +
                     " runs in --dtype (leave --autocast out)");
  }
  if (program && o.backward) {
    throw UsageError("--backward applies to single ops and mlp; " + o.op +
                     " is timed forward only (leave it out)");
  }
  if (o.op == "gelu_tanh" && o.requires_grad) {
    throw UsageError(
        "--requires-grad makes a program's parameters require grad, and gelu_tanh has none (its input is "
        "data); leave it out");
  }
  if (o.mode == "eager") return;
  if (o.backward) {
    throw UsageError("--backward with --mode " + o.mode +
                     ": a replayed or compiled graph runs the forward only; "
                     "use --mode eager to time the backward");
  }
  if (o.mode != "compiled") return;
  if (o.requires_grad) {
    throw UsageError(
        "--requires-grad with --mode compiled: a compiled graph runs forward only, with no Autograd key "
        "(docs/compiled.md); leave it out, or use --mode eager or graph");
  }
  if (!o.autocast.empty())
    throw UsageError("--autocast with --mode compiled: the compiled path does not autocast; use --dtype");
  if (o.device != "auto" && o.device != "cpu") {
    throw UsageError("--mode compiled runs generated C++ on the CPU; --device " + o.device +
                     " is not allowed (use "
                     "--device cpu or leave it out)");
  }
}

namespace {

// The one-time rows of a graph or compiled run, in the order they happened.
struct ColdRow {
  std::string name, what;
  double ns = 0;
};

void print_cold_rows(const std::vector<ColdRow>& rows, std::ostream& out) {
  out << "one-time (before the first call)\n";
  double total = 0;
  for (const ColdRow& r : rows) {
    out << "  " << reports::pad(r.name, 12) << reports::pad(r.what, 62)
        << reports::lpad(reports::format_ns(r.ns), 11) << "\n";
    total += r.ns;
  }
  out << "  " << reports::pad("total", 74) << reports::lpad(reports::format_ns(total), 11) << "\n";
}

std::vector<ColdRow> compiled_cold_rows(const compiler::CompiledGraph& g, size_t calls) {
  const compiler::CompileTimings& t = g.timings();
  const size_t built = g.builds().size();
  const std::string kernels = std::to_string(built) + " generated kernel" + (built == 1 ? "" : "s");
  return {
      {"capture", "one eager forward, " + std::to_string(calls) + " calls recorded at the Capture key",
       t.capture_ns},
      {"fusion",
       "plan: " + std::to_string(calls) + " ops into " + std::to_string(g.plan().kernels.size()) +
           (g.plan().kernels.size() == 1 ? " kernel" : " kernels"),
       t.fusion_ns},
      {"codegen", "C++ source of " + kernels, t.codegen_ns},
      {"compile",
       t.cache_misses == 0 ? "none: every kernel was in the cache"
                           : t.compiler + ", " + std::to_string(t.cache_misses) + " kernel" +
                                 (t.cache_misses == 1 ? "" : "s") + " compiled",
       t.compile_ns},
      {"load",
       "dlopen + checks, " + std::to_string(t.cache_hits) + " cache hit" + (t.cache_hits == 1 ? "" : "s") +
           " of " + std::to_string(built),
       t.load_ns},
  };
}

// What both modes report the same way: the breakdown of a whole-graph call, its words, figures and check.
reports::TraceReport graph_call_report(const TraceOptions& o, Prepared& p, const Timeline& timeline,
                                       const HarnessResult& run, reports::SequenceFigures& fig) {
  reports::TraceReport rep = describe_context(p, o);
  rep.steady = fig.total;
  rep.cold = reports::compute_sequence(timeline, run.cold_ids, 1).total;
  describe_harness_run(rep, run);
  rep.probe_ns = measure_zone_cost_ns();
  fig.probe_ns = rep.probe_ns;
  size_t spans = 0;
  for (const Span& s : timeline.spans()) spans += (s.op_id >= run.timed_ids.front()) ? 1 : 0;
  rep.probes_per_call = double(spans) / double(fig.forwards);
  if (p.choice.device.is_cpu()) {  // on a GPU (--mode graph) the device session describes these rows
    measure::describe_cpu_device_rows(rep);
  }
  reports::add_steady_join_figures(rep.figures, rep.steady);
  rep.figures.set("sequence.ops_per_forward", double(p.sequence->steps.size()), "count");
  rep.figures.set("sequence.host_tax_median", fig.host_tax.median, "ns");
  rep.figures.set("sequence.compute_median", fig.compute.median, "ns");
  p.session->describe(rep);
  reports::add_rate_figures(rep);
  if (std::string spread = reports::spread_note(rep.steady.wall, ""); !spread.empty())
    rep.notes.push_back(spread);
  if (o.check) {
    rep.check.ran = true;
    rep.check.relative_error =
        reference::relative_error(run.last_result.tensor(), frontend::reference_result(*p.sequence));
    rep.check.tolerance = frontend::sequence_tolerance(p.sequence->spec, p.dtype, o.tf32);
    rep.figures.set("check.relative_error", rep.check.relative_error, "ratio");
  }
  return rep;
}

nlohmann::json cold_json(const std::vector<ColdRow>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const ColdRow& r : rows) j.push_back({{"phase", r.name}, {"what", r.what}, {"ns", r.ns}});
  return j;
}

// The one-time work before the timed calls, under op id 1 of `timeline` (the Chrome trace shows it
// beside the calls, whose ids start at 2): capture, fusion, codegen, compile and load; or the replay's
// capture and instantiation.
struct OneTime {
  std::optional<CompiledProgram> compiled;
  std::unique_ptr<Replay> replay;
  CaptureCost cost;
  std::vector<ColdRow> cold;
  std::function<binding::IValue()> call;  // one whole forward, as each timed call runs it
};

OneTime prepare_one_time(const TraceOptions& o, Prepared& p, Timeline& timeline) {
  frontend::Sequence& sequence = *p.sequence;
  OneTime t;
  tracing::ActiveScope scope(&timeline);
  timeline.set_op(1);
  if (o.mode == "compiled") {
    t.compiled = compile_program(sequence);
    // Before any timed call: a refusal (NVRTC, ptxas, no module) ends the run with no partial output.
    if (o.emit == "ptx" || o.emit == "sass") emit_program_ptx(*t.compiled, o.arch, o.emit == "sass");
    t.cold = compiled_cold_rows(*t.compiled->graph, sequence.steps.size());
    // By value: a CompiledGraph is a shared handle, and `t` may move on return.
    t.call = [g = *t.compiled->graph, inputs = t.compiled->inputs] {
      return binding::IValue(g.run(inputs)[0]);
    };
  } else {
    const uint64_t t0 = host_clock::ticks();
    t.replay = p.session->capture([&] { return sequence.forward(); }, {1}, t.cost);
    const double setup = host_clock::elapsed_ns(t0);
    t.cold = {{"capture",
               "one forward through the full stack, recording " + std::to_string(t.cost.recorded_calls) +
                   " kernel calls",
               t.cost.capture_ns},
              {"instantiate", "the recording made replayable", t.cost.instantiate_ns},
              {"other", "the rest of the setup (the plan's links, the session)",
               std::max(0.0, setup - t.cost.capture_ns - t.cost.instantiate_ns)}};
    Replay* r = t.replay.get();
    t.call = [r] {
      r->replay();
      return r->last_result();
    };
  }
  timeline.set_op(0);
  return t;
}

}  // namespace

int run_program_trace(const TraceOptions& o, Prepared& p) {
  Timeline timeline;
  OneTime one = prepare_one_time(o, p, timeline);
  const std::optional<CompiledProgram>& compiled = one.compiled;
  const std::vector<ColdRow>& cold = one.cold;
  HarnessOptions h;
  h.warmup = o.warmup;
  h.repeat = o.repeat.value_or(0);
  h.budget_s = o.budget_s;
  h.first_op_id = 2;
  HarnessResult run = run_harness(one.call, h, timeline, *p.session);
  p.session->finish(timeline);

  const std::string label = compiled ? "compiled graph" : one.replay->kind();
  reports::SequenceFigures fig = reports::compute_sequence(timeline, run.timed_ids, 1, {label});
  reports::TraceReport rep = graph_call_report(o, p, timeline, run, fig);
  rep.keys = label + ", one call per timed iteration";
  double cold_total = 0;
  for (const ColdRow& r : cold) {
    rep.figures.set("cold." + r.name, r.ns, "ns");
    cold_total += r.ns;
  }
  rep.figures.set("cold.total", cold_total, "ns");
  if (compiled) {
    describe_compiled(rep, *compiled, o);
  } else {
    rep.describe(reports::RowKind::kRuntime, "", "the replay's own loop (no binding, no dispatch)");
    rep.describe(reports::RowKind::kLibrary, "", "the recorded kernel calls, in order");
    rep.describe_na(reports::RowKind::kBinding,
                    "n/a: a replay calls the recorded kernels, no binding, no dispatch");
    rep.figures.set("graph.kernel_calls", double(one.cost.recorded_calls), "count");
  }
  rep.describe(reports::RowKind::kWall, "",
               p.choice.device.is_cpu() ? "first zone begin -> last library end (a forward)"
                                        : "first zone begin -> last kernel end (a forward)");

  CommandOutput output;
  output.print_table = [&](std::ostream& out) {
    reports::print_trace_table(rep, out);
    print_cold_rows(cold, out);
    if (compiled) print_compiled_listing(*compiled, o.emit == "cpp", out);
  };
  output.json = [&] {
    nlohmann::json j = nlohmann::json::parse(reports::sequence_report_json(rep, fig, nullptr));
    j["mode"] = o.mode;
    j["cold"] = cold_json(cold);
    if (compiled) j["compiled"] = compiled_json(*compiled, o.emit == "cpp");
    return j.dump(2) + "\n";
  };
  output.chrome_trace = [&](reports::ChromeTraceWriter& writer) {
    writer.add_metadata("op", rep.spec + "  " + rep.description + "  " + rep.dtype + "  --mode " + o.mode);
    writer.add_metadata("device", rep.device);
    reports::TraceMetadata kineto;
    kineto.gpus = p.session->trace_gpus();
    kineto.steps.push_back({1});  // the one-time phases, then one step per timed call
    for (uint32_t id : run.timed_ids) kineto.steps.push_back({id});
    writer.set_trace_metadata(std::move(kineto));
    writer.add_timeline(timeline, o.mode);
  };
  output.chrome_trace_hint = " (open in https://ui.perfetto.dev or chrome://tracing)";
  output.check = rep.check;
  output.tolerance_name = rep.dtype + " tolerance";
  return write_command_output(o, output, std::cout, std::cerr);
}

}  // namespace strata::app
