// The compiled column of `strata compare PROGRAM` (compiled_program.h): rounds of K compiled forwards,
// timed as compare times eager and replay rounds, and the three-way table per forward: ops called,
// kernels run, bytes through memory (from the graph), host tax, wall, and the calls that repay the
// one-time cost (as bench/compiled_bench prints it: one-time cost / saving per call). On a GPU the compiled
// forwards are captured into a CUDA Graph and replayed (Note [The compiled column on a GPU]).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "apps/strata/compiled_program.h"
#include "apps/strata/replay_rounds.h"
#include "lib/host_clock.h"
#include "lib/zone.h"
#include "measure/harness.h"
#include "reports/model/units.h"

namespace strata::app {
namespace {

// Why this compare has no compiled column, or "" when it can have one.
std::string why_no_column(const Prepared& prepared) {
  if (!prepared.choice.device.is_cpu() && !prepared.choice.device.is_cuda())
    return "the compiled path generates kernels for the CPU and CUDA GPUs; this compare ran on " +
           prepared.choice.device.str();
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
    // On a GPU the compiled forwards are replayed from a CUDA Graph, whose capture is a one-time cost too.
    out.push_back({col.replay_kind.empty() ? "compiled" : "compiled+graph", double(g.graph().calls()),
                   double(g.plan().kernels.size()), g.bytes_moved(), col.figures.host(), col.figures.wall,
                   g.timings().total_ns() + col.capture.capture_ns + col.capture.instantiate_ns, true, true});
  }
  return out;
}

std::string mib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f MiB", bytes / 1048576.0);
  return b;
}

// Note [The compiled column on a GPU]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On a GPU the compiled graph's kernels (NVRTC's PTX launched with cuLaunchKernel, cuBLASLt's epilogue
// GEMMs, cuBLAS for the rest; Note [Generated kernels on the GPU]) all go on strata's stream, the one a
// CUDA Graph captures, and nothing in a compiled run synchronises or loads a module: the PTX is loaded and
// cuBLASLt's plans made at compile time. So the column is what the graph column is for eager: K compiled
// forwards captured once through the session (each under an op id of its own, which CUPTI's resource
// callbacks give every node it created, and each fused kernel of it under a step tag, which they give the
// node too), then replayed a round at a time with the graph column's own loop (time_replays). Every
// replayed kernel then maps back to the compiled forward that created it and to the fused kernel of that
// forward that launched it (attribute_compiled_replay; Note [Compiled kernels attributed to their group]).
// The capture and instantiation join the one-time cost.
void run_captured_rounds(const Prepared& prepared, int64_t k, size_t rounds, int64_t warmup, Timeline& timeline,
                         uint32_t& next_id, CompiledColumn& col) {
  measure::DeviceSession& session = *prepared.session;
  const compiler::CompiledGraph& g = *col.program->graph;
  const std::vector<Tensor>& inputs = col.program->inputs;
  for (int64_t i = 0; i < k; ++i) col.capture_ids.push_back(next_id++);
  StepTagger tagger(session, g.plan().kernels.size());
  std::unique_ptr<measure::Replay> replay;
  {
    tracing::ActiveScope scope(&timeline);
    replay = session.capture(
        [&] {
          binding::IValue out(g.run(inputs, &tagger)[0]);
          ++tagger.forward;  // the session calls this once per capture id, in order
          return out;
        },
        col.capture_ids, col.capture);
  }
  col.replay_kind = replay->kind();
  // At least one untimed replay: the first launch of an executable graph uploads it.
  ReplayRounds timed = time_replays(*replay, session, timeline, next_id, static_cast<int64_t>(rounds),
                                    std::max<int64_t>(warmup, 1));
  col.ids = std::move(timed.ids);
  col.out = replay->last_result();
  col.end = host_clock::now_ns();
  col.figures = reports::mode_figures("compiled", timeline, col.ids, timed.walls, k);
}

