#include "reports/formats/chrome_trace.h"
#include "reports/model/units.h"
#include "reports/formats/json_text.h"
#include "reports/model/report.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace strata::reports {

namespace {

// The length of the well-formed UTF-8 sequence at `p` (RFC 3629's table: no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0 when the byte at `p` does not start one.
size_t utf8_sequence_length(const unsigned char* p, size_t left) {
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  auto in = [&](size_t i, unsigned char lo, unsigned char hi) { return i < left && p[i] >= lo && p[i] <= hi; };
  if (c >= 0xC2 && c <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return in(1, lo, hi) && in(2, 0x80, 0xBF) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return in(1, lo, hi) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::string json_escape(const std::string& s, size_t& replaced) {
  std::string out;
  out.reserve(s.size() + 2);
  const auto* bytes = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = bytes[i];
    if (c >= 0x80) {
      // Note [JSON text is valid UTF-8] (json_text.h): a byte that starts no well-formed sequence is
      // written as U+FFFD, so that the trace still parses.
      const size_t n = utf8_sequence_length(bytes + i, s.size() - i);
      if (n == 0) {
        out += "\xEF\xBF\xBD";
        ++replaced;
        ++i;
      } else {
        out.append(s, i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  return out;
}

std::string json_escape(const std::string& s) {
  size_t replaced = 0;
  return json_escape(s, replaced);
}

namespace {

// Pids: the host process of group g is 1 + 100*g (never 0), GPU d of group g is 10 + d + 100*g.
int host_pid(int group) { return 1 + 100 * group; }
int gpu_pid(int group, uint32_t device) { return 10 + static_cast<int>(device) + 100 * group; }
// Stream ids are tids on the GPU track; CUPTI's are non-zero in practice, but tid 0 is reserved.
uint64_t stream_tid(uint32_t stream) { return stream == 0 ? 1 : stream; }

class EventList {
 public:
  explicit EventList(int64_t base_ns) : base_(base_ns) {}

  void complete(const std::string& name, const char* cat, int64_t start, int64_t end, int pid, uint64_t tid,
                const std::string& args) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "\"ph\":\"X\",\"cat\":\"%s\",\"ts\":%s,\"dur\":%s,\"pid\":%d,\"tid\":%" PRIu64, cat,
                  us(start - base_).c_str(), us(std::max<int64_t>(0, end - start)).c_str(), pid, tid);
    emit("{\"name\":\"" + json_escape(name, replaced_) + "\"," + buf +
         (args.empty() ? "" : ",\"args\":{" + args + "}") + "}");
  }
  void flow(bool start, uint32_t id, int64_t ts, int pid, uint64_t tid) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "{\"name\":\"ac2g\",\"cat\":\"ac2g\",\"ph\":\"%s\",\"id\":%u,\"ts\":%s,\"pid\":%d,\"tid\":%" PRIu64 "%s}",
                  start ? "s" : "f", id, us(ts - base_).c_str(), pid, tid, start ? "" : ",\"bp\":\"e\"");
    emit(buf);
  }
  void meta(const char* what, int pid, uint64_t tid, const std::string& name) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "\"ph\":\"M\",\"pid\":%d,\"tid\":%" PRIu64 ",\"ts\":0", pid, tid);
    emit(std::string("{\"name\":\"") + what + "\"," + buf + ",\"args\":{\"name\":\"" + json_escape(name, replaced_) +
         "\"}}");
  }
  void sort_index(int pid, int index) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"ts\":0,\"args\":{\"sort_index\":%d}}",
                  pid, index);
    emit(buf);
  }
  std::string take() { return std::move(out_); }
  // Bytes of the names written so far that were not UTF-8 (Note [JSON text is valid UTF-8]).
  size_t replaced_bytes() const { return replaced_; }

  static std::string us(int64_t ns) {
    // ns -> us with exactly three decimals, without going through floating point.
    char buf[48];
    const char* sign = ns < 0 ? "-" : "";
    uint64_t a = static_cast<uint64_t>(ns < 0 ? -ns : ns);
    std::snprintf(buf, sizeof buf, "%s%" PRIu64 ".%03" PRIu64, sign, a / 1000, a % 1000);
    return buf;
  }

 private:
  void emit(const std::string& event) {
    if (!out_.empty()) out_ += ",\n";
    out_ += event;
  }
  int64_t base_;
  std::string out_;
  size_t replaced_ = 0;
};

