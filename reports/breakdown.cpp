#include "reports/breakdown.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <unordered_map>

#include "reports/report.h"

namespace strata::reports {

double median_of(std::vector<double> samples) { return Distribution::of(std::move(samples)).median; }

Distribution Distribution::of(std::vector<double> samples) {
  Distribution d;
  d.samples = std::move(samples);
  if (d.samples.empty()) return d;
  std::vector<double> sorted = d.samples;
  std::sort(sorted.begin(), sorted.end());
  // Nearest-rank percentiles: every reported figure is one that was actually measured.
  auto rank = [&](double q) {
    size_t i = static_cast<size_t>(std::ceil(q * double(sorted.size())));
    return sorted[std::min(sorted.size() - 1, i == 0 ? 0 : i - 1)];
  };
  d.median = rank(0.5);
  d.p90 = rank(0.9);
  d.min = sorted.front();
  d.max = sorted.back();
  double sum = 0;
  for (double x : sorted) sum += x;
  d.mean = sum / double(sorted.size());
  return d;
}

const char* row_kind_name(RowKind kind) {
  switch (kind) {
    case RowKind::kPython: return "python";
    case RowKind::kPybind11: return "pybind11";
    case RowKind::kBinding: return "binding";
    case RowKind::kDispatch: return "dispatch";
    case RowKind::kLibrary: return "library";
    case RowKind::kRuntime: return "runtime";
    case RowKind::kLaunch: return "launch";
    case RowKind::kQueue: return "queue";
    case RowKind::kGpu: return "gpu";
    case RowKind::kWall: return "wall";
  }
  return "?";
}

std::string BreakdownRow::id() const { return std::string(row_kind_name(kind)) + (key.empty() ? "" : "/" + key); }

double BreakdownRow::total() const {
  double sum = 0;
  for (double x : ns.samples) sum += x;
  return sum;
}

double LayerBreakdown::total(RowKind kind) const {
  double sum = 0;
  for (const BreakdownRow& r : rows)
    if (r.kind == kind) sum += r.total();
  return sum;
}

void LayerBreakdown::describe(RowKind kind, const std::string& key, const std::string& what) {
  if (kind == RowKind::kWall) {
    wall_what = what;
    return;
  }
  for (BreakdownRow& r : rows)
    if (r.kind == kind && r.key == key) r.what = what;
}

void LayerBreakdown::describe_na(RowKind kind, const std::string& na_reason) {
  for (BreakdownRow& r : rows)
    if (r.kind == kind) r.na_reason = na_reason;
}

std::vector<double> span_self_ns(const Timeline& timeline) {
  const auto& spans = timeline.spans();
  std::vector<double> self(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    self[i] = double(timeline.end_ns(spans[i]) - timeline.begin_ns(spans[i]));
  }
  for (size_t i = 0; i < spans.size(); ++i) {
    if (spans[i].parent >= 0) {
      self[static_cast<size_t>(spans[i].parent)] -= double(timeline.end_ns(spans[i]) - timeline.begin_ns(spans[i]));
    }
  }
  return self;
}

namespace {

void add_name(std::vector<std::string>& names, const std::string& name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
}

// Length of the union of [start, end) intervals.
double union_ns(std::vector<std::pair<int64_t, int64_t>>& intervals) {
  std::sort(intervals.begin(), intervals.end());
  double total = 0;
  int64_t cur_start = 0, cur_end = INT64_MIN;
  for (auto [s, e] : intervals) {
    if (s > cur_end) {
      if (cur_end != INT64_MIN) total += double(cur_end - cur_start);
      cur_start = s;
      cur_end = e;
    } else {
      cur_end = std::max(cur_end, e);
    }
  }
  if (cur_end != INT64_MIN) total += double(cur_end - cur_start);
  return total;
}

}  // namespace

TimestampChecks& TimestampChecks::operator+=(const TimestampChecks& other) {
  for (const TimestampCheckField& f : kTimestampCheckFields) this->*f.count += other.*f.count;
  return *this;
}

LayerBreakdown compute_breakdown(const Timeline& timeline, std::span<const uint32_t> op_ids) {
  LayerBreakdown out;
  out.calls = op_ids.size();
  const auto& spans = timeline.spans();
  const std::vector<double> self = span_self_ns(timeline);
  const DeviceTrace& dev = timeline.device;
  out.has_device_records = dev.enabled;

  std::unordered_map<uint32_t, size_t> slot;  // op id -> position in op_ids
  for (size_t i = 0; i < op_ids.size(); ++i) slot[op_ids[i]] = i;
  const size_t n = op_ids.size();

  // Host rows. Dispatch keys are discovered from span names, highest-priority first as they nest.
  std::vector<double> python(n, 0), pybind11(n, 0), binding(n, 0), library(n, 0), runtime(n, 0), launch(n, 0), queue(n, 0), gpu(n, 0);
  std::vector<int64_t> first_begin(n, INT64_MAX), last_end(n, INT64_MIN);
  std::vector<std::vector<size_t>> op_spans(n);  // span indices of each op
  std::vector<std::string> dispatch_keys;
  std::map<std::string, std::vector<double>> dispatch;
  BreakdownRow python_row{RowKind::kPython, "", {}, {}, true, {}, {}},
      pybind11_row{RowKind::kPybind11, "", {}, {}, true, {}, {}};
  BreakdownRow binding_row{RowKind::kBinding, "", {}, {}, true, {}, {}}, library_row{RowKind::kLibrary, "", {}, {}, true, {}, {}},
      runtime_row{RowKind::kRuntime, "", {}, {}, true, {}, {}};
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    auto it = slot.find(s.op_id);
    if (it == slot.end()) continue;
    const size_t k = it->second;
    op_spans[k].push_back(i);
    first_begin[k] = std::min(first_begin[k], timeline.begin_ns(s));
    last_end[k] = std::max(last_end[k], timeline.end_ns(s));
    switch (s.layer) {
      case Layer::kPython:
        python[k] += self[i];
        add_name(python_row.names, s.name);
        break;
      case Layer::kPybind11:
        pybind11[k] += self[i];
        add_name(pybind11_row.names, s.name);
        break;
      case Layer::kBinding:
        binding[k] += self[i];
        add_name(binding_row.names, s.name);
        break;
      case Layer::kDispatch: {
        auto& v = dispatch[s.name];
        if (v.empty()) {
          v.assign(n, 0);
          dispatch_keys.push_back(s.name);
        }
        v[k] += self[i];
        break;
      }
      case Layer::kLibrary:
        library[k] += self[i];
        add_name(library_row.names, s.name);
        break;
      case Layer::kRuntime:
        runtime[k] += self[i];
        add_name(runtime_row.names, s.name);
        break;
      default:
        break;  // frontend and harness spans are not part of an op's per-call cost
    }
  }

