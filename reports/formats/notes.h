// Role: format.
// The notes under the table, rendered from named figures (Note [Figures, not prose] in figures.h). Each
// returns "" when its figures are absent or there is nothing to say. The figure names each one reads are
// listed beside it; whoever measures sets them.
#pragma once

#include <string>
#include <vector>

#include "reports/model/figures.h"

namespace strata::reports {

// What a reader must know about the device trace's completeness, one line each: GPU timing off (with
// `unavailable_reason`, DeviceTrace's), records CUPTI dropped or could not time. Reads
// "device_timing.enabled", "cupti.dropped_records", "cupti.untimed_records" (add_device_trace_figures).
std::vector<std::string> device_trace_notes(const Figures& figures, const std::string& unavailable_reason);

// "graph_replay.replayed_kernels", "graph_replay.attributed_kernels", "graph_replay.attributed_by_capture_info",
// "device_timing.enabled".
std::string graph_replay_note(const Figures& figures, bool plan_replay);

// "steady.unmatched_launches" / "steady.unmatched_kernels".
std::string unmatched_launches_note(const Figures& figures);
std::string unmatched_kernels_note(const Figures& figures);
// "steady.failed_launches": launch calls that returned an error, which put no kernel on the GPU.
std::string failed_launches_note(const Figures& figures);

// "steady.launches_outside_zones", "steady.kernels_before_launch", "steady.kernels_latency_disordered":
// where CUPTI's timestamps disagree with the host timers (TimestampChecks).
std::string timestamp_note(const Figures& figures);

// "allocator.cuda_mallocs", "allocator.bytes_reserved", "allocator.cache_hits".
std::string allocator_note(const Figures& figures);

// `strata compare --check`: "check.eager_relative_error", "check.replay_relative_error", "check.tolerance";
// `replay_kind` names the replay ("CUDA Graph", "plan replay").
std::string compare_check_note(const Figures& figures, const std::string& replay_kind);

// What the cold call spent on one-time work: "cold.host_ns" (absent: no note), "cold.handle_creation_ns",
// "cold.module_loading_ns" with "cold.module_loads", "cold.algorithm_search_ns", "cold.cuda_malloc_ns"
// with "cold.cuda_mallocs", "cold.context_creation_ns", and "device_timing.enabled".
std::string cold_call_note(const Figures& figures);

}  // namespace strata::reports
