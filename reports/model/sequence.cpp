// The sequence model: the op log, per-step breakdowns, per-forward distributions and the verdict. Its
// table is sequence_table.cpp.
#include "reports/model/sequence.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string_view>
#include <unordered_map>

#include "reports/model/units.h"
#include "reports/model/figures.h"
#include "reports/model/report.h"

namespace strata::reports {
namespace {

void join(std::string& into, const std::string& what, const char* sep) {
  if (what.empty() || into.find(what) != std::string::npos) return;
  into += (into.empty() ? "" : sep) + what;
}

// Rows of all steps summed forward by forward: one breakdown for the whole forward. Rows keep the
// order of their first appearance (binding, dispatch keys as they were met, library, ...).
LayerBreakdown sum_steps(const std::vector<SequenceStepFigures>& steps, size_t forwards) {
  LayerBreakdown total;
  total.calls = forwards;
  for (const SequenceStepFigures& s : steps) {
    const LayerBreakdown& b = s.breakdown;
    total.has_device_records = total.has_device_records || b.has_device_records;
    total.unmatched_launches += b.unmatched_launches;
    total.failed_launches += b.failed_launches;
    total.unmatched_kernels += b.unmatched_kernels;
    total.unmatched_launches_in_search += b.unmatched_launches_in_search;
    for (const auto& [zone, count] : b.unmatched_launch_zones) total.unmatched_launch_zones[zone] += count;
    total.captured_launches += b.captured_launches;
    total.timestamps += b.timestamps;
    for (const KernelSummary& k : b.kernels) total.kernels.push_back(k);
    for (const BreakdownRow& r : b.rows) {
      auto it = std::find_if(total.rows.begin(), total.rows.end(),
                             [&](const BreakdownRow& t) { return t.kind == r.kind && t.key == r.key; });
      if (it == total.rows.end()) {
        BreakdownRow row;
        row.kind = r.kind;
        row.key = r.key;
        row.applicable = r.applicable;
        row.ns.samples.assign(forwards, 0);
        total.rows.push_back(row);
        it = total.rows.end() - 1;
      }
      for (const std::string& n : r.names)
        if (std::find(it->names.begin(), it->names.end(), n) == it->names.end()) it->names.push_back(n);
      for (size_t i = 0; i < forwards && i < r.ns.samples.size(); ++i) it->ns.samples[i] += r.ns.samples[i];
    }
  }
  // The rows' kind order, as compute_breakdown gives it (a step may bring a dispatch key the first lacked).
  std::stable_sort(total.rows.begin(), total.rows.end(),
                   [](const BreakdownRow& a, const BreakdownRow& b) { return a.kind < b.kind; });
  for (BreakdownRow& r : total.rows) r.ns = Distribution::of(std::move(r.ns.samples));
  return total;
}

// Step j over all forwards: its own breakdown, and its words from the first forward's spans.
SequenceStepFigures step_figures(const Timeline& timeline, std::span<const uint32_t> op_ids, size_t steps, size_t j,
                                 const std::vector<std::string>& descriptions) {
  const size_t forwards = op_ids.size() / steps;
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < forwards; ++i) ids.push_back(op_ids[i * steps + j]);
  SequenceStepFigures step;
  step.breakdown = compute_breakdown(timeline, ids);
  if (j < descriptions.size()) step.description = descriptions[j];
  for (const Span& span : timeline.spans()) {
    if (span.op_id != ids.front()) continue;
    if (span.layer == Layer::kBinding && step.op.empty()) step.op = span.name;
    if (span.layer == Layer::kDispatch) {
      join(step.keys, span.name, " > ");
      const std::string_view key = span.name;
      if (key == "CPU" || key == "CUDA") ++step.backend_calls;
    }
    if (span.layer == Layer::kLibrary) join(step.backend, span.name, " > ");
  }
  if (step.op.empty()) step.op = step.description;
  return step;
}

using Intervals = std::vector<std::pair<int64_t, int64_t>>;

// Per forward: its extent from the spans and kernels of all its steps, and its kernels' intervals.
struct ForwardExtents {
  std::vector<int64_t> first, last;
  std::vector<Intervals> kernels;
  size_t kernel_count = 0;
};

ForwardExtents forward_extents(const Timeline& timeline, std::span<const uint32_t> op_ids, size_t steps,
                               size_t forwards) {
  ForwardExtents extents{std::vector<int64_t>(forwards, INT64_MAX), std::vector<int64_t>(forwards, INT64_MIN),
                         std::vector<Intervals>(forwards), 0};
  std::unordered_map<uint32_t, size_t> forward_of;
  for (size_t k = 0; k < op_ids.size(); ++k) forward_of[op_ids[k]] = k / steps;
  for (const Span& s : timeline.spans()) {
    auto it = forward_of.find(s.op_id);
    if (it == forward_of.end()) continue;
    extents.first[it->second] = std::min(extents.first[it->second], timeline.begin_ns(s));
    extents.last[it->second] = std::max(extents.last[it->second], timeline.end_ns(s));
  }
  const DeviceTrace& dev = timeline.device;
  if (!dev.enabled) return extents;
  std::unordered_map<uint32_t, size_t> corr_forward;
  for (const ExternalCorrelation& ec : dev.external) {
    auto it = forward_of.find(static_cast<uint32_t>(ec.external_id));
    if (it != forward_of.end()) corr_forward[ec.correlation_id] = it->second;
  }
  for (const KernelRecord& kr : dev.kernels) {
    auto it = corr_forward.find(kr.correlation_id);
    if (it == corr_forward.end()) continue;
    extents.kernels[it->second].push_back({kr.start_ns, kr.end_ns});
    extents.last[it->second] = std::max(extents.last[it->second], kr.end_ns);
    ++extents.kernel_count;
  }
  return extents;
}

// The union of one forward's kernel intervals (busy) and first start -> last end (window); the gaps
// between them are the GPU waiting for the next launch.
struct KernelBusy {
  double busy = 0, window = 0;
};
KernelBusy kernel_busy(Intervals intervals) {
  if (intervals.empty()) return {};
  std::sort(intervals.begin(), intervals.end());
  double busy = 0;
  int64_t cur_start = intervals.front().first, cur_end = intervals.front().second;
  for (size_t k = 1; k < intervals.size(); ++k) {
    if (intervals[k].first > cur_end) {
      busy += double(cur_end - cur_start);
      cur_start = intervals[k].first;
    }
    cur_end = std::max(cur_end, intervals[k].second);
  }
  busy += double(cur_end - cur_start);
  return {busy, double(cur_end - intervals.front().first)};
}

// Host tax, compute, launch, GPU idle and window, and the time outside the zones, per forward, into `f`.
void add_forward_distributions(SequenceFigures& f, const ForwardExtents& extents) {
  const size_t n = f.forwards;
  std::vector<double> wall(n, 0), host(n, 0), compute(n, 0), launch(n, 0), idle(n, 0), window(n, 0);
  for (size_t i = 0; i < n; ++i) wall[i] = extents.last[i] > extents.first[i] ? double(extents.last[i] - extents.first[i]) : 0;
  for (const BreakdownRow& r : f.total.rows) {
    if (!r.applicable) continue;
    const bool host_row = r.kind == RowKind::kBinding || r.kind == RowKind::kDispatch || r.kind == RowKind::kRuntime ||
                          r.kind == RowKind::kLaunch || (f.on_gpu && r.kind == RowKind::kLibrary);
    for (size_t i = 0; i < n && i < r.ns.samples.size(); ++i) {
      if (host_row) host[i] += r.ns.samples[i];
      if (!f.on_gpu && r.kind == RowKind::kLibrary) compute[i] += r.ns.samples[i];
      if (r.kind == RowKind::kLaunch) launch[i] += r.ns.samples[i];
    }
  }
  for (size_t i = 0; i < n && f.on_gpu; ++i) {
    if (extents.kernels[i].empty()) continue;
    const KernelBusy busy = kernel_busy(extents.kernels[i]);
    compute[i] = busy.busy;
    window[i] = busy.window;
    idle[i] = busy.window - busy.busy;
  }
  std::vector<double> outside(n, 0);
  for (size_t i = 0; i < n && !f.on_gpu; ++i) outside[i] = wall[i] - host[i] - compute[i];
  f.outside = Distribution::of(std::move(outside));
  f.forward_wall = Distribution::of(std::move(wall));
  f.total.wall = f.forward_wall;
  f.host_tax = Distribution::of(std::move(host));
  f.compute = Distribution::of(std::move(compute));
  f.launch = Distribution::of(std::move(launch));
  f.kernel_idle = Distribution::of(std::move(idle));
  f.gpu_window = Distribution::of(std::move(window));
}

// The numbers behind the verdict, in one sentence.
std::string verdict_reason(const SequenceFigures& f) {
  const double w = f.forward_wall.median;
  char buf[512];
  if (f.on_gpu) {
    std::snprintf(buf, sizeof buf,
                  "kernels ran %s (%s) of the %s median wall; the GPU sat idle %s (%s) between its %.0f kernels; "
                  "launch calls took %s (%s); host tax %s (%s)",
                  format_ns(f.compute.median).c_str(), format_percent(f.compute_share).c_str(), format_ns(w).c_str(),
                  format_ns(f.kernel_idle.median).c_str(), format_percent(f.idle_share).c_str(), f.kernels_per_forward,
                  format_ns(f.launch.median).c_str(), format_percent(f.launch_share).c_str(),
                  format_ns(f.host_tax.median).c_str(), format_percent(f.host_share).c_str());
  } else {
    std::snprintf(buf, sizeof buf,
                  "compute (the library rows) %s is %s of the %s median wall; host tax (binding + dispatch%s) %s "
                  "(%s) over %zu steps",
                  format_ns(f.compute.median).c_str(), format_percent(f.compute_share).c_str(), format_ns(w).c_str(),
                  f.total.total(RowKind::kRuntime) > 0 ? " + runtime" : "", format_ns(f.host_tax.median).c_str(),
                  format_percent(f.host_share).c_str(), f.steps);
  }
  return buf;
}

}  // namespace

