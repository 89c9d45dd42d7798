// The compiled column of `strata compare PROGRAM` (compiled_program.h): rounds of K compiled forwards,
// timed as compare times eager and replay rounds, and the three-way table per forward: ops called,
// kernels run, bytes through memory (from the graph), host tax, wall, and the calls that repay the
// one-time cost (as bench/compiled_bench prints it: one-time cost / saving per call).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "apps/strata/compiled_program.h"
#include "lib/host_clock.h"
#include "lib/zone.h"
#include "measure/harness.h"
#include "reports/model/units.h"

namespace strata::app {
namespace {

// Why this compare has no compiled column, or "" when it can have one.
std::string why_no_column(const Prepared& prepared) {
  if (!prepared.choice.device.is_cpu())
    return "the compiled path generates C++ for the CPU; this compare ran on " + prepared.choice.device.str();
  if (prepared.autocast) return "--autocast: the compiled path does not autocast";
  if (prepared.sequence->parameters.size() > 0 && prepared.sequence->parameters[0].requires_grad())
    return "--requires-grad: a compiled graph runs forward only, with no Autograd key";
  if (!prepared.sequence->views.empty()) {
    return "--view " + prepared.sequence->views.front().name + "=" + prepared.sequence->views.front().kind +
           ": a compiled graph takes contiguous inputs only";
  }
  return "";
}

struct Column {
  std::string label;
  double ops = 0, kernels = 0, bytes = 0, host = 0, wall = 0, one_time = 0;
  bool known_bytes = false, has_one_time = false;
};

// Calls after which the one-time cost is repaid, or -1 when the mode saves nothing per call.
double break_even(const Column& eager, const Column& mode) {
  return mode.wall < eager.wall ? std::ceil(mode.one_time / (eager.wall - mode.wall)) : -1;
}

std::vector<Column> columns(const reports::Comparison& c, const CompiledColumn& col, size_t steps,
                            size_t recorded) {
  const double s = double(steps);  // c's figures are per op; one forward is `steps` ops
  const bool graph = col.program.has_value();
  const double eager_bytes = graph ? compiler::eager_bytes_moved(col.program->graph->graph()) : 0;
  const double forwards = double(c.ops_per_replay) / s;
  std::vector<Column> out(2);
  out[0] = {"eager", s, s, eager_bytes, c.eager.host() * s, c.eager.wall * s, 0, graph, false};
  out[1] = {c.replay.label,
            s,
            recorded > 0 ? double(recorded) / forwards : s,
            eager_bytes,
            c.replay.host() * s,
            c.replay.wall * s,
            c.capture_ns + c.instantiate_ns,
            graph,
            true};
  if (graph) {
    const compiler::CompiledGraph& g = *col.program->graph;
    out.push_back({"compiled", double(g.graph().calls()), double(g.plan().kernels.size()), g.bytes_moved(),
                   col.figures.host(), col.figures.wall, g.timings().total_ns(), true, true});
  }
  return out;
}

std::string mib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f MiB", bytes / 1048576.0);
  return b;
}

}  // namespace

CompiledColumn run_compiled_column(const Prepared& prepared, int64_t k, size_t rounds, int64_t warmup,
                                   Timeline& timeline, uint32_t& next_id) {
  CompiledColumn col;
  col.unavailable = why_no_column(prepared);
  if (!col.unavailable.empty()) return col;
  col.begin = host_clock::now_ns();  // the Chrome trace's compiled group shows the compile too
  try {
    tracing::ActiveScope scope(&timeline);
    timeline.set_op(next_id++);  // the one-time phases under an op id of their own
    col.program = compile_program(*prepared.sequence);
    timeline.set_op(0);
  } catch (const compiler::CompilerUnavailableError& e) {
    col.unavailable = e.what();  // eager and replay were measured; the column says why it is empty
    return col;
  }
  const compiler::CompiledGraph& g = *col.program->graph;
  const std::vector<Tensor>& inputs = col.program->inputs;
  for (int64_t i = 0; i < warmup * k; ++i) col.out = binding::IValue(g.run(inputs)[0]);
  std::vector<double> walls;
  for (size_t r = 0; r < rounds; ++r) {
    measure::stop_if_interrupted();
    std::vector<uint32_t> ids;
    const uint64_t t0 = host_clock::ticks();
    {
      tracing::ActiveScope scope(&timeline);
      for (int64_t i = 0; i < k; ++i) {
        timeline.set_op(next_id);
        col.out = binding::IValue();  // one output alive at a time, as eager's rounds
        col.out = binding::IValue(g.run(inputs)[0]);
        ids.push_back(next_id++);
      }
      timeline.set_op(0);
    }
    walls.push_back(host_clock::elapsed_ns(t0));
    col.ids.push_back(std::move(ids));
  }
  col.end = host_clock::now_ns();
  col.figures = reports::mode_figures("compiled", timeline, col.ids, walls, k);
  return col;
}

