// A program through the compiled path: capture, compile, and how a trace reports it (compiled_program.h).
#include "apps/strata/compiled_program.h"

#include "layers/kernels/reference/reference.h"
#include "lib/zone.h"

namespace strata::app {

CompiledProgram compile_program(frontend::Sequence& sequence) {
  CompiledProgram p;
  p.inputs = {sequence.input};
  const compiler::Function fn = [&](const std::vector<Tensor>&) {
    // The forward's steps hold the input itself (step 0's argument), which capture sees as input 0.
    return std::vector<Tensor>{sequence.forward().tensor()};
  };
  {
    STRATA_ZONE(zone, Layer::kFrontend, "capture (one eager forward, recorded)");
    p.captured = compiler::capture(fn, p.inputs);
  }
  STRATA_ZONE(zone, Layer::kFrontend, "compile (fusion, codegen, compiler, load)");
  p.graph = compiler::compile(p.captured);
  return p;
}

void describe_compiled(reports::TraceReport& rep, const CompiledProgram& p, const TraceOptions& o) {
  const compiler::CompiledGraph& g = *p.graph;
  const size_t kernels = g.plan().kernels.size();
  using reports::RowKind;
  rep.describe(RowKind::kBinding, "",
               "guards: " + std::to_string(p.inputs.size()) + " input(s) against what was compiled");
  for (const reports::BreakdownRow& row : rep.steady.rows) {
    if (row.kind == RowKind::kDispatch) {
      rep.describe(RowKind::kDispatch, row.key,
                   row.key + ": key set + table lookup per fused kernel (" + std::to_string(kernels) + ")");
    }
  }
  std::string lib;
  for (const reports::BreakdownRow& row : rep.steady.rows)
    if (row.kind == RowKind::kLibrary)
      for (const std::string& n : row.names) lib += (lib.empty() ? "" : " + ") + n;
  rep.describe(RowKind::kLibrary, "", lib + ", output allocs");
  const compiler::CompileTimings& t = g.timings();
  rep.figures.set("compiled.ops_called", double(g.graph().calls()), "count");
  rep.figures.set("compiled.kernels_run", double(kernels), "count");
  rep.figures.set("compiled.bytes_moved", g.bytes_moved(), "bytes");
  rep.figures.set("compiled.eager_bytes_moved", compiler::eager_bytes_moved(g.graph()), "bytes");
  rep.figures.set("compiled.cache_hits", double(t.cache_hits), "count");
  rep.figures.set("compiled.cache_misses", double(t.cache_misses), "count");
  rep.notes.push_back("compiled: " + std::to_string(g.graph().calls()) + " ops in " +
                      std::to_string(kernels) + " kernel" + (kernels == 1 ? "" : "s") + "; kernel cache " +
                      t.cache_dir + " (" + std::to_string(t.cache_hits) + " hit" +
                      (t.cache_hits == 1 ? "" : "s") + ", " + std::to_string(t.cache_misses) + " compiled)" +
                      (t.cache_note.empty() ? "" : "; " + t.cache_note));
  if (!o.check) return;
  // The compiled result must be eager's to rounding: against the eager output capture produced as well.
  const Tensor out = g.run(p.inputs)[0];
  const double vs_eager = reference::relative_error(out, reference::to_double(p.captured.eager_outputs[0]));
  rep.figures.set("check.compiled_vs_eager_relative_error", vs_eager, "ratio");
  if (vs_eager > rep.check.tolerance && rep.check.passed()) rep.check.relative_error = vs_eager;
  char text[160];
  std::snprintf(text, sizeof text,
                "check: compiled vs float64 reference %.2e, compiled vs eager %.2e (tolerance %.0e)",
                rep.check.relative_error, vs_eager, rep.check.tolerance);
  rep.notes.push_back(text);
}

void print_compiled_listing(const CompiledProgram& p, bool emit, std::ostream& out) {
  out << "captured " << p.captured.graph.str() << p.graph->plan().str(p.graph->graph());
  if (emit) out << "generated source (--emit cpp):\n" << p.graph->emit_cpp();
}

nlohmann::json compiled_json(const CompiledProgram& p, bool emit) {
  const compiler::CompiledGraph& g = *p.graph;
  const compiler::CompileTimings& t = g.timings();
  nlohmann::json kernels = nlohmann::json::array();
  for (const compiler::FusedKernel& k : g.plan().kernels) {
    nlohmann::json ops = nlohmann::json::array();
    for (size_t n : k.nodes) ops.push_back(g.graph().nodes[n].op);
    nlohmann::json j = {{"name", k.name}, {"kind", compiler::kernel_kind_name(k.kind)}, {"ops", ops}};
    for (const compiler::KernelBuild& b : g.builds()) {
      if (b.name != k.name) continue;
      j["cache_hit"] = b.cache_hit;
      j["codegen_ns"] = b.codegen_ns;
      j["compile_ns"] = b.compile_ns;
      j["load_ns"] = b.load_ns;
      j["cache_key"] = b.key;
      j["library"] = b.library_path;
    }
    kernels.push_back(j);
  }
  nlohmann::json j = {{"graph", g.graph().str()},
                      {"plan", g.plan().str(g.graph())},
                      {"ops_called", g.graph().calls()},
                      {"kernels_run", g.plan().kernels.size()},
                      {"bytes_moved", g.bytes_moved()},
                      {"eager_bytes_moved", compiler::eager_bytes_moved(g.graph())},
                      {"kernels", kernels},
                      {"cold_ns",
                       {{"capture", t.capture_ns},
                        {"fusion", t.fusion_ns},
                        {"codegen", t.codegen_ns},
                        {"compile", t.compile_ns},
                        {"load", t.load_ns},
                        {"total", t.total_ns()}}},
                      {"cache",
                       {{"dir", t.cache_dir},
                        {"note", t.cache_note},
                        {"hits", t.cache_hits},
                        {"misses", t.cache_misses},
                        {"compiler", t.compiler}}}};
  if (emit) j["source"] = g.emit_cpp();
  return j;
}

}  // namespace strata::app
