#include "reports/chrome_trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace strata::reports {

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
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
  }
  return out;
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
    emit("{\"name\":\"" + json_escape(name) + "\"," + buf + (args.empty() ? "" : ",\"args\":{" + args + "}") + "}");
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
    emit(std::string("{\"name\":\"") + what + "\"," + buf + ",\"args\":{\"name\":\"" + json_escape(name) + "\"}}");
  }
  void sort_index(int pid, int index) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"ts\":0,\"args\":{\"sort_index\":%d}}",
                  pid, index);
    emit(buf);
  }
  std::string take() { return std::move(out_); }

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

std::string ChromeTraceWriter::str() const {
  int64_t base = INT64_MAX;
  for (const Source& s : sources_) base = std::min(base, earliest_ns(*s.timeline));
  if (base == INT64_MAX) base = 0;
  EventList ev(base);
  const uint64_t host_tid = static_cast<uint64_t>(syscall(SYS_gettid));
  for (const Source& src : sources_) {
    const Timeline& t = *src.timeline;
    const int hpid = host_pid(src.group);
    ev.meta("process_name", hpid, host_tid, "strata host (" + src.label + ")");
    ev.meta("thread_name", hpid, host_tid, "main thread");
    ev.sort_index(hpid, src.group * 100);
    for (const Span& s : t.spans()) {
      if (!src.contains(t.begin_ns(s))) continue;
      ev.complete(s.name, layer_name(s.layer), t.begin_ns(s), t.end_ns(s), hpid, host_tid,
                  s.op_id ? "\"op\":" + std::to_string(s.op_id) : "");
    }
    const DeviceTrace& d = t.device;
    std::unordered_map<uint32_t, uint64_t> external;
    for (const auto& e : d.external) external[e.correlation_id] = e.external_id;
    std::unordered_map<uint32_t, const ApiCallRecord*> launches;
    for (const ApiCallRecord& a : d.api_calls) {
      if (!src.contains(a.start_ns)) continue;
      std::string args = "\"correlation\":" + std::to_string(a.correlation_id) + ",\"cbid\":" + std::to_string(a.cbid);
      if (auto it = external.find(a.correlation_id); it != external.end()) args += ",\"op\":" + std::to_string(it->second);
      // API records carry the OS thread id; strata calls CUDA from the thread its zones run on.
      ev.complete(a.name, a.domain == ApiDomain::kRuntime ? "cuda_runtime" : "cuda_driver", a.start_ns, a.end_ns, hpid,
                  host_tid, args);
      if (a.is_launch) launches[a.correlation_id] = &a;
    }
    std::set<std::pair<int, uint64_t>> gpu_tracks;
    std::set<uint32_t> flowed;
    for (const KernelRecord& k : d.kernels) {
      // A kernel belongs where its launch call was made (it may start after the window closed).
      auto launch = launches.find(k.correlation_id);
      if (launch == launches.end() && !src.contains(k.start_ns)) continue;
      const int gpid = gpu_pid(src.group, k.device_id);
      const uint64_t tid = stream_tid(k.stream_id);
      gpu_tracks.insert({gpid, tid});
      char args[256];
      std::snprintf(args, sizeof args,
                    "\"correlation\":%u,\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d],\"registers per thread\":%d,"
                    "\"shared memory\":%d,\"stream\":%u,\"device\":%u",
                    k.correlation_id, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2],
                    k.registers_per_thread, k.static_shared_bytes + k.dynamic_shared_bytes, k.stream_id, k.device_id);
      std::string a = args;
      if (k.graph_node_id) a += ",\"graph node\":" + std::to_string(k.graph_node_id);
      // CUPTI's latency timestamps, when it gave them: how long before its start the kernel was put in the
      // command buffer (queued) and handed to the GPU (submitted). Together with the flow arrow from the
      // launch call they split the queue row's wait into host side and device side.
      if (k.queued_ns >= 0 && k.queued_ns <= k.start_ns) a += ",\"queued before start (us)\":" + EventList::us(k.start_ns - k.queued_ns);
      if (k.submitted_ns >= 0 && k.submitted_ns <= k.start_ns)
        a += ",\"submitted before start (us)\":" + EventList::us(k.start_ns - k.submitted_ns);
      if (auto it = external.find(k.correlation_id); it != external.end()) a += ",\"op\":" + std::to_string(it->second);
      ev.complete(k.name, "kernel", k.start_ns, k.end_ns, gpid, tid, a);
      // One arrow per launch call (a graph launch enqueues many kernels: the arrow goes to the first).
      if (launch != launches.end() && flowed.insert(k.correlation_id).second) {
        const ApiCallRecord& l = *launch->second;
        const uint32_t id = k.correlation_id + 1'000'000u * static_cast<uint32_t>(src.group);
        ev.flow(true, id, l.start_ns, hpid, host_tid);
        ev.flow(false, id, k.start_ns, gpid, tid);
      }
    }
    for (const MemoryRecord& m : d.memory) {
      if (!src.contains(m.start_ns)) continue;
      const int gpid = gpu_pid(src.group, m.device_id);
      gpu_tracks.insert({gpid, stream_tid(m.stream_id)});
      ev.complete(m.kind, m.kind == "memset" ? "gpu_memset" : "gpu_memcpy", m.start_ns, m.end_ns, gpid,
                  stream_tid(m.stream_id), "\"bytes\":" + std::to_string(m.bytes));
    }
    std::set<int> gpu_pids;
    for (auto [pid, tid] : gpu_tracks) {
      if (gpu_pids.insert(pid).second) {
        ev.meta("process_name", pid, tid, "GPU " + std::to_string(pid - 10 - 100 * src.group) + " (" + src.label + ")");
        ev.sort_index(pid, src.group * 100 + 10);
      }
      ev.meta("thread_name", pid, tid, "stream " + std::to_string(tid));
    }
  }
  std::string header = "{\n\"displayTimeUnit\":\"ns\",\n\"baseTimeNanoseconds\":" + std::to_string(base) +
                       ",\n\"strata\":{\"time base\":\"CLOCK_MONOTONIC ns, see Note [One host clock]\"";
  for (const auto& [k, v] : metadata_) header += ",\"" + json_escape(k) + "\":\"" + json_escape(v) + "\"";
  header += "},\n\"traceEvents\":[\n";
  return header + ev.take() + "\n]}\n";
}

