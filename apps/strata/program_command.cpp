// `strata trace PROGRAM SPEC --mode graph | compiled`: a program (mlp or a named one, frontend/programs.h)
// run whole, once per timed call. graph: the forward captured once and replayed (a plan replay on the CPU,
// a CUDA Graph on a GPU). compiled: captured at the dispatcher, fused, generated as C++, compiled and
// loaded (layers/compiler, docs/compiled.md), then each timed call is one run of the compiled graph:
// binding (its guards), one dispatch per fused kernel, the kernels. The cold phases get rows of their own.
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/strata/compiled_program.h"
#include "apps/strata/command_output.h"
#include "apps/strata/prepared_trace.h"
#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "lib/machine.h"
#include "lib/zone.h"
#include "measure/harness.h"
#include "measure/report_builder.h"
#include "reports/formats/json_report.h"
#include "reports/formats/json_text.h"
#include "reports/model/units.h"
#include "reports/model/sequence.h"
#include "reports/formats/table.h"

namespace strata::app {

void check_mode_options(const TraceOptions& options, bool sequence) {
  if (options.mode != "eager" && options.mode != "graph" && options.mode != "compiled") {
    throw UsageError("unknown --mode '" + options.mode +
                     "'; allowed: eager (every op through binding and dispatch), graph "
                     "(captured once, replayed), compiled (captured, fused, compiled to C++)");
  }
  if (!options.emit.empty() && options.emit != "cpp" && options.emit != "ptx" && options.emit != "sass")
    throw UsageError("unknown --emit '" + options.emit + "'; allowed: cpp, ptx, sass (with --mode compiled)");
  if (!options.emit.empty() && options.mode != "compiled") {
    throw UsageError("--emit " + options.emit +
                     " prints the generated code of a compiled graph; it needs --mode compiled (got --mode " +
                     options.mode + ")");
  }
  if (!options.arch.empty() && options.emit != "ptx" && options.emit != "sass") {
    throw UsageError(
        "--arch names the GPU architecture of --emit ptx or sass; add --emit ptx or sass, or leave --arch out");
  }
  if (!options.arch.empty()) compiler::cuda::check_arch(options.arch);
  const bool program = sequence && options.op != "mlp";
  if (options.mode != "eager" && !sequence) {
    throw UsageError("--mode " + options.mode + " runs a program: mlp, " + frontend::program_names() + "; " + options.op +
                     " is one operator (strata compare " + options.op + " replays it beside eager)");
  }
  if (program && !options.autocast.empty()) {
    throw UsageError("--autocast applies to single ops and mlp; " + options.op +
                     " runs in --dtype (leave --autocast out)");
  }
  if (program && options.backward) {
    throw UsageError("--backward applies to single ops and mlp; " + options.op +
                     " is timed forward only (leave it out)");
  }
  if (options.op == "gelu_tanh" && options.requires_grad) {
    throw UsageError(
        "--requires-grad makes a program's parameters require grad, and gelu_tanh has none (its input is "
        "data); leave it out");
  }
  if (options.mode == "eager") return;
  if (options.backward) {
    throw UsageError("--backward with --mode " + options.mode +
                     ": a replayed or compiled graph runs the forward only; "
                     "use --mode eager to time the backward");
  }
  if (options.mode != "compiled") return;
  if (options.requires_grad) {
    throw UsageError(
        "--requires-grad with --mode compiled: a compiled graph runs forward only, with no Autograd key "
        "(docs/compiled.md); leave it out, or use --mode eager or graph");
  }
  if (!options.autocast.empty())
    throw UsageError("--autocast with --mode compiled: the compiled path does not autocast; use --dtype");
  // --device cuda: the generated kernels as PTX loaded by the driver, GEMM epilogues on cuBLASLt (Note
  // [Generated kernels on the GPU] in apps/cuda_module/compiled_kernels_cuda.cpp); without a usable GPU,
  // device selection refuses it with exit 4 as for any op. --device auto stays the CPU (prepare_trace.cpp).
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
  const bool gpu = built > 0 && g.builds().front().device.has_value();
  if (gpu) {  // NVRTC, then the driver's JIT and cuBLASLt's heuristic (Note [Generated kernels on the GPU])
    return {{"capture", "one eager forward on the GPU, " + std::to_string(calls) + " calls recorded", t.capture_ns},
            {"fusion", "plan: " + std::to_string(calls) + " ops into " + std::to_string(g.plan().kernels.size()) + " kernels",
             t.fusion_ns},
            {"codegen", "C++ and CUDA C source of " + kernels, t.codegen_ns},
            {"compile",
             t.cache_misses == 0
                 ? "none: every kernel's PTX was in the cache (reading it: Note [The PTX cache])"
                 : "NVRTC, CUDA C -> PTX for " + g.builds().front().device->arch + ", " +
                       std::to_string(t.cache_misses) + " compiled, " + std::to_string(t.cache_hits) + " cache hit" +
                       (t.cache_hits == 1 ? "" : "s"),
             t.compile_ns},
            {"load", "driver JIT PTX -> SASS (cuModuleLoadDataEx), cuBLASLt heuristic", t.load_ns}};
  }
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
reports::TraceReport graph_call_report(const TraceOptions& options, Prepared& prepared, const Timeline& timeline,
                                       const measure::HarnessResult& run, reports::SequenceFigures& fig) {
  reports::TraceReport report = describe_context(prepared, options);
  report.steady = fig.total;
  report.cold = reports::compute_sequence(timeline, run.cold_ids, 1).total;
  describe_harness_run(report, run);
  report.probe_ns = measure_zone_cost_ns();
  fig.probe_ns = report.probe_ns;
  size_t spans = 0;
  for (const Span& s : timeline.spans()) spans += (s.op_id >= run.timed_ids.front()) ? 1 : 0;
  report.probes_per_call = double(spans) / double(fig.forwards);
  if (prepared.choice.device.is_cpu()) {  // on a GPU (--mode graph) the device session describes these rows
    measure::describe_cpu_device_rows(report);
  }
  reports::add_steady_join_figures(report.figures, report.steady);
  report.figures.set("sequence.ops_per_forward", double(prepared.sequence->steps.size()), "count");
  report.figures.set("sequence.host_tax_median", fig.host_tax.median, "ns");
  report.figures.set("sequence.compute_median", fig.compute.median, "ns");
  prepared.session->describe(report);
  reports::add_rate_figures(report);
  if (std::string spread = reports::spread_note(report.steady.wall, load_context(load_average())); !spread.empty())
    report.notes.push_back(spread);
  if (options.check) {
    report.check.ran = true;
    report.check.relative_error =
        reference::relative_error(run.last_result.tensor(), frontend::reference_result(*prepared.sequence));
    report.check.tolerance = frontend::sequence_tolerance(prepared.sequence->spec, prepared.dtype, options.tf32);
    report.figures.set("check.relative_error", report.check.relative_error, "ratio");
  }
  return report;
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
  std::unique_ptr<measure::Replay> replay;
  measure::CaptureCost cost;
  std::vector<ColdRow> cold;
  std::function<binding::IValue()> call;  // one whole forward, as each timed call runs it
};

OneTime prepare_one_time(const TraceOptions& options, Prepared& prepared, Timeline& timeline) {
  frontend::Sequence& sequence = *prepared.sequence;
  OneTime t;
  tracing::ActiveScope scope(&timeline);
  timeline.set_op(1);
  if (options.mode == "compiled") {
    t.compiled = compile_program(sequence);
    // Before any timed call: a refusal (NVRTC, ptxas, no module) ends the run with no partial output.
    if (options.emit == "ptx" || options.emit == "sass") emit_program_ptx(*t.compiled, options.arch, options.emit == "sass");
    t.cold = compiled_cold_rows(*t.compiled->graph, sequence.steps.size());
    // By value: a CompiledGraph is a shared handle, and `t` may move on return. On a GPU each fused
    // kernel's work is tagged (Note [Compiled kernels attributed to their group]); on the CPU there are no
    // device kernels to attribute, and the timed calls stay as they were.
    std::shared_ptr<StepTagger> tagger;
    if (prepared.choice.device.is_cuda())
      tagger = std::make_shared<StepTagger>(*prepared.session, t.compiled->graph->plan().kernels.size());
    t.call = [g = *t.compiled->graph, inputs = t.compiled->inputs, tagger] {
      return binding::IValue(g.run(inputs, tagger.get())[0]);
    };
  } else {
    const uint64_t t0 = host_clock::ticks();
    t.replay = prepared.session->capture([&] { return sequence.forward(); }, {1}, t.cost);
    const double setup = host_clock::elapsed_ns(t0);
    t.cold = {{"capture",
               "one forward through the full stack, recording " + std::to_string(t.cost.recorded_calls) +
                   " kernel calls",
               t.cost.capture_ns},
              {"instantiate", "the recording made replayable", t.cost.instantiate_ns},
              {"other", "the rest of the setup (the plan's links, the session)",
               std::max(0.0, setup - t.cost.capture_ns - t.cost.instantiate_ns)}};
    measure::Replay* r = t.replay.get();
    t.call = [r] {
      r->replay();
      return r->last_result();
    };
  }
  timeline.set_op(0);
  return t;
}

// On a GPU with CUPTI's records: the timed calls' device kernels by the fused kernel that launched each
// (Note [Compiled kernels attributed to their group]), its counts among the figures. None elsewhere.
std::optional<reports::CompiledAttribution> attribute_trace_kernels(const Prepared& prepared,
                                                                    const CompiledProgram& program,
                                                                    const Timeline& timeline,
                                                                    const std::vector<uint32_t>& timed_ids,
                                                                    reports::TraceReport& report) {
  if (!prepared.choice.device.is_cuda() || !timeline.device.enabled) return std::nullopt;
  reports::CompiledAttribution a = reports::attribute_compiled_kernels(
      timeline.device, kernels_of_ops(timeline.device, timed_ids), program.graph->plan().kernels.size(), 1);
  report.figures.set("compiled.gpu_kernels", double(a.kernels), "count");
  report.figures.set("compiled.gpu_kernels_attributed", double(a.attributed), "count");
  report.figures.set("compiled.gpu_kernels_unattributed", double(a.unattributed()), "count");
  return a;
}

}  // namespace

int run_program_trace(const TraceOptions& options, Prepared& prepared) {
  Timeline timeline;
  OneTime one = prepare_one_time(options, prepared, timeline);
  const std::optional<CompiledProgram>& compiled = one.compiled;
  const std::vector<ColdRow>& cold = one.cold;
  measure::HarnessOptions h;
  h.warmup = options.warmup;
  h.repeat = options.repeat.value_or(0);
  h.budget_s = options.budget_s;
  h.first_op_id = 2;
  measure::HarnessResult run = measure::run_harness(one.call, h, timeline, *prepared.session);
  prepared.session->finish(timeline);

  const std::string label = compiled ? "compiled graph" : one.replay->kind();
  reports::SequenceFigures fig = reports::compute_sequence(timeline, run.timed_ids, 1, {label});
  reports::TraceReport report = graph_call_report(options, prepared, timeline, run, fig);
  report.keys = label + ", one call per timed iteration";
  double cold_total = 0;
  for (const ColdRow& r : cold) {
    report.figures.set("cold." + r.name, r.ns, "ns");
    cold_total += r.ns;
  }
  report.figures.set("cold.total", cold_total, "ns");
  std::optional<reports::CompiledAttribution> by_fused_kernel;
  if (compiled) {
    describe_compiled(report, *compiled, options);
    by_fused_kernel = attribute_trace_kernels(prepared, *compiled, timeline, run.timed_ids, report);
  } else {
    report.describe(reports::RowKind::kRuntime, "", "the replay's own loop (no binding, no dispatch)");
    report.describe(reports::RowKind::kLibrary, "", "the recorded kernel calls, in order");
    report.describe_na(reports::RowKind::kBinding,
                    "n/a: a replay calls the recorded kernels, no binding, no dispatch");
    report.figures.set("graph.kernel_calls", double(one.cost.recorded_calls), "count");
  }
  report.describe(reports::RowKind::kWall, "",
               prepared.choice.device.is_cpu() ? "first zone begin -> last library end (a forward)"
                                        : "first zone begin -> last kernel end (a forward)");

  CommandOutput output;
  output.print_table = [&](std::ostream& out) {
    reports::print_trace_table(report, out);
    print_cold_rows(cold, out);
    if (compiled) print_compiled_listing(*compiled, options.emit == "cpp", out);
    if (by_fused_kernel) print_kernel_attribution(*compiled, *by_fused_kernel, out);
  };
  output.json = [&] {
    nlohmann::json j = nlohmann::json::parse(reports::sequence_report_json(report, fig, nullptr));
    j["mode"] = options.mode;
    j["cold"] = cold_json(cold);
    if (compiled) {
      j["compiled"] = compiled_json(*compiled, options.emit == "cpp");
      if (by_fused_kernel) j["compiled"]["by_fused_kernel"] = kernel_attribution_json(*compiled, *by_fused_kernel);
    }
    return reports::json_text(j);
  };
  output.chrome_trace = [&](reports::ChromeTraceWriter& writer) {
    writer.add_metadata("op", report.spec + "  " + report.description + "  " + report.dtype + "  --mode " + options.mode);
    writer.add_metadata("device", report.device);
    reports::TraceMetadata kineto;
    kineto.gpus = prepared.session->trace_gpus();
    kineto.steps.push_back({1});  // the one-time phases, then one step per timed call
    for (uint32_t id : run.timed_ids) kineto.steps.push_back({id});
    writer.set_trace_metadata(std::move(kineto));
    writer.add_timeline(timeline, options.mode);
  };
  output.chrome_trace_hint = " (open in https://ui.perfetto.dev or chrome://tracing)";
  output.check = report.check;
  output.tolerance_name = report.dtype + " tolerance";
  return write_command_output(options, output, std::cout, std::cerr);
}

}  // namespace strata::app
