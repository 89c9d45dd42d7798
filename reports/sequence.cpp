#include "reports/sequence.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string_view>
#include <unordered_map>

#include "reports/report.h"

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

double median_ratio(double part, double whole) { return whole > 0 ? part / whole : 0; }


}  // namespace

SequenceFigures compute_sequence(const Timeline& timeline, std::span<const uint32_t> op_ids, size_t steps,
                                 const std::vector<std::string>& descriptions) {
  SequenceFigures f;
  f.steps = steps;
  f.forwards = steps == 0 ? 0 : op_ids.size() / steps;
  if (f.forwards == 0) return f;
  const size_t n = f.forwards;

  // Each step over all forwards: its own breakdown, and its words from the first forward's spans.
  for (size_t j = 0; j < steps; ++j) {
    std::vector<uint32_t> ids;
    for (size_t i = 0; i < n; ++i) ids.push_back(op_ids[i * steps + j]);
    SequenceStepFigures s;
    s.breakdown = compute_breakdown(timeline, ids);
    if (j < descriptions.size()) s.description = descriptions[j];
    for (const Span& span : timeline.spans()) {
      if (span.op_id != ids.front()) continue;
      if (span.layer == Layer::kBinding && s.op.empty()) s.op = span.name;
      if (span.layer == Layer::kDispatch) {
        join(s.keys, span.name, " > ");
        const std::string_view key = span.name;
        if (key == "CPU" || key == "CUDA") ++s.backend_calls;
      }
      if (span.layer == Layer::kLibrary) join(s.backend, span.name, " > ");
    }
    if (s.op.empty()) s.op = s.description;
    f.per_step.push_back(std::move(s));
  }
  f.total = sum_steps(f.per_step, n);

  // Per forward: its wall from the spans and kernels of all its steps, and its kernels' intervals.
  std::unordered_map<uint32_t, size_t> forward_of;
  for (size_t k = 0; k < op_ids.size(); ++k) forward_of[op_ids[k]] = k / steps;
  std::vector<int64_t> first(n, INT64_MAX), last(n, INT64_MIN);
  for (const Span& s : timeline.spans()) {
    auto it = forward_of.find(s.op_id);
    if (it == forward_of.end()) continue;
    first[it->second] = std::min(first[it->second], timeline.begin_ns(s));
    last[it->second] = std::max(last[it->second], timeline.end_ns(s));
  }
  std::vector<std::vector<std::pair<int64_t, int64_t>>> kernels(n);
  const DeviceTrace& dev = timeline.device;
  if (dev.enabled) {
    std::unordered_map<uint32_t, size_t> corr_forward;
    for (const ExternalCorrelation& ec : dev.external) {
      auto it = forward_of.find(static_cast<uint32_t>(ec.external_id));
      if (it != forward_of.end()) corr_forward[ec.correlation_id] = it->second;
    }
    for (const KernelRecord& kr : dev.kernels) {
      auto it = corr_forward.find(kr.correlation_id);
      if (it == corr_forward.end()) continue;
      kernels[it->second].push_back({kr.start_ns, kr.end_ns});
      last[it->second] = std::max(last[it->second], kr.end_ns);
    }
  }
  size_t kernel_count = 0;
  for (const auto& k : kernels) kernel_count += k.size();
  f.on_gpu = kernel_count > 0;
  f.kernels_per_forward = double(kernel_count) / double(n);

  std::vector<double> wall(n, 0), host(n, 0), compute(n, 0), launch(n, 0), idle(n, 0), window(n, 0);
  for (size_t i = 0; i < n; ++i) wall[i] = last[i] > first[i] ? double(last[i] - first[i]) : 0;
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
  if (f.on_gpu) {
    for (size_t i = 0; i < n; ++i) {
      auto& iv = kernels[i];
      if (iv.empty()) continue;
      std::sort(iv.begin(), iv.end());
      // Union of the intervals, and the gaps between them: the GPU waiting for the next launch.
      double busy = 0;
      int64_t cur_start = iv.front().first, cur_end = iv.front().second;
      for (size_t k = 1; k < iv.size(); ++k) {
        if (iv[k].first > cur_end) {
          busy += double(cur_end - cur_start);
          cur_start = iv[k].first;
        }
        cur_end = std::max(cur_end, iv[k].second);
      }
      busy += double(cur_end - cur_start);
      compute[i] = busy;
      window[i] = double(cur_end - iv.front().first);
      idle[i] = window[i] - busy;
    }
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

  const double w = f.forward_wall.median;
  f.compute_share = median_ratio(f.compute.median, w);
  f.host_share = median_ratio(f.host_tax.median, w);
  f.launch_share = median_ratio(f.launch.median, w);
  f.idle_share = median_ratio(f.kernel_idle.median, w);
  // One rule on both devices: the forward is compute-bound when its compute fills at least half of its
  // wall; otherwise the rest (host tax, the GPU waiting for launches) is what a faster device cannot fix.
  f.verdict = f.compute_share >= 0.5 ? "compute-bound" : "overhead-bound";
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
  f.verdict_reason = buf;
  return f;
}

void print_sequence_table(const SequenceFigures& f, std::ostream& out, const std::string& what) {
  size_t name_width = 11;
  for (const SequenceStepFigures& s : f.per_step) name_width = std::max(name_width, s.op.size() + 2);
  size_t calls = 0;
  for (const SequenceStepFigures& s : f.per_step) calls += s.backend_calls;
  if (what == "forward") {
    out << "op log (one forward, " << f.steps << " ops, as dispatched):\n";
  } else {
    out << "op log (one " << what << ", " << f.steps << " steps, " << calls << " kernel calls, as dispatched):\n";
  }
  for (size_t j = 0; j < f.per_step.size(); ++j) {
    const SequenceStepFigures& s = f.per_step[j];
    char num[32];
    std::snprintf(num, sizeof num, "%4zu  ", j + 1);
    if (what == "forward") {
      out << num << pad(s.op, 8) << pad(s.description, 30) << pad(s.keys, 20) << s.backend << "\n";
    } else {
      out << num << pad(s.op, name_width) << pad(std::to_string(s.backend_calls) + (s.backend_calls == 1 ? " call" : " calls"), 10) << pad(s.keys, 28) << s.backend
          << "\n";
    }
  }
  // One line per step: the medians of its rows (host rows summed: dispatch is every key).
  const bool gpu = f.on_gpu;
  out << pad("per " + std::string(what == "forward" ? "op" : "step") + " (median)", name_width + 6) << lpad("binding", 10) << lpad("dispatch", 10) << lpad("library", 11);
  if (gpu) out << lpad("launch", 10) << lpad("queue", 10) << lpad("gpu", 10);
  out << lpad("wall", 11) << "\n";
  auto median_of = [](const LayerBreakdown& b, RowKind kind) {
    std::vector<double> sum(b.calls, 0);
    for (const BreakdownRow& r : b.rows)
      if (r.kind == kind && r.applicable)
        for (size_t i = 0; i < sum.size() && i < r.ns.samples.size(); ++i) sum[i] += r.ns.samples[i];
    return Distribution::of(std::move(sum)).median;
  };
  // Marked as in the breakdown table: a median under twice one probe's cost is below what the timers resolve.
  // A layer the step never entered (a backward node has no binding) is "-", not a measured zero.
  auto cell = [&](double ns, size_t width, bool entered = true) {
    return lpad(entered ? format_ns(ns) + (ns < 2 * f.probe_ns ? "*" : "") : "-", width);
  };
  auto entered = [](const LayerBreakdown& b, RowKind kind) {
    for (const BreakdownRow& r : b.rows)
      if (r.kind == kind && r.applicable && (!r.names.empty() || r.kind == RowKind::kDispatch)) return true;
    return false;
  };
  for (size_t j = 0; j < f.per_step.size(); ++j) {
    const LayerBreakdown& b = f.per_step[j].breakdown;
    char num[32];
    std::snprintf(num, sizeof num, "%4zu  ", j + 1);
    out << num << pad(f.per_step[j].op, name_width) << cell(median_of(b, RowKind::kBinding), 10, entered(b, RowKind::kBinding))
        << cell(median_of(b, RowKind::kDispatch), 10) << cell(median_of(b, RowKind::kLibrary), 11, entered(b, RowKind::kLibrary));
    if (gpu) {
      out << cell(median_of(b, RowKind::kLaunch), 10) << lpad(format_ns(median_of(b, RowKind::kQueue)), 10)
          << lpad(format_ns(median_of(b, RowKind::kGpu)), 10);
    }
    out << lpad(format_ns(b.wall.median), 11) << "\n";
  }
  out << what << ": " << format_ns(f.forward_wall.median) << " median wall (p90 " << format_ns(f.forward_wall.p90)
      << ") = host tax " << format_ns(f.host_tax.median) << " + compute " << format_ns(f.compute.median);
  if (gpu) {
    out << " (kernels, overlapping the host); GPU idle between kernels " << format_ns(f.kernel_idle.median);
  } else {
    out << " + outside the zones " << format_ns(f.outside.median) << " (all medians)";
  }
  out << "\n";
  out << what << " profile: " << f.verdict << ": " << f.verdict_reason << "\n";
}

}  // namespace strata::reports
