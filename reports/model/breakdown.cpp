#include "reports/model/breakdown.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "reports/model/units.h"
#include "reports/model/report.h"

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

namespace {

using Samples = std::vector<double>;  // one value per op call, in op_ids order

BreakdownRow empty_row(RowKind kind, bool measured) { return BreakdownRow{kind, "", {}, {}, measured, {}, {}}; }

// compute_breakdown's steps over one timeline: the host spans give the host rows, then the device records
// (joined to ops through the external correlation records) give launch, queue and gpu and take the launch
// calls' time out of the host zones that enclose them. rows() assembles the rows in table order.
class BreakdownBuilder {
 public:
  BreakdownBuilder(const Timeline& timeline, std::span<const uint32_t> op_ids)
      : timeline_(timeline), calls_(op_ids.size()), python_(calls_, 0), pybind11_(calls_, 0), binding_(calls_, 0),
        library_(calls_, 0), runtime_(calls_, 0), launch_(calls_, 0), queue_(calls_, 0), gpu_(calls_, 0), copy_(calls_, 0),
        first_begin_(calls_, INT64_MAX), last_end_(calls_, INT64_MIN), op_spans_(calls_), kernel_sum_(calls_, 0) {
    for (size_t i = 0; i < op_ids.size(); ++i) slot_[op_ids[i]] = i;
    const bool measured = timeline.device.enabled;
    launch_row_ = empty_row(RowKind::kLaunch, measured);
    queue_row_ = empty_row(RowKind::kQueue, measured);
    gpu_row_ = empty_row(RowKind::kGpu, measured);
  }

  void add_host_spans();
  void join_launch_calls(LayerBreakdown& out);
  void join_kernels(LayerBreakdown& out);
  void count_launches_without_kernel(LayerBreakdown& out) const;
  void add_rows(LayerBreakdown& out);
  Distribution wall() const;
  void add_implicit_copies(LayerBreakdown& out) const {
    out.implicit_copies = copies_;
    if (copies_ > 0) out.implicit_copy = Distribution::of(copy_);
  }

 private:
  Samples& dispatch_samples(const std::string& key) {
    Samples& samples = dispatch_[key];
    if (samples.empty()) {
      samples.assign(calls_, 0);
      dispatch_keys_.push_back(key);  // highest-priority first, as the dispatch spans nest
    }
    return samples;
  }
  const Span* innermost_zone(size_t call, const ApiCallRecord& api) const;
  bool inside_search(const Span* zone) const;
  void describe_unmatched(LayerBreakdown& out, const ApiCallRecord& api) const;
  void add_kernel_summary(LayerBreakdown& out, const KernelRecord& kernel);

  const Timeline& timeline_;
  size_t calls_;
  std::unordered_map<uint32_t, size_t> slot_;  // op id -> position in op_ids
  Samples python_, pybind11_, binding_, library_, runtime_, launch_, queue_, gpu_, copy_;
  size_t copies_ = 0;
  std::vector<std::string> dispatch_keys_;
  std::map<std::string, Samples> dispatch_;
  std::vector<int64_t> first_begin_, last_end_;
  std::vector<std::vector<size_t>> op_spans_;  // span indices of each op
  BreakdownRow python_row_ = empty_row(RowKind::kPython, true), pybind11_row_ = empty_row(RowKind::kPybind11, true),
               binding_row_ = empty_row(RowKind::kBinding, true), library_row_ = empty_row(RowKind::kLibrary, true),
               runtime_row_ = empty_row(RowKind::kRuntime, true);
  BreakdownRow launch_row_, queue_row_, gpu_row_;
  // The device joins.
  std::unordered_map<uint32_t, size_t> corr_to_op_;  // correlation id -> slot
  std::unordered_map<uint32_t, const ApiCallRecord*> launch_by_corr_;
  std::unordered_map<uint32_t, bool> corr_has_kernel_;
  Samples kernel_sum_;  // per call, the sum of its kernels' durations
  std::map<std::string, size_t> kernel_index_;
  std::vector<Samples> kernel_samples_;
};

// Host rows: each span's self time goes to its layer's row (dispatch: one row per key).
void BreakdownBuilder::add_host_spans() {
  const std::vector<double> self = span_self_ns(timeline_);
  const auto& spans = timeline_.spans();
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    auto it = slot_.find(s.op_id);
    if (it == slot_.end()) continue;
    const size_t k = it->second;
    op_spans_[k].push_back(i);
    first_begin_[k] = std::min(first_begin_[k], timeline_.begin_ns(s));
    last_end_[k] = std::max(last_end_[k], timeline_.end_ns(s));
    auto add = [&](Samples& samples, BreakdownRow& row) {
      samples[k] += self[i];
      add_name(row.names, s.name);
    };
    switch (s.layer) {
      case Layer::kPython: add(python_, python_row_); break;
      case Layer::kPybind11: add(pybind11_, pybind11_row_); break;
      case Layer::kBinding: add(binding_, binding_row_); break;
      case Layer::kDispatch:
        dispatch_samples(s.name)[k] += self[i];
        if (std::string_view(s.name).starts_with("contiguous:")) {  // Note [Contiguous inputs]
          copy_[k] += double(timeline_.end_ns(s) - timeline_.begin_ns(s));
          ++copies_;
        }
        break;
      case Layer::kLibrary: add(library_, library_row_); break;
      case Layer::kRuntime: add(runtime_, runtime_row_); break;
      default: break;  // frontend and harness spans are not part of an op's per-call cost
    }
  }
}

