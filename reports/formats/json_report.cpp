#include "reports/formats/json_report.h"

#include <nlohmann/json.hpp>

#include "reports/formats/figures_json.h"
#include "reports/formats/json_text.h"

namespace strata::reports {
namespace {

using nlohmann::json;

json distribution(const Distribution& d) {
  return json{{"unit", "ns"},      {"count", d.count()}, {"median", d.median}, {"p90", d.p90},
              {"min", d.min},      {"max", d.max},       {"mean", d.mean},     {"samples", d.samples}};
}

json breakdown(const LayerBreakdown& b) {
  json rows = json::array();
  for (const BreakdownRow& r : b.rows) {
    json row{{"layer", row_kind_name(r.kind)}, {"applicable", r.applicable}, {"names", r.names},
             {"below_resolution", r.below_resolution}};
    if (!r.key.empty()) row["key"] = r.key;
    if (!r.what.empty()) row["what"] = r.what;
    if (r.applicable) row["time"] = distribution(r.ns);
    if (r.instructions >= 0) row["instructions"] = json{{"unit", "instructions"}, {"median", r.instructions}};
    rows.push_back(row);
  }
  json kernels = json::array();
  for (const KernelSummary& k : b.kernels) {
    kernels.push_back({{"name", k.name},
                       {"grid", {k.grid[0], k.grid[1], k.grid[2]}},
                       {"block", {k.block[0], k.block[1], k.block[2]}},
                       {"registers_per_thread", k.registers_per_thread},
                       {"shared_bytes", k.shared_bytes},
                       {"device", k.device_id},
                       {"stream", k.stream_id},
                       {"streams", k.streams},
                       {"time", distribution(k.ns)}});
  }
  json timestamps = json::object();
  for (const TimestampCheckField& f : kTimestampCheckFields) timestamps[f.name] = b.timestamps.*f.count;
  return json{{"calls", b.calls},
              {"rows", rows},
              {"wall", distribution(b.wall)},
              {"kernels", kernels},
              {"device_records", b.has_device_records},
              {"unmatched_launches", b.unmatched_launches},
              {"failed_launches", b.failed_launches},
              {"unmatched_launch_examples", b.unmatched_launch_examples},
              {"unmatched_kernels", b.unmatched_kernels},
              {"unmatched_launches_in_search", b.unmatched_launches_in_search},
              {"unmatched_launch_zones", b.unmatched_launch_zones},
              {"captured_launches", b.captured_launches},
              {"kernel_sum", distribution(b.kernel_sum)},
              {"timestamps", timestamps}};
}

// The machine and library versions behind the figures; every report carries the same block.
json environment(const Environment& e) {
  json env{{"strata_version", e.strata_version},
           {"cpu_model", e.cpu_model},
           {"cpu_threads", e.cpu_threads},
           {"blas_config", e.blas_config},
           {"blas_threads", e.blas_threads},
           {"intra_op_threads", e.intra_op_threads},
           {"intra_op_threads_source", e.intra_op_threads_source},
           {"cpu_loops", e.cpu_loops},
           {"clock", {{"source", e.clock_source}, {"ns_per_tick", e.clock_ns_per_tick},
                      {"read_cost_ns", e.clock_read_ns}}}};
  json device = json::object();
  for (const auto& [k, v] : e.device) device[k] = v;
  env["device"] = device;
  return env;
}

json check(const CheckResult& c) {
  return json{{"relative_error", c.relative_error}, {"tolerance", c.tolerance}, {"passed", c.passed()}};
}

json backward(const BackwardReport& b) {
  json nodes = json::array();
  for (const BackwardNodeReport& n : b.nodes) nodes.push_back({{"node", n.name}, {"steady", breakdown(n.steady)}});
  json doc{{"walk", b.walk}, {"seed", breakdown(b.seed)}, {"nodes", nodes}, {"wall", distribution(b.wall)},
           {"cold_ns", b.cold_ns}};
  if (!b.checks.empty()) {
    json checks = json::array();
    for (const GradCheck& c : b.checks) {
      checks.push_back({{"argument", c.argument}, {"relative_error", c.relative_error}, {"tolerance", c.tolerance},
                        {"passed", c.passed()}});
    }
    doc["gradient_checks"] = checks;
  }
  return doc;
}

// torch's rows, in the shape of strata's (breakdown's rows), with what they do not hold beside them.
void peer_rows(const PeerReport& p, json& out) {
  json rows = json::array();
  for (const PeerReport::LayerRow& r : p.rows) {
    json row{{"layer", row_kind_name(r.kind)}, {"names", r.names}, {"time", distribution(r.ns)}};
    if (!r.key.empty()) row["key"] = r.key;
    rows.push_back(row);
  }
  out["rows"] = rows;
  if (!p.rows.empty()) {
    out["rows_measure"] = {{"probed_calls", p.layered_calls},
                           {"probes_per_call", p.probes_per_call},
                           {"probe_cost_outer_ns", p.probe_outer_ns},
                           {"probe_cost_inner_ns", p.probe_inner_ns},
                           {"untraced_wall", distribution(p.rows_wall)},
                           {"in_no_row_ns", p.in_no_row_ns()},
                           {"inseparable", p.inseparable}};
    json ops = json::object();
    for (const PeerReport::OpSelf& o : p.op_self) ops[o.name] = o.ns_per_call;
    out["rows_measure"]["op_self_ns_per_call"] = ops;
    if (p.probed_result_identical >= 0) out["rows_measure"]["probed_result_identical"] = p.probed_result_identical == 1;
  }
  if (!p.rows_note.empty()) out["rows_note"] = p.rows_note;
}

json peer(const PeerReport& p) {
  json profile = json::array();
  for (const PeerReport::ProfileRow& r : p.profile) {
    const bool unresolved = p.profile_resolution_ns > 0 && r.calls_per_call > 0 &&
                            r.self_ns_per_call / r.calls_per_call < p.profile_resolution_ns;
    profile.push_back({{"name", r.name},
                       {"below_resolution", unresolved},
                       {"kind", r.kernel ? "kernel (self device time)" : "aten op (self CPU time)"},
                       {"self_ns_per_call", r.self_ns_per_call},
                       {"calls_per_call", r.calls_per_call}});
  }
  json out{{"name", p.name},
           {"version", p.version},
           {"expression", p.expression},
           {"work", p.work},
           {"wall", distribution(p.wall)},
           {"cold_ns", p.cold_ns},
           {"setup_ns", p.setup_ns},
           {"strata_untraced_wall", distribution(p.strata_wall)},
           {"profiler", {{"source", "torch.profiler"}, {"profiled_calls", p.profiled_calls}, {"rows", profile}}}};
  if (!p.profile_note.empty()) out["profiler"]["note"] = p.profile_note;
  if (p.profile_resolution_ns > 0) out["profiler"]["resolution_ns_per_event"] = p.profile_resolution_ns;
  if (p.relative_difference >= 0) out["relative_difference_vs_strata"] = p.relative_difference;
  if (!p.difference_of.empty()) out["relative_difference_of"] = p.difference_of;
  peer_rows(p, out);
  return out;
}

}  // namespace

std::string trace_report_json(const TraceReport& rep) {
  json doc{{"op", rep.op},
           {"spec", rep.spec},
           {"description", rep.description},
           {"schema", rep.schema},
           {"dtype", rep.dtype.empty() ? json(nullptr) : json(rep.dtype)},
           {"device", rep.device},
           {"device_reason", rep.device_reason},
           {"dispatch_keys", rep.keys},
           {"frontend", rep.frontend},
           {"flops_per_call", rep.flops},
           {"warmup", rep.warmup},
           {"repeat", rep.repeat},
           {"repeat_auto", rep.repeat_auto},
           {"planned_repeat", rep.planned_repeat},
           {"seed", rep.seed ? json(*rep.seed) : json(nullptr)},
           {"probe", {{"cost_ns", rep.probe_ns}, {"zones_per_call", rep.probes_per_call}}},
           {"untraced_wall_median_ns", rep.untraced_call_ns},
           {"steady", breakdown(rep.steady)},
           {"cold", breakdown(rep.cold)},
           {"notes", rep.notes},
           {"figures", figures_json(rep.figures)},
           {"environment", environment(rep.env)}};
  if (const Figure* rate = rep.figures.find("achieved_flops_per_s")) doc["achieved_flops_per_s"] = rate->value;
  if (rep.bytes_moved > 0) {
    doc["bytes_moved_per_call"] = rep.bytes_moved;
    if (const Figure* rate = rep.figures.find("achieved_bytes_per_s")) doc["achieved_bytes_per_s"] = rate->value;
  }
  if (rep.peak_flops > 0) doc["peak"] = {{"flops_per_s", rep.peak_flops}, {"source", rep.peak_source}};
  if (rep.check.ran) doc["check"] = check(rep.check);
  if (rep.backward.ran) doc["backward"] = backward(rep.backward);
  if (!rep.frontend_what.empty()) doc["frontend_call"] = rep.frontend_what;
  if (rep.peer) doc["peer"] = peer(*rep.peer);
  return json_text(doc);
}

namespace {

json sequence(const SequenceFigures& f) {
  json log = json::array(), steps = json::array();
  for (size_t j = 0; j < f.per_step.size(); ++j) {
    const SequenceStepFigures& s = f.per_step[j];
    log.push_back({{"index", j + 1}, {"op", s.op}, {"dispatch_keys", s.keys}, {"backend", s.backend},
                   {"kernel_calls", s.backend_calls}, {"description", s.description}});
    steps.push_back({{"index", j + 1}, {"op", s.op}, {"steady", breakdown(s.breakdown)}});
  }
  json seq{{"ops_per_forward", f.steps},
           {"forwards", f.forwards},
           {"op_log", log},
           {"steps", steps},
           {"forward_wall", distribution(f.forward_wall)},
           {"host_tax", distribution(f.host_tax)},
           {"compute", distribution(f.compute)},
           {"compute_is", f.on_gpu ? "union of the forward's GPU kernels" : "library rows (CPU)"},
           {"shares_of_wall", {{"compute", f.compute_share}, {"host_tax", f.host_share}}},
           {"verdict", f.verdict},
           {"verdict_reason", f.verdict_reason},
           {"device_records", f.on_gpu}};
  if (f.on_gpu) {
    seq["launch"] = distribution(f.launch);
    seq["gpu_idle_between_kernels"] = distribution(f.kernel_idle);
    seq["gpu_window"] = distribution(f.gpu_window);
    seq["kernels_per_forward"] = f.kernels_per_forward;
    seq["shares_of_wall"]["launch"] = f.launch_share;
    seq["shares_of_wall"]["gpu_idle"] = f.idle_share;
  } else {
    seq["outside_zones"] = distribution(f.outside);
  }
  return seq;
}

}  // namespace

std::string sequence_report_json(const TraceReport& report, const SequenceFigures& f, const SequenceFigures* backward) {
  json doc = json::parse(trace_report_json(report));
  doc["sequence"] = sequence(f);
  if (backward != nullptr) doc["backward_sequence"] = sequence(*backward);
  return json_text(doc);
}

namespace {

json mode(const ModeFigures& m) {
  return json{{"label", m.label},       {"unit", "ns per op"},  {"rounds", m.rounds},     {"python_and_pybind11", m.python}, {"binding", m.binding},
              {"dispatch", m.dispatch}, {"library", m.library}, {"runtime", m.runtime},   {"launch", m.launch},
              {"queue", m.queue},       {"gpu", m.gpu},         {"gpu_idle", m.gpu_idle}, {"wall", m.wall},
              {"wall_p90", m.wall_p90}, {"device_records", m.has_device}};
}

}  // namespace

std::string comparison_json(const Comparison& c, const TraceReport& ctx) {
  json doc{{"op", ctx.op},
           {"spec", ctx.spec},
           {"description", ctx.description},
           {"dtype", ctx.dtype},
           {"device", ctx.device},
           {"device_reason", ctx.device_reason},
           {"seed", ctx.seed ? json(*ctx.seed) : json(nullptr)},
           {"ops_per_replay", c.ops_per_replay},
           {"probe_ns", c.probe_ns},
           {"eager", mode(c.eager)},
           {"replay", mode(c.replay)},
           {"one_time_ns", {{"capture", c.capture_ns}, {"instantiate", c.instantiate_ns}, {"first_replay", c.first_replay_ns}}},
           {"speedup_wall_per_op", c.speedup()},
           {"bound", c.bound()},
           {"compute_share", c.compute_share()},
           {"verdict", c.verdict()},
           {"notes", ctx.notes},
           {"figures", figures_json(ctx.figures)},
           {"environment", environment(ctx.env)}};
  if (ctx.check.ran) doc["check"] = check(ctx.check);
  if (c.peer) {
    const PeerComparison& p = *c.peer;
    doc["peer"] = {{"name", "torch"},        {"version", p.version},   {"expression", p.expression},
                   {"work", p.work},         {"unit", "ns per op"},    {"rounds", p.rounds},
                   {"eager", p.eager_ns},    {"replay_kind", p.replay_kind},
                   {"replay", p.replay_kind.empty() ? json(nullptr) : json(p.replay_ns)},
                   {"setup_ns", p.setup_ns}, {"note", p.note}};
    peer_rows(p.layered, doc["peer"]);
  }
  return json_text(doc);
}

}  // namespace strata::reports