int64_t earliest_ns(const Timeline& t) {
  int64_t base = INT64_MAX;
  for (const Span& s : t.spans()) base = std::min(base, t.begin_ns(s));
  for (const auto& a : t.device.api_calls) base = std::min(base, a.start_ns);
  for (const auto& k : t.device.kernels) base = std::min(base, k.start_ns);
  for (const auto& m : t.device.memory) base = std::min(base, m.start_ns);
  return base;
}

}  // namespace

void ChromeTraceWriter::add_timeline(const Timeline& timeline, const std::string& label, int group, int64_t from_ns,
                                     int64_t to_ns) {
  sources_.push_back({&timeline, label, group, from_ns, to_ns});
}

void ChromeTraceWriter::add_metadata(const std::string& key, const std::string& value) {
  metadata_.emplace_back(key, value);
}

namespace {

struct Interval {
  int64_t begin, end;
};

// Whether [b, e] nests with every interval in `by_begin` (sorted by begin) and `by_end` (the same set,
// sorted by end), by the validator's rule: touching ends are fine, crossing ones are not. Both scans
// only visit intervals that begin or end inside (b, e), so checking disjoint steps costs one pass.
bool nests(int64_t b, int64_t e, const std::vector<Interval>& by_begin, const std::vector<Interval>& by_end) {
  auto first_b = std::upper_bound(by_begin.begin(), by_begin.end(), b,
                                  [](int64_t t, const Interval& i) { return t < i.begin; });
  for (auto it = first_b; it != by_begin.end() && it->begin < e; ++it)
    if (it->end > e) return false;  // starts inside, ends after
  auto first_e = std::upper_bound(by_end.begin(), by_end.end(), b,
                                  [](int64_t t, const Interval& i) { return t < i.end; });
  for (auto it = first_e; it != by_end.end() && it->end < e; ++it)
    if (it->begin < b) return false;  // starts before, ends inside
  return true;
}

// Each op call's extent on each GPU track (pid, stream), from its kernels and copies, written as a
// gpu_user_annotation named after the op, as Kineto writes one on the GPU for a user annotation whose ops
// put work there: HTA attributes GPU time to annotations through them (get_gpu_user_annotation_breakdown).
// A stream runs its work in order, so the extents of two calls on one track never cross.
class GpuOpExtents {
 public:
  void name_op(uint32_t op, const char* name) { names_.try_emplace(op, name); }
  void add(uint64_t op, int pid, uint64_t tid, int64_t begin, int64_t end) {
    if (op == 0 || !names_.count(op)) return;  // work of no op call (or of one this source does not hold)
    auto [it, fresh] = extents_.try_emplace({op, pid, tid}, Interval{begin, end});
    if (!fresh) it->second = {std::min(it->second.begin, begin), std::max(it->second.end, end)};
  }
  void write(EventList& ev) const {
    for (const auto& [key, extent] : extents_) {
      const auto& [op, pid, tid] = key;
      ev.complete(names_.at(op), "gpu_user_annotation", extent.begin, extent.end, pid, tid,
                  "\"External id\":" + std::to_string(op) + ",\"op\":" + std::to_string(op));
    }
  }

 private:
  std::unordered_map<uint64_t, const char*> names_;  // op id -> its binding span's name
  std::map<std::tuple<uint64_t, int, uint64_t>, Interval> extents_;
};

}  // namespace