std::vector<std::string> check_chrome_trace(const std::string& text) {
  std::vector<std::string> errors;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);  // strict JSON: NaN and Infinity are parse errors
  } catch (const std::bad_alloc&) {
    throw;  // the machine's limit, not the trace's fault: the caller says so
  } catch (const std::exception& e) {
    return {std::string("not valid JSON: ") + e.what()};
  }
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    return {"top level must be an object with a traceEvents array"};
  }
  struct Slice {
    int64_t begin, end;  // ns, exact from the three-decimal us
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Slice>> tracks;
  struct Flow {
    int starts = 0, ends = 0;
  };
  std::map<int64_t, Flow> flows;
  std::vector<std::tuple<std::pair<int64_t, int64_t>, int64_t, int64_t>> flow_points;  // track, ts, id
  auto to_ns = [](double us) { return static_cast<int64_t>(std::llround(us * 1000.0)); };
  // Beyond this many microseconds (about 127 years) a time no longer fits int64 nanoseconds once a
  // duration is added to it; such a trace is refused rather than wrapped.
  constexpr double kMaxUs = 4e15;
  // A crafted or foreign trace may carry any JSON type anywhere: every field is type-checked before it
  // is read, so malformed input gives a line in the report, never an exception.
  auto integer = [](const nlohmann::json& e, const char* key) -> std::optional<int64_t> {
    auto it = e.find(key);
    if (it == e.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
  };
  size_t index = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string where = "event " + std::to_string(index++);
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) {
      errors.push_back(where + ": not an object with 'ph'");
      continue;
    }
    const std::string ph = e["ph"].get<std::string>();
    const std::optional<int64_t> pid = integer(e, "pid"), tid = integer(e, "tid");
    if (!pid || !tid) {
      errors.push_back(where + ": missing pid/tid, or not integers");
      continue;
    }
    if (*tid == 0) errors.push_back(where + ": tid is 0");
    if (!e.contains("ts") || !e["ts"].is_number()) {
      errors.push_back(where + ": missing numeric ts");
      continue;
    }
    const double ts = e["ts"].get<double>();
    if (!std::isfinite(ts) || ts < 0) {
      errors.push_back(where + ": ts " + std::to_string(ts) + " is negative or not finite");
      continue;
    }
    if (ts > kMaxUs) {
      errors.push_back(where + ": ts " + std::to_string(ts) + " us is out of range");
      continue;
    }
    const auto track = std::make_pair(*pid, *tid);
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) {
        errors.push_back(where + ": X event without a non-negative dur");
        continue;
      }
      const double dur = e["dur"].get<double>();
      if (dur > kMaxUs) {
        errors.push_back(where + ": dur " + std::to_string(dur) + " us is out of range");
        continue;
      }
      const int64_t b = to_ns(ts);
      tracks[track].push_back({b, b + to_ns(dur)});
    } else if (ph == "s" || ph == "f") {
      const std::optional<int64_t> id = integer(e, "id");
      if (!id) {
        errors.push_back(where + ": flow event without id (an integer)");
        continue;
      }
      (ph == "s" ? flows[*id].starts : flows[*id].ends)++;
      flow_points.emplace_back(track, to_ns(ts), *id);
    }
  }
  for (auto& [track, slices] : tracks) {
    std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
    });
    std::vector<Slice> stack;
    for (const Slice& s : slices) {
      while (!stack.empty() && stack.back().end <= s.begin) stack.pop_back();
      if (!stack.empty() && s.end > stack.back().end) {
        errors.push_back("track pid " + std::to_string(track.first) + " tid " + std::to_string(track.second) +
                         ": X events overlap without nesting ([" + std::to_string(stack.back().begin) + ", " +
                         std::to_string(stack.back().end) + "] and [" + std::to_string(s.begin) + ", " +
                         std::to_string(s.end) + "] ns)");
        continue;
      }
      stack.push_back(s);
    }
  }
  for (const auto& [id, f] : flows) {
    if (f.starts != 1 || f.ends != 1) {
      errors.push_back("flow id " + std::to_string(id) + " has " + std::to_string(f.starts) + " start(s) and " +
                       std::to_string(f.ends) + " end(s); expected one each");
    }
  }
  for (const auto& [track, ts, id] : flow_points) {
    bool inside = false;
    auto it = tracks.find(track);
    if (it != tracks.end()) {
      for (const Slice& s : it->second) {
        if (s.begin <= ts && ts <= s.end) {
          inside = true;
          break;
        }
      }
    }
    if (!inside) errors.push_back("flow id " + std::to_string(id) + " has an endpoint outside every X event on its track");
  }
  return errors;
}

}  // namespace strata::reports
