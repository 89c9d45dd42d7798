// Role: format.
// Chrome trace JSON (Perfetto, chrome://tracing), laid out like Kineto's traces so HTA can read them:
// host spans as complete events ("X") with cat = layer on the host thread's track, CUDA API calls with
// cat cuda_runtime / cuda_driver on the same track, kernels with cat kernel on pid = GPU, tid = stream,
// and "ac2g" flow arrows from each launch call to its kernel. Timestamps are microseconds with three
// decimals (ns precision) relative to the base time written in the header. Written by hand rather than
// through a JSON library so that every ts has exactly three decimals. See Note [Kineto trace layout].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/timeline.h"

namespace strata::reports {

// Note [Kineto trace layout]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Holistic Trace Analysis (HTA) reads a trace the way torch.profiler / Kineto writes it, and strata's
// traces follow that layout field by field where a field means the same thing (docs/traces.md lists
// them):
// - top level: "schemaVersion", "distributedInfo" {"rank", "world_size"} (HTA refuses a trace without a
//   rank), "deviceProperties" (GPU runs only: HTA's streaming metadata reader asserts on an empty
//   array), "displayTimeUnit", and "baseTimeNanoseconds" on the Unix epoch (HTA adds it to ts to get
//   wall-clock time; strata's own CLOCK_MONOTONIC base is kept in the "strata" object);
// - one "ProfilerStep#N" X event (cat user_annotation) per step on the host thread, enclosing the step's
//   spans: HTA gives every host event the number of the step whose [ts, ts + dur) holds it, and every
//   GPU event the number of its launch call (joined on "correlation");
// - HTA tells GPU events from host events by args "stream": > 0 on the GPU, absent (-1) on the host. So
//   kernels, memcpys and memsets carry "stream" (never 0, like their tid), "device", "correlation",
//   "External id"; CUDA API calls carry "correlation", "cbid", "External id" and never "stream".
// The header's values are scalars, flat objects or arrays of flat objects: HTA's streaming reader
// (ijson) follows one level of nesting only. check_chrome_trace (chrome_trace_check.h) enforces all of this.

// One GPU in the header's "deviceProperties", with Kineto's field names.
struct GpuProperties {
  int id = 0;
  std::string name;
  int sm_count = 0;  // numSms
  int compute_major = 0, compute_minor = 0;
  uint64_t total_memory_bytes = 0;  // totalGlobalMem
};

// What the writer adds beyond the timelines: the Kineto fields HTA reads.
struct TraceMetadata {
  int rank = 0;
  int world_size = 1;
  std::vector<GpuProperties> gpus;  // empty on a CPU run
  // One ProfilerStep per entry, holding the op ids of that step's calls (one timed call in `trace`, one
  // round of K calls in `compare`). The step is numbered by its first op id, so step numbers and the
  // "External id" of the step's events agree; the cold call is no step (HTA numbers it -1).
  std::vector<std::vector<uint32_t>> steps;
  // Unix-epoch ns minus host clock ns (Note [One host clock]); measured when str() runs if not given.
  std::optional<int64_t> unix_minus_host_ns;
};

class ChromeTraceWriter {
 public:
  // Adds every span and device record of `timeline`. `label` names the process group ("eager",
  // "graph replay"); `group` (0, 1, ...) keeps the pids of several timelines apart in one file.
  // With a window [from_ns, to_ns), only events that begin inside it are written: one timeline holding
  // two phases (eager, then replay) becomes two clearly named process groups.
  void add_timeline(const Timeline& timeline, const std::string& label, int group = 0,
                    int64_t from_ns = INT64_MIN, int64_t to_ns = INT64_MAX);
  // A string pair for the header's "strata" object (device properties, op, version).
  void add_metadata(const std::string& key, const std::string& value);
  void set_trace_metadata(TraceMetadata metadata) { trace_metadata_ = std::move(metadata); }
  std::string str() const;

 private:
  // Everything before "traceEvents": the Kineto fields of Note [Kineto trace layout] and strata's own.
  // `replaced`: bytes of the events' names that were not UTF-8; the header adds its own.
  std::string header(int64_t base_ns, size_t steps_left_out, size_t replaced) const;

  struct Source {
    const Timeline* timeline;
    std::string label;
    int group;
    int64_t from_ns, to_ns;
  };
  std::vector<Source> sources_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  TraceMetadata trace_metadata_;
};

// `s` as the inside of a JSON string. Each byte that starts no well-formed UTF-8 sequence is written as
// U+FFFD and counted in `replaced` (Note [JSON text is valid UTF-8] in json_text.h).
std::string json_escape(const std::string& s, size_t& replaced);
std::string json_escape(const std::string& s);

}  // namespace strata::reports
