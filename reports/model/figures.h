// Role: model.
// Named figures: what a run measured beyond the breakdown rows (counts, one-time costs, rates), each with
// a stable machine name, a value and a unit, as nvbench's summaries are. See Note [Figures, not prose].
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lib/timeline.h"
#include "reports/model/breakdown.h"

namespace strata::reports {

// Note [Figures, not prose]
// A figure is measured once, stored under a name that never changes ("cupti.dropped_records"), and read by
// whoever needs it: the notes the table prints are rendered from figures (reports/formats/notes.h), the JSON
// carries them in its "figures" object, and scripts (scripts/gpu_validate/checks.py) read them there.
// Nothing parses a note back into a number; a note's wording can change without breaking a script.

struct Figure {
  std::string name;  // stable, dotted: "<what it is about>.<quantity>"
  double value = 0;
  std::string unit;  // "count", "ns", "bytes", "FLOP/s", "bytes/s", "ratio", "bool"
};

class Figures {
 public:
  void set(const std::string& name, double value, const std::string& unit);  // replaces a figure of that name
  const Figure* find(std::string_view name) const;
  double value_or(std::string_view name, double fallback) const;
  const std::vector<Figure>& all() const { return figures_; }

 private:
  std::vector<Figure> figures_;  // in the order they were first set
};

// part / whole, or 0 when whole is not positive (a share of nothing measured): the one definition of a
// share in reports. format_percent (report.h) prints one: 0.123 -> "12.3%".
double share_of(double part, double whole);

// What CUPTI delivered: "device_timing.enabled" (bool), "cupti.dropped_records", "cupti.untimed_records".
void add_device_trace_figures(Figures& figures, const DeviceTrace& device);

// How the steady calls' device records joined: "steady.unmatched_launches", "steady.unmatched_kernels", and
// their timestamp checks (TimestampChecks): "steady.launches_outside_zones", "steady.kernels_before_launch",
// "steady.kernels_without_latency", "steady.kernels_latency_disordered".
void add_steady_join_figures(Figures& figures, const LayerBreakdown& steady);

// What the first call (op `cold_op`) spent on one-time work, from its zones by ZoneKind and from CUPTI's
// module-loading OVERHEAD records inside it: "cold.host_ns" (first span begin -> last span end),
// "cold.handle_creation_ns", "cold.algorithm_search_ns", "cold.cuda_malloc_ns", "cold.cuda_mallocs",
// "cold.module_loading_ns", "cold.module_loads", and "cold.context_creation_ns" (`context_ns`, measured
// at session start). Sets nothing when the op has no span.
void add_cold_call_figures(Figures& figures, const Timeline& timeline, uint32_t cold_op, double context_ns);

}  // namespace strata::reports