void print_three_way(const reports::Comparison& c, const CompiledColumn& col, size_t steps, size_t recorded,
                     std::ostream& out) {
  const std::vector<Column> cols = columns(c, col, steps, recorded);
  out << reports::pad("per forward", 22);
  for (const Column& m : cols) out << reports::lpad(m.label, 16);
  out << "\n";
  auto row = [&](const char* name, auto cell) {
    out << reports::pad(name, 22);
    for (const Column& m : cols) out << reports::lpad(cell(m), 16);
    out << "\n";
  };
  auto count = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f", v);
    return std::string(b);
  };
  row("ops called", [&](const Column& m) { return count(m.ops); });
  row("kernels run", [&](const Column& m) { return count(m.kernels); });
  row("bytes through memory",
      [&](const Column& m) { return m.known_bytes ? mib(m.bytes) : std::string("-"); });
  row("host tax", [&](const Column& m) { return reports::format_ns(m.host); });
  row("wall", [&](const Column& m) { return reports::format_ns(m.wall); });
  row("one-time cost",
      [&](const Column& m) { return m.has_one_time ? reports::format_ns(m.one_time) : std::string("-"); });
  row("break-even (calls)", [&](const Column& m) {
    if (!m.has_one_time) return std::string("-");
    const double n = break_even(cols[0], m);
    return n < 0 ? std::string("never") : count(n);
  });
  if (!col.unavailable.empty()) {
    out << "note: no compiled column: " << col.unavailable << "\n";
    return;
  }
  const compiler::CompileTimings& t = col.program->graph->timings();
  out << "compiled one-time: capture " << reports::format_ns(t.capture_ns) << ", fusion "
      << reports::format_ns(t.fusion_ns) << ", codegen " << reports::format_ns(t.codegen_ns) << ", compile "
      << reports::format_ns(t.compile_ns)
      << (t.cache_misses == 0 ? " (every kernel a cache hit)" : " (the compiler ran)") << ", load "
      << reports::format_ns(t.load_ns) << "\n"
      << col.program->graph->plan().str(col.program->graph->graph());
}

nlohmann::json three_way_json(const reports::Comparison& c, const CompiledColumn& col, size_t steps,
                              size_t recorded) {
  const std::vector<Column> cols = columns(c, col, steps, recorded);
  nlohmann::json j = nlohmann::json::object();
  const char* keys[] = {"eager", "graph", "compiled"};
  for (size_t i = 0; i < cols.size(); ++i) {
    const Column& m = cols[i];
    nlohmann::json e = {{"label", m.label},
                        {"ops_called", m.ops},
                        {"kernels_run", m.kernels},
                        {"host_tax_ns", m.host},
                        {"wall_ns", m.wall}};
    e["bytes_moved"] = m.known_bytes ? nlohmann::json(m.bytes) : nlohmann::json(nullptr);
    if (m.has_one_time) {
      e["one_time_ns"] = m.one_time;
      const double n = break_even(cols[0], m);
      e["break_even_calls"] = n < 0 ? nlohmann::json(nullptr) : nlohmann::json(n);
    }
    j[keys[i]] = e;
  }
  if (!col.unavailable.empty()) {
    j["compiled"] = nullptr;
    j["compiled_unavailable"] = col.unavailable;
  } else {
    j["compiled_detail"] = compiled_json(*col.program, false);
  }
  return j;
}

}  // namespace strata::app