// The launch call ran inside some host zone on the same clock (a library call, or the runtime's
// graph/plan launch): that time is launch, not the enclosing zone's. The innermost such zone of its op.
const Span* BreakdownBuilder::innermost_zone(size_t call, const ApiCallRecord& api) const {
  const Timeline& t = timeline_;
  const Span* inner = nullptr;
  for (size_t si : op_spans_[call]) {
    const Span& s = t.spans()[si];
    if (t.begin_ns(s) <= api.start_ns && api.end_ns <= t.end_ns(s) &&
        (inner == nullptr || t.end_ns(s) - t.begin_ns(s) < t.end_ns(*inner) - t.begin_ns(*inner)))
      inner = &s;
  }
  return inner;
}

void BreakdownBuilder::join_launch_calls(LayerBreakdown& out) {
  const DeviceTrace& dev = timeline_.device;
  for (const ExternalCorrelation& ec : dev.external) {
    auto it = slot_.find(static_cast<uint32_t>(ec.external_id));
    if (it != slot_.end()) corr_to_op_[ec.correlation_id] = it->second;
  }
  for (const ApiCallRecord& api : dev.api_calls) {
    auto it = corr_to_op_.find(api.correlation_id);
    if (it == corr_to_op_.end() || !api.is_launch) continue;
    const size_t k = it->second;
    const double dur = double(api.end_ns - api.start_ns);
    launch_[k] += dur;
    const Span* inner = innermost_zone(k, api);
    if (inner == nullptr) {
      ++out.timestamps.launches_outside_zones;  // on one clock, every launch runs inside a zone of its op
    } else {
      if (inner->layer == Layer::kLibrary) library_[k] -= dur;
      else if (inner->layer == Layer::kRuntime) runtime_[k] -= dur;
      else if (inner->layer == Layer::kBinding) binding_[k] -= dur;
      else if (inner->layer == Layer::kDispatch) dispatch_[inner->name][k] -= dur;
    }
    launch_by_corr_[api.correlation_id] = &api;
    add_name(launch_row_.names, api.name);
  }
}

void BreakdownBuilder::add_kernel_summary(LayerBreakdown& out, const KernelRecord& kernel) {
  auto [kit, inserted] = kernel_index_.try_emplace(kernel.name, out.kernels.size());
  if (inserted) {
    KernelSummary summary;
    summary.name = kernel.name;
    std::memcpy(summary.grid, kernel.grid, sizeof summary.grid);
    std::memcpy(summary.block, kernel.block, sizeof summary.block);
    summary.registers_per_thread = kernel.registers_per_thread;
    summary.shared_bytes = kernel.static_shared_bytes + kernel.dynamic_shared_bytes;
    summary.device_id = kernel.device_id;
    summary.stream_id = kernel.stream_id;
    out.kernels.push_back(summary);
    kernel_samples_.emplace_back();
  }
  std::vector<uint32_t>& streams = out.kernels[kit->second].streams;
  if (std::find(streams.begin(), streams.end(), kernel.stream_id) == streams.end()) streams.push_back(kernel.stream_id);
  kernel_samples_[kit->second].push_back(double(kernel.end_ns - kernel.start_ns));
}

