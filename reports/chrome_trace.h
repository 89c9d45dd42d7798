// Chrome trace JSON (Perfetto, chrome://tracing), laid out like Kineto's traces so HTA can read them:
// host spans as complete events ("X") with cat = layer on the host thread's track, CUDA API calls with
// cat cuda_runtime / cuda_driver on the same track, kernels with cat kernel on pid = GPU, tid = stream,
// and "ac2g" flow arrows from each launch call to its kernel. Timestamps are microseconds with three
// decimals (ns precision) relative to the base time written in the header. Written by hand rather than
// through a JSON library so that every ts has exactly three decimals.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/timeline.h"

namespace strata::reports {

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
  std::string str() const;

 private:
  struct Source {
    const Timeline* timeline;
    std::string label;
    int group;
    int64_t from_ns, to_ns;
    bool contains(int64_t t) const { return from_ns <= t && t < to_ns; }
  };
  std::vector<Source> sources_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// Every violation of DESIGN.md's trace invariants in `json`, one line each; empty means valid:
// valid JSON, no NaN/Infinity, finite non-negative ts, X events on one track properly nested, every flow
// id exactly one "s" and one "f" each inside an X on its own track, tid never 0.
std::vector<std::string> check_chrome_trace(const std::string& json);

std::string json_escape(const std::string& s);

}  // namespace strata::reports