  // Device rows: API calls and kernels joined to ops through the external correlation records.
  BreakdownRow launch_row{RowKind::kLaunch, "", {}, {}, dev.enabled, {}, {}}, queue_row{RowKind::kQueue, "", {}, {}, dev.enabled, {}, {}},
      gpu_row{RowKind::kGpu, "", {}, {}, dev.enabled, {}, {}};
  if (dev.enabled) {
    std::unordered_map<uint32_t, size_t> corr_to_op;  // correlation id -> slot
    for (const ExternalCorrelation& ec : dev.external) {
      auto it = slot.find(static_cast<uint32_t>(ec.external_id));
      if (it != slot.end()) corr_to_op[ec.correlation_id] = it->second;
    }
    std::unordered_map<uint32_t, const ApiCallRecord*> launch_by_corr;
    for (const ApiCallRecord& api : dev.api_calls) {
      auto it = corr_to_op.find(api.correlation_id);
      if (it == corr_to_op.end() || !api.is_launch) continue;
      const size_t k = it->second;
      const double dur = double(api.end_ns - api.start_ns);
      launch[k] += dur;
      // The launch call ran inside some host zone on the same clock (a library call, or the runtime's
      // graph/plan launch): that time is launch, not the enclosing zone's. Find the innermost zone.
      const Span* inner = nullptr;
      for (size_t si : op_spans[k]) {
        const Span& s = spans[si];
        if (timeline.begin_ns(s) <= api.start_ns && api.end_ns <= timeline.end_ns(s) &&
            (inner == nullptr || timeline.end_ns(s) - timeline.begin_ns(s) < timeline.end_ns(*inner) - timeline.begin_ns(*inner)))
          inner = &s;
      }
      if (inner == nullptr) {
        ++out.timestamps.launches_outside_zones;  // on one clock, every launch runs inside a zone of its op
      } else {
        if (inner->layer == Layer::kLibrary) library[k] -= dur;
        else if (inner->layer == Layer::kRuntime) runtime[k] -= dur;
        else if (inner->layer == Layer::kBinding) binding[k] -= dur;
        else if (inner->layer == Layer::kDispatch) dispatch[inner->name][k] -= dur;
      }
      launch_by_corr[api.correlation_id] = &api;
      add_name(launch_row.names, api.name);
    }
    std::vector<std::vector<std::pair<int64_t, int64_t>>> intervals(n);
    std::vector<int64_t> first_kernel(n, INT64_MAX), first_kernel_launch(n, 0);
    std::map<std::string, size_t> kernel_index;
    std::vector<std::vector<double>> kernel_samples;
    std::unordered_map<uint32_t, bool> corr_has_kernel;
    for (const KernelRecord& kr : dev.kernels) {
      auto it = corr_to_op.find(kr.correlation_id);
      if (it == corr_to_op.end()) continue;
      auto lit = launch_by_corr.find(kr.correlation_id);
      if (lit == launch_by_corr.end()) {
        ++out.unmatched_kernels;
        continue;
      }
      corr_has_kernel[kr.correlation_id] = true;
      const size_t k = it->second;
      if (kr.start_ns < lit->second->start_ns) ++out.timestamps.kernels_before_launch;
      if (kr.queued_ns < 0 || kr.submitted_ns < 0) {
        ++out.timestamps.kernels_without_latency;
      } else if (kr.submitted_ns < kr.queued_ns || kr.start_ns < kr.submitted_ns) {
        ++out.timestamps.kernels_latency_disordered;
      }
      intervals[k].push_back({kr.start_ns, kr.end_ns});
      if (kr.start_ns < first_kernel[k]) {
        first_kernel[k] = kr.start_ns;
        first_kernel_launch[k] = lit->second->start_ns;
      }
      last_end[k] = std::max(last_end[k], kr.end_ns);
      add_name(gpu_row.names, kr.name);
      auto [kit, inserted] = kernel_index.try_emplace(kr.name, out.kernels.size());
      if (inserted) {
        KernelSummary ks;
        ks.name = kr.name;
        std::memcpy(ks.grid, kr.grid, sizeof ks.grid);
        std::memcpy(ks.block, kr.block, sizeof ks.block);
        ks.registers_per_thread = kr.registers_per_thread;
        ks.shared_bytes = kr.static_shared_bytes + kr.dynamic_shared_bytes;
        ks.device_id = kr.device_id;
        ks.stream_id = kr.stream_id;
        out.kernels.push_back(ks);
        kernel_samples.emplace_back();
      }
      kernel_samples[kit->second].push_back(double(kr.end_ns - kr.start_ns));
    }
    for (const auto& [corr, api] : launch_by_corr) {
      if (corr_has_kernel.count(corr)) continue;
      if (api->return_value != 0) {
        ++out.failed_launches;
        continue;
      }
      ++out.unmatched_launches;
      if (out.unmatched_launch_examples.size() < 8) {
        out.unmatched_launch_examples.push_back(api->name + " (correlation " + std::to_string(corr) + ", thread " +
                                                std::to_string(api->thread_id) + ", " +
                                                std::to_string(api->end_ns - api->start_ns) + " ns)");
      }
    }
    for (size_t k = 0; k < n; ++k) {
      gpu[k] = union_ns(intervals[k]);
      queue[k] = first_kernel[k] == INT64_MAX ? 0 : double(first_kernel[k] - first_kernel_launch[k]);
    }
    for (size_t i = 0; i < out.kernels.size(); ++i) out.kernels[i].ns = Distribution::of(kernel_samples[i]);
  }