// gpu: the union of each call's kernel intervals; queue: its first kernel's start minus that kernel's
// launch call's start. Also checks the kernels' timestamps against their launches (TimestampChecks).
void BreakdownBuilder::join_kernels(LayerBreakdown& out) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> intervals(calls_);
  std::vector<int64_t> first_kernel(calls_, INT64_MAX), first_kernel_launch(calls_, 0);
  for (const KernelRecord& kr : timeline_.device.kernels) {
    auto it = corr_to_op_.find(kr.correlation_id);
    if (it == corr_to_op_.end()) continue;
    auto lit = launch_by_corr_.find(kr.correlation_id);
    if (lit == launch_by_corr_.end()) {
      ++out.unmatched_kernels;
      continue;
    }
    corr_has_kernel_[kr.correlation_id] = true;
    const size_t k = it->second;
    if (kr.start_ns < lit->second->start_ns) ++out.timestamps.kernels_before_launch;
    if (kr.queued_ns < 0 || kr.submitted_ns < 0) {
      ++out.timestamps.kernels_without_latency;
    } else if (kr.submitted_ns < kr.queued_ns || kr.start_ns < kr.submitted_ns) {
      ++out.timestamps.kernels_latency_disordered;
    }
    intervals[k].push_back({kr.start_ns, kr.end_ns});
    kernel_sum_[k] += double(kr.end_ns - kr.start_ns);
    if (kr.start_ns < first_kernel[k]) {
      first_kernel[k] = kr.start_ns;
      first_kernel_launch[k] = lit->second->start_ns;
    }
    last_end_[k] = std::max(last_end_[k], kr.end_ns);
    add_name(gpu_row_.names, kr.name);
    add_kernel_summary(out, kr);
  }
  for (size_t k = 0; k < calls_; ++k) {
    gpu_[k] = union_ns(intervals[k]);
    queue_[k] = first_kernel[k] == INT64_MAX ? 0 : double(first_kernel[k] - first_kernel_launch[k]);
  }
  for (size_t i = 0; i < out.kernels.size(); ++i) out.kernels[i].ns = Distribution::of(kernel_samples_[i]);
  out.kernel_sum = Distribution::of(kernel_sum_);
}

// Note [Launches without a kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A launch call that returned success and whose correlation id no kernel record carries is one of:
//  - captured: its thread was capturing a stream (a BeginCapture call with no EndCapture yet). CUDA
//    records captured work into a graph and runs nothing ("work submitted to a capturing stream is not
//    enqueued for execution"), so no kernel record can follow; the graph's launch, if any, gets them.
//    Counted apart (captured_launches), never as unmatched: they are accounted for.
//  - unmatched: everything else; a kernel record strata should have had. Each is placed in the innermost
//    host zone of its op that encloses it (unmatched_launch_zones), and counted apart when that zone or
//    one around it is a library's algorithm search (unmatched_launches_in_search): cuDNN's Find made every
//    one seen so far (one per kernel its search ran, on an H200, docs/validation), and the zone is what
//    tells that case from a lost record of the op's own work. The examples name the zone and the calls
//    nested inside the launch, so that a report shows what the launch did instead of only how many.
namespace {

// The stream-capture calls of each thread, from the API records' names (both domains, any suffix).
class CaptureWindows {
 public:
  explicit CaptureWindows(const std::vector<ApiCallRecord>& calls) {
    for (const ApiCallRecord& c : calls) {
      const std::string_view name = c.name;
      if (name.starts_with("cudaStreamBeginCapture") || name.starts_with("cuStreamBeginCapture")) {
        begins_[c.thread_id].push_back(c.start_ns);
      } else if (name.starts_with("cudaStreamEndCapture") || name.starts_with("cuStreamEndCapture")) {
        ends_[c.thread_id].push_back(c.end_ns);
      }
    }
    for (auto& [thread, times] : begins_) std::sort(times.begin(), times.end());
    for (auto& [thread, times] : ends_) std::sort(times.begin(), times.end());
  }
  // Whether the thread's last capture begun before `api` had not ended by then.
  bool captured(const ApiCallRecord& api) const {
    const int64_t begun = last_before(begins_, api.thread_id, api.start_ns);
    return begun != INT64_MIN && last_before(ends_, api.thread_id, api.start_ns) < begun;
  }

 private:
  using Times = std::unordered_map<uint32_t, std::vector<int64_t>>;
  static int64_t last_before(const Times& times, uint32_t thread, int64_t t) {
    auto it = times.find(thread);
    if (it == times.end()) return INT64_MIN;
    auto pos = std::upper_bound(it->second.begin(), it->second.end(), t);
    return pos == it->second.begin() ? INT64_MIN : *std::prev(pos);
  }
  Times begins_, ends_;
};

}  // namespace

bool BreakdownBuilder::inside_search(const Span* zone) const {
  const auto& spans = timeline_.spans();
  while (zone != nullptr) {
    if (zone->kind == ZoneKind::kAlgorithmSearch) return true;
    zone = zone->parent < 0 ? nullptr : &spans[static_cast<size_t>(zone->parent)];
  }
  return false;
}