namespace {

using Hull = std::optional<Interval>;

Interval widen(const Interval& extent, int64_t begin, int64_t end) {
  return {std::min(extent.begin, begin), std::max(extent.end, end)};
}

// The events of one timeline (one source of the writer): its host track, then its GPU tracks. Each
// write_* step adds one kind of event; the host steps collect what the later steps join on (each op's
// host extent, the launch calls by correlation id).
class SourceEvents {
 public:
  // Events that begin in [from_ns, to_ns) are this source's (see ChromeTraceWriter::add_timeline).
  struct Window {
    int64_t from_ns, to_ns;
    bool contains(int64_t t) const { return from_ns <= t && t < to_ns; }
  };
  SourceEvents(EventList& events, const Timeline& timeline, Window window, int group, const std::string& label,
               uint64_t host_tid, int64_t base_ns)
      : events_(events), timeline_(timeline), window_(window), group_(group), label_(label),
        host_pid_(host_pid(group)), host_tid_(host_tid), base_ns_(base_ns) {
    for (const auto& e : timeline.device.external) external_[e.correlation_id] = e.external_id;
  }

  void write_host_track_names() {
    events_.meta("process_name", host_pid_, host_tid_, "strata host (" + label_ + ")");
    events_.meta("thread_name", host_pid_, host_tid_, "main thread");
    events_.sort_index(host_pid_, group_ * 100);
  }
  void write_spans();
  void write_api_calls();
  size_t write_profiler_steps(const std::vector<std::vector<uint32_t>>& steps);  // returns how many were left out
  void write_kernels(const std::unordered_map<uint32_t, int>& sm_count);
  void write_memory();
  void write_gpu_track_names();

 private:
  void extend(uint32_t op, int64_t begin, int64_t end) {
    auto [it, fresh] = op_extent_.try_emplace(op, Interval{begin, end});
    if (!fresh) it->second = widen(it->second, begin, end);
  }
  uint64_t op_of(uint32_t correlation) const {
    auto it = external_.find(correlation);
    return it == external_.end() ? 0 : it->second;
  }
  // "External id" (Kineto's link from a CUDA record to the op that issued it) and strata's "op".
  std::string op_args(uint32_t correlation) const {
    auto it = external_.find(correlation);
    if (it == external_.end()) return "";
    return ",\"External id\":" + std::to_string(it->second) + ",\"op\":" + std::to_string(it->second);
  }
  std::string kernel_args(const KernelRecord& kernel, uint64_t tid, const std::unordered_map<uint32_t, int>& sm_count) const;
  void write_launch_flow(const KernelRecord& kernel, int gpid, uint64_t tid);