  // Only for calls made from Python with the rows on (strata.profile, strata trace --frontend python):
  // a trace from C++ has no such layer, not a zero-cost one.
  if (!python_row.names.empty()) {
    python_row.ns = Distribution::of(python);
    out.rows.push_back(std::move(python_row));
  }
  if (!pybind11_row.names.empty()) {
    pybind11_row.ns = Distribution::of(pybind11);
    out.rows.push_back(std::move(pybind11_row));
  }
  binding_row.ns = Distribution::of(binding);
  out.rows.push_back(std::move(binding_row));
  for (const std::string& key : dispatch_keys) {
    BreakdownRow row{RowKind::kDispatch, key, {key}, Distribution::of(dispatch[key]), true, {}, {}};
    out.rows.push_back(std::move(row));
  }
  library_row.ns = Distribution::of(library);
  out.rows.push_back(std::move(library_row));
  if (!runtime_row.names.empty()) {  // only when a runtime zone ran (allocator, graph or plan replay)
    runtime_row.ns = Distribution::of(runtime);
    out.rows.push_back(std::move(runtime_row));
  }
  launch_row.ns = Distribution::of(launch);
  queue_row.ns = Distribution::of(queue);
  gpu_row.ns = Distribution::of(gpu);
  out.rows.push_back(std::move(launch_row));
  out.rows.push_back(std::move(queue_row));
  out.rows.push_back(std::move(gpu_row));

  std::vector<double> wall(n, 0);
  for (size_t k = 0; k < n; ++k) wall[k] = last_end[k] > first_begin[k] ? double(last_end[k] - first_begin[k]) : 0;
  out.wall = Distribution::of(wall);
  return out;
}

std::string spread_note(const Distribution& wall, const std::string& context, double ratio) {
  if (wall.count() < 2 || wall.median <= 0 || wall.p90 < ratio * wall.median) return {};
  char times[32];
  std::snprintf(times, sizeof times, "%.1fx", wall.p90 / wall.median);
  std::string note = "the timed calls varied widely: wall p90 " + format_ns(wall.p90) + " is " + times +
                     " the median " + format_ns(wall.median) + " (min " + format_ns(wall.min) + ", max " +
                     format_ns(wall.max) + ")";
  if (!context.empty()) note += "; " + context;
  return note + ". Something else probably competed for the machine; rerun on a quiet one before trusting these figures";
}

}  // namespace strata::reports