SequenceFigures compute_sequence(const Timeline& timeline, std::span<const uint32_t> op_ids, size_t steps,
                                 const std::vector<std::string>& descriptions) {
  SequenceFigures f;
  f.steps = steps;
  f.forwards = steps == 0 ? 0 : op_ids.size() / steps;
  if (f.forwards == 0) return f;
  for (size_t j = 0; j < steps; ++j) f.per_step.push_back(step_figures(timeline, op_ids, steps, j, descriptions));
  f.total = sum_steps(f.per_step, f.forwards);

  const ForwardExtents extents = forward_extents(timeline, op_ids, steps, f.forwards);
  f.on_gpu = extents.kernel_count > 0;
  f.kernels_per_forward = double(extents.kernel_count) / double(f.forwards);
  add_forward_distributions(f, extents);

  const double w = f.forward_wall.median;
  f.compute_share = share_of(f.compute.median, w);
  f.host_share = share_of(f.host_tax.median, w);
  f.launch_share = share_of(f.launch.median, w);
  f.idle_share = share_of(f.kernel_idle.median, w);
  // One rule on both devices: the forward is compute-bound when its compute fills at least half of its
  // wall; otherwise the rest (host tax, the GPU waiting for launches) is what a faster device cannot fix.
  f.verdict = f.compute_share >= 0.5 ? "compute-bound" : "overhead-bound";
  f.verdict_reason = verdict_reason(f);
  return f;
}

}  // namespace strata::reports