// On the CPU the compiled forwards run as they are, K a round: there is no graph to capture them into
// that would skip more than the compiled graph already skips.
void run_direct_rounds(int64_t k, size_t rounds, int64_t warmup, Timeline& timeline, uint32_t& next_id,
                       CompiledColumn& col) {
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
  } catch (const UnavailableError& e) {  // no C++ compiler; on a GPU, no PTX module (NVRTC) either
    col.unavailable = e.what();  // eager and replay were measured; the column says why it is empty
    return col;
  }
  if (prepared.choice.device.is_cuda()) {
    // One eager run first: what a compiled run allocates is then in the caching allocator's hands, as
    // eager's first round is before the graph column's capture.
    col.out = binding::IValue(col.program->graph->run(col.program->inputs)[0]);
    prepared.session->synchronize();
    run_captured_rounds(prepared, k, rounds, warmup, timeline, next_id, col);
  } else {
    run_direct_rounds(k, rounds, warmup, timeline, next_id, col);
  }
  return col;
}

void attribute_compiled_replay(CompiledColumn& col, const DeviceTrace& device, reports::GraphAttribution& attribution) {
  if (col.capture_ids.empty()) return;
  const std::set<uint32_t> captured(col.capture_ids.begin(), col.capture_ids.end());
  std::set<uint64_t> by_capture_info;  // nodes attributed through the fallback, as attribute_graph_kernels counts them
  std::set<uint64_t> seen;
  for (const GraphNodeOrigin& n : device.graph_nodes) {
    if (seen.insert(n.graph_node_id).second && n.source == GraphNodeSource::kCaptureInfo) {
      by_capture_info.insert(n.graph_node_id);
    }
  }
  std::vector<size_t> compiled_kernels;
  for (size_t i = 0; i < device.kernels.size() && i < attribution.op_of_kernel.size(); ++i) {
    const KernelRecord& kernel = device.kernels[i];
    if (kernel.graph_node_id == 0) continue;
    const uint32_t op = attribution.op_of_kernel[i];
    // Unattributed kernels are the compiled graph's when they ran in its window (the eager graph's rounds
    // all ended before the compiled column began).
    const bool compiled = op != 0 ? captured.count(op) > 0 : kernel.start_ns >= col.begin;
    if (!compiled) continue;
    compiled_kernels.push_back(i);
    ++col.replayed_kernels;
    --attribution.replayed_kernels;
    if (op != 0) {
      ++col.attributed_kernels;
      --attribution.attributed;
      if (by_capture_info.count(kernel.graph_node_id) > 0) --attribution.attributed_by_capture_info;
    }
  }
  // Without CUPTI's records (GPU timing off) there is nothing to attribute, and zeros would read as a result.
  if (!device.enabled) return;
  col.groups = reports::attribute_compiled_kernels(device, compiled_kernels, col.program->graph->plan().kernels.size(),
                                                   col.capture_ids.size());
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
  if (!col.replay_kind.empty()) {
    out << "compiled replay: " << col.replay_kind << " of " << col.capture_ids.size() << " compiled forwards, capture "
        << reports::format_ns(col.capture.capture_ns) << ", instantiate " << reports::format_ns(col.capture.instantiate_ns)
        << "; " << col.attributed_kernels << " of " << col.replayed_kernels
        << " replayed kernels attributed to the compiled forward that captured them\n";
  }
  if (col.groups) print_kernel_attribution(*col.program, *col.groups, out);
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
    j["compiled_replay"] = nullptr;
    if (!col.replay_kind.empty()) {
      j["compiled_replay"] = {{"kind", col.replay_kind},
                              {"forwards_captured", col.capture_ids.size()},
                              {"capture_ns", col.capture.capture_ns},
                              {"instantiate_ns", col.capture.instantiate_ns},
                              {"replayed_kernels", col.replayed_kernels},
                              {"attributed_kernels", col.attributed_kernels},
                              {"by_fused_kernel", col.groups ? kernel_attribution_json(*col.program, *col.groups)
                                                             : nlohmann::json(nullptr)}};
    }
  }
  return j;
}

}  // namespace strata::app