  EventList& events_;
  const Timeline& timeline_;
  Window window_;
  int group_;
  const std::string& label_;
  int host_pid_;
  uint64_t host_tid_;
  int64_t base_ns_;
  std::unordered_map<uint32_t, uint64_t> external_;  // correlation id -> op id
  // Each op's extent on the host track (its spans and the CUDA calls made for it), for ProfilerStep.
  std::unordered_map<uint32_t, Interval> op_extent_;
  std::vector<Interval> host_events_;
  std::unordered_map<uint32_t, const ApiCallRecord*> launches_;
  GpuOpExtents gpu_ops_;
  std::set<std::pair<int, uint64_t>> gpu_tracks_;
  std::set<uint32_t> flowed_;
};

void SourceEvents::write_spans() {
  const Timeline& t = timeline_;
  for (const Span& s : t.spans()) {
    if (!window_.contains(t.begin_ns(s))) continue;
    const int64_t b = t.begin_ns(s), e = std::max(b, t.end_ns(s));
    host_events_.push_back({b, e});
    if (s.op_id) extend(s.op_id, b, e);
    const std::string op_args =
        s.op_id ? "\"External id\":" + std::to_string(s.op_id) + ",\"op\":" + std::to_string(s.op_id) : "";
    if (s.layer == Layer::kBinding) {
      // The op as Kineto's cpu_op, around its binding span: HTA's op analyses select cat cpu_op and
      // names that start with "aten::" (strata's schemas are ATen's). See Note [Kineto trace layout].
      events_.complete(std::string("aten::") + s.name, "cpu_op", b, t.end_ns(s), host_pid_, host_tid_, op_args);
      if (s.op_id) gpu_ops_.name_op(s.op_id, s.name);
    }
    events_.complete(s.name, layer_name(s.layer), b, t.end_ns(s), host_pid_, host_tid_, op_args);
  }
}

void SourceEvents::write_api_calls() {
  for (const ApiCallRecord& a : timeline_.device.api_calls) {
    if (!window_.contains(a.start_ns)) continue;
    host_events_.push_back({a.start_ns, std::max(a.start_ns, a.end_ns)});
    if (auto it = external_.find(a.correlation_id); it != external_.end() && it->second != 0 && it->second <= UINT32_MAX)
      extend(static_cast<uint32_t>(it->second), a.start_ns, std::max(a.start_ns, a.end_ns));
    // No "stream" here: HTA takes an event with a stream for a GPU event. See Note [Kineto trace layout].
    const std::string args = "\"correlation\":" + std::to_string(a.correlation_id) + ",\"cbid\":" +
                             std::to_string(a.cbid) + op_args(a.correlation_id);
    // API records carry the OS thread id; strata calls CUDA from the thread its zones run on.
    events_.complete(a.name, a.domain == ApiDomain::kRuntime ? "cuda_runtime" : "cuda_driver", a.start_ns, a.end_ns,
                     host_pid_, host_tid_, args);
    if (a.is_launch) launches_[a.correlation_id] = &a;
  }
}

// ProfilerStep#N around each step's ops, as torch.profiler's schedule writes them. A step that would
// cross another host event (it cannot, while zones nest and ops run one after another) is left out
// and counted in the header rather than written as an invalid trace.
size_t SourceEvents::write_profiler_steps(const std::vector<std::vector<uint32_t>>& steps) {
  std::vector<Interval> by_begin = host_events_, by_end = host_events_;
  std::sort(by_begin.begin(), by_begin.end(), [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  std::sort(by_end.begin(), by_end.end(), [](const Interval& a, const Interval& b) { return a.end < b.end; });
  size_t left_out = 0;
  for (const std::vector<uint32_t>& step : steps) {
    Hull hull;
    for (uint32_t op : step) {
      auto it = op_extent_.find(op);
      if (it == op_extent_.end()) continue;
      hull = hull ? widen(*hull, it->second.begin, it->second.end) : it->second;
    }
    if (!hull) continue;  // this step's ops are in another source (the other phase of compare)
    if (!nests(hull->begin, hull->end, by_begin, by_end)) {
      ++left_out;
      continue;
    }
    events_.complete("ProfilerStep#" + std::to_string(step.front()), "user_annotation", hull->begin, hull->end,
                     host_pid_, host_tid_,
                     "\"first op\":" + std::to_string(step.front()) + ",\"last op\":" + std::to_string(step.back()));
  }
  return left_out;
}

std::string SourceEvents::kernel_args(const KernelRecord& k, uint64_t tid,
                                      const std::unordered_map<uint32_t, int>& sm_count) const {
  // Kineto's kernel args, by the names HTA reads. "stream" is the tid: HTA needs it > 0 on the GPU.
  char args[320];
  std::snprintf(args, sizeof args,
                "\"device\":%u,\"context\":%u,\"stream\":%" PRIu64 ",\"correlation\":%u,\"registers per thread\":%d,"
                "\"shared memory\":%d,\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d]",
                k.device_id, k.context_id, tid, k.correlation_id, k.registers_per_thread,
                k.static_shared_bytes + k.dynamic_shared_bytes, k.grid[0], k.grid[1], k.grid[2], k.block[0],
                k.block[1], k.block[2]);
  std::string a = args;
  if (auto sms = sm_count.find(k.device_id); sms != sm_count.end() && sms->second > 0) {
    // Kineto's occupancy inputs: blocks and warps the grid puts on each SM (not the achieved figure).
    const double blocks = double(k.grid[0]) * k.grid[1] * k.grid[2] / sms->second;
    const double warps_per_block = std::ceil(double(k.block[0]) * k.block[1] * k.block[2] / 32.0);
    a += ",\"blocks per SM\":" + format_number(blocks) + ",\"warps per SM\":" + format_number(blocks * warps_per_block);
  }
  if (k.graph_node_id) a += ",\"graph node\":" + std::to_string(k.graph_node_id);
  // CUPTI's latency timestamps, when it gave them: when the kernel was put in the command buffer
  // (queued) and handed to the GPU (submitted), on the trace's ts axis, and how long before its start.
  // Together with the flow arrow from the launch call they split the queue row's wait into host side
  // and device side. (Kineto writes "queued" in absolute microseconds, 0 when not collected.)
  if (k.queued_ns >= 0 && k.queued_ns <= k.start_ns) {
    a += ",\"queued\":" + EventList::us(std::max<int64_t>(0, k.queued_ns - base_ns_)) +
         ",\"queued before start (us)\":" + EventList::us(k.start_ns - k.queued_ns);
  }
  if (k.submitted_ns >= 0 && k.submitted_ns <= k.start_ns) {
    a += ",\"submitted\":" + EventList::us(std::max<int64_t>(0, k.submitted_ns - base_ns_)) +
         ",\"submitted before start (us)\":" + EventList::us(k.start_ns - k.submitted_ns);
  }
  return a + op_args(k.correlation_id);
}

// One arrow per launch call (a graph launch enqueues many kernels: the arrow goes to the first).
void SourceEvents::write_launch_flow(const KernelRecord& kernel, int gpid, uint64_t tid) {
  auto launch = launches_.find(kernel.correlation_id);
  if (launch == launches_.end() || !flowed_.insert(kernel.correlation_id).second) return;
  const ApiCallRecord& call = *launch->second;
  const uint32_t id = kernel.correlation_id + 1'000'000u * static_cast<uint32_t>(group_);
  events_.flow(true, id, call.start_ns, host_pid_, host_tid_);
  events_.flow(false, id, kernel.start_ns, gpid, tid);
}

void SourceEvents::write_kernels(const std::unordered_map<uint32_t, int>& sm_count) {
  for (const KernelRecord& k : timeline_.device.kernels) {
    // A kernel belongs where its launch call was made (it may start after the window closed).
    if (!launches_.count(k.correlation_id) && !window_.contains(k.start_ns)) continue;
    const int gpid = gpu_pid(group_, k.device_id);
    const uint64_t tid = stream_tid(k.stream_id);
    gpu_tracks_.insert({gpid, tid});
    events_.complete(k.name, "kernel", k.start_ns, k.end_ns, gpid, tid, kernel_args(k, tid, sm_count));
    gpu_ops_.add(op_of(k.correlation_id), gpid, tid, k.start_ns, std::max(k.start_ns, k.end_ns));
    write_launch_flow(k, gpid, tid);
  }
}

void SourceEvents::write_memory() {
  for (const MemoryRecord& m : timeline_.device.memory) {
    if (!window_.contains(m.start_ns)) continue;
    const int gpid = gpu_pid(group_, m.device_id);
    const uint64_t tid = stream_tid(m.stream_id);
    gpu_tracks_.insert({gpid, tid});
    std::string a = "\"device\":" + std::to_string(m.device_id) + ",\"stream\":" + std::to_string(tid) +
                    ",\"correlation\":" + std::to_string(m.correlation_id) + ",\"bytes\":" + std::to_string(m.bytes);
    // bytes per ns = GB/s; left out for a zero-length record rather than written as infinity.
    if (m.end_ns > m.start_ns) a += ",\"memory bandwidth (GB/s)\":" + format_number(double(m.bytes) / double(m.end_ns - m.start_ns));
    a += op_args(m.correlation_id);
    // Kineto's names ("Memcpy DtoH", "Memset"): HTA tells memory work from kernels by them.
    const bool memset = m.kind == "memset";
    events_.complete(memset ? "Memset" : "Memcpy " + m.kind, memset ? "gpu_memset" : "gpu_memcpy", m.start_ns, m.end_ns,
                     gpid, tid, a);
    gpu_ops_.add(op_of(m.correlation_id), gpid, tid, m.start_ns, std::max(m.start_ns, m.end_ns));
  }
}

void SourceEvents::write_gpu_track_names() {
  gpu_ops_.write(events_);
  std::set<int> gpu_pids;
  for (auto [pid, tid] : gpu_tracks_) {
    if (gpu_pids.insert(pid).second) {
      events_.meta("process_name", pid, tid, "GPU " + std::to_string(pid - 10 - 100 * group_) + " (" + label_ + ")");
      events_.sort_index(pid, group_ * 100 + 10);
    }
    events_.meta("thread_name", pid, tid, "stream " + std::to_string(tid));
  }
}

int64_t unix_minus_host_ns(const TraceMetadata& meta) {
  if (meta.unix_minus_host_ns) return *meta.unix_minus_host_ns;
  host_clock::calibrate();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count() -
         host_clock::now_ns();
}

std::string device_properties(const std::vector<GpuProperties>& gpus, size_t& replaced) {
  if (gpus.empty()) return "";
  std::string text = "\"deviceProperties\":[";
  for (size_t i = 0; i < gpus.size(); ++i) {
    const GpuProperties& g = gpus[i];
    text += std::string(i ? "," : "") + "\n  {\"id\":" + std::to_string(g.id) + ",\"name\":\"" + json_escape(g.name, replaced) +
            "\",\"totalGlobalMem\":" + std::to_string(g.total_memory_bytes) + ",\"computeMajor\":" +
            std::to_string(g.compute_major) + ",\"computeMinor\":" + std::to_string(g.compute_minor) +
            ",\"numSms\":" + std::to_string(g.sm_count) + "}";
  }
  return text + "\n],\n";
}

}  // namespace

std::string ChromeTraceWriter::header(int64_t base_ns, size_t steps_left_out, size_t replaced) const {
  // See Note [Kineto trace layout] for what each header field is for.
  const TraceMetadata& meta = trace_metadata_;
  const int64_t unix_minus_host = unix_minus_host_ns(meta);
  std::string header = "{\n\"schemaVersion\":1,\n" + device_properties(meta.gpus, replaced);
  // "rank": N with a space, as Kineto writes it: HTA finds the rank with the pattern "rank":\s+(\d+) over
  // the raw text before it parses the JSON.
  header += "\"distributedInfo\":{\"rank\": " + std::to_string(meta.rank) +
            ",\"world_size\": " + std::to_string(meta.world_size) + "},\n";
  header += "\"displayTimeUnit\":\"ns\",\n\"baseTimeNanoseconds\":" + std::to_string(base_ns + unix_minus_host) +
            ",\n\"strata\":{\"time base\":\"CLOCK_MONOTONIC ns, see Note [One host clock]\",\"base time (CLOCK_MONOTONIC ns)\":\"" +
            std::to_string(base_ns) + "\"";
  if (steps_left_out) header += ",\"ProfilerStep spans left out (would cross other events)\":\"" + std::to_string(steps_left_out) + "\"";
  for (const auto& [k, v] : metadata_)
    header += ",\"" + json_escape(k, replaced) + "\":\"" + json_escape(v, replaced) + "\"";
  // The same mark json_text leaves, for the command to warn about (json_text_replaced_bytes).
  if (replaced > 0) {
    header += ",\"" + std::string(kInvalidUtf8Key) + "\":\"" + std::to_string(replaced) +
              (replaced == 1 ? " byte\"" : " bytes\"");
  }
  header += "},\n\"traceEvents\":[\n";
  return header;
}

std::string ChromeTraceWriter::str() const {
  int64_t base = INT64_MAX;
  for (const Source& s : sources_) base = std::min(base, earliest_ns(*s.timeline));
  if (base == INT64_MAX) base = 0;
  EventList events(base);
  const uint64_t host_tid = static_cast<uint64_t>(syscall(SYS_gettid));
  std::unordered_map<uint32_t, int> sm_count;  // device id -> SMs, for Kineto's per-SM figures
  for (const GpuProperties& g : trace_metadata_.gpus) sm_count[static_cast<uint32_t>(g.id)] = g.sm_count;
  size_t steps_left_out = 0;
  for (const Source& src : sources_) {
    SourceEvents source(events, *src.timeline, {src.from_ns, src.to_ns}, src.group, src.label, host_tid, base);
    source.write_host_track_names();
    source.write_spans();
    source.write_api_calls();
    steps_left_out += source.write_profiler_steps(trace_metadata_.steps);
    source.write_kernels(sm_count);
    source.write_memory();
    source.write_gpu_track_names();
  }
  std::string body = events.take();
  return header(base, steps_left_out, events.replaced_bytes()) + body + "\n]}\n";
}

}  // namespace strata::reports