// Counts one unmatched launch by where it was made and, for the first few, says so in words: API,
// correlation id, thread, duration, the zone, the calls nested inside it (the driver call a runtime launch
// made, a module load) and the calls just before and after it on its thread.
void BreakdownBuilder::describe_unmatched(LayerBreakdown& out, const ApiCallRecord& api) const {
  auto op = corr_to_op_.find(api.correlation_id);
  const Span* zone = op == corr_to_op_.end() ? nullptr : innermost_zone(op->second, api);
  const std::string zone_name = zone == nullptr ? "no zone of its op" : zone->name;
  ++out.unmatched_launch_zones[zone_name];
  if (inside_search(zone)) ++out.unmatched_launches_in_search;
  if (out.unmatched_launch_examples.size() >= 8) return;
  // The calls nested inside it, and its neighbours on the thread: what a capture, an event or a module
  // load around the launch would show.
  std::string nested;
  const ApiCallRecord *before = nullptr, *after = nullptr;
  for (const ApiCallRecord& c : timeline_.device.api_calls) {
    if (&c == &api || c.thread_id != api.thread_id) continue;
    if (c.start_ns >= api.start_ns && c.end_ns <= api.end_ns) {
      nested += (nested.empty() ? ", encloses " : " + ") + c.name + " (correlation " + std::to_string(c.correlation_id) + ")";
    } else if (c.end_ns <= api.start_ns && (before == nullptr || c.end_ns > before->end_ns)) {
      before = &c;
    } else if (c.start_ns >= api.end_ns && (after == nullptr || c.start_ns < after->start_ns)) {
      after = &c;
    }
  }
  const std::string neighbours = (before != nullptr ? ", after " + before->name : std::string()) +
                                 (after != nullptr ? ", before " + after->name : std::string());
  out.unmatched_launch_examples.push_back(api.name + " (correlation " + std::to_string(api.correlation_id) + ", thread " +
                                          std::to_string(api.thread_id) + ", " +
                                          std::to_string(api.end_ns - api.start_ns) + " ns, in " + zone_name + nested +
                                          neighbours + ")");
}

// A launch with no kernel record failed (its return value says so), was captured, or is unmatched (Note
// [Launches without a kernel]).
void BreakdownBuilder::count_launches_without_kernel(LayerBreakdown& out) const {
  std::vector<const ApiCallRecord*> without_kernel;
  for (const auto& [corr, api] : launch_by_corr_)
    if (!corr_has_kernel_.count(corr)) without_kernel.push_back(api);
  // In call order, so that the examples are the first ones and the same from run to run.
  std::sort(without_kernel.begin(), without_kernel.end(),
            [](const ApiCallRecord* a, const ApiCallRecord* b) { return a->correlation_id < b->correlation_id; });
  std::optional<CaptureWindows> captures;  // built only when some launch has no kernel
  for (const ApiCallRecord* api : without_kernel) {
    if (api->return_value != 0) {
      ++out.failed_launches;
      continue;
    }
    if (!captures) captures.emplace(timeline_.device.api_calls);
    if (captures->captured(*api)) {
      ++out.captured_launches;
      continue;
    }
    ++out.unmatched_launches;
    describe_unmatched(out, *api);
  }
}

void BreakdownBuilder::add_rows(LayerBreakdown& out) {
  auto push = [&](BreakdownRow& row, const Samples& samples) {
    row.ns = Distribution::of(samples);
    out.rows.push_back(std::move(row));
  };
  // Only for calls made from Python with the rows on (strata.profile, strata trace --frontend python):
  // a trace from C++ has no such layer, not a zero-cost one.
  if (!python_row_.names.empty()) push(python_row_, python_);
  if (!pybind11_row_.names.empty()) push(pybind11_row_, pybind11_);
  push(binding_row_, binding_);
  for (const std::string& key : dispatch_keys_) {
    out.rows.push_back(BreakdownRow{RowKind::kDispatch, key, {key}, Distribution::of(dispatch_[key]), true, {}, {}});
  }
  push(library_row_, library_);
  if (!runtime_row_.names.empty()) push(runtime_row_, runtime_);  // only when a runtime zone ran (allocator, graph or plan replay)
  push(launch_row_, launch_);
  push(queue_row_, queue_);
  push(gpu_row_, gpu_);
}

Distribution BreakdownBuilder::wall() const {
  Samples wall(calls_, 0);
  for (size_t k = 0; k < calls_; ++k) wall[k] = last_end_[k] > first_begin_[k] ? double(last_end_[k] - first_begin_[k]) : 0;
  return Distribution::of(wall);
}

}  // namespace

LayerBreakdown compute_breakdown(const Timeline& timeline, std::span<const uint32_t> op_ids) {
  LayerBreakdown out;
  out.calls = op_ids.size();
  out.has_device_records = timeline.device.enabled;
  BreakdownBuilder builder(timeline, op_ids);
  builder.add_host_spans();
  if (timeline.device.enabled) {
    builder.join_launch_calls(out);
    builder.join_kernels(out);
    builder.count_launches_without_kernel(out);
  }
  builder.add_rows(out);
  builder.add_implicit_copies(out);
  out.wall = builder.wall();
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
