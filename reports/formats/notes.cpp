#include "reports/formats/notes.h"

#include <algorithm>
#include <cstdio>

#include "lib/error.h"
#include "reports/model/units.h"
#include "reports/model/report.h"

namespace strata::reports {
namespace {

std::string count(const Figures& f, std::string_view name) {
  return std::to_string(static_cast<long long>(f.value_or(name, 0)));
}

}  // namespace

std::vector<std::string> device_trace_notes(const Figures& f, const std::string& unavailable_reason) {
  std::vector<std::string> notes;
  if (f.value_or("device_timing.enabled", 0) <= 0) {
    notes.push_back("GPU timing unavailable: " +
                    (unavailable_reason.empty() ? std::string("CUPTI was not started") : unavailable_reason) +
                    "; launch, queue and gpu rows are not measured (host timers only)");
  }
  if (f.value_or("cupti.dropped_records", 0) > 0) {
    notes.push_back("CUPTI dropped " + count(f, "cupti.dropped_records") +
                    " activity records (its buffers were full): launch, queue and gpu rows may miss calls");
  }
  if (f.value_or("cupti.untimed_records", 0) > 0) {
    notes.push_back("CUPTI delivered " + count(f, "cupti.untimed_records") +
                    " kernel, API or overhead records without timestamps; they are left out, so launch, queue, "
                    "gpu and cold-call rows may miss calls");
  }
  return notes;
}

std::string graph_replay_note(const Figures& f, bool plan_replay) {
  const double replayed = f.value_or("graph_replay.replayed_kernels", 0);
  const double attributed = f.value_or("graph_replay.attributed_kernels", 0);
  if (replayed > 0) {
    // Which source attributed them is what the first GPU run must confirm: CUPTI's node callbacks, or
    // the capture-info fallback for drivers that create captured nodes without a callback.
    const double fallback = f.value_or("graph_replay.attributed_by_capture_info", 0);
    std::string sources;
    if (fallback > 0) {
      sources = fallback == attributed ? ", all through the capture-info fallback (no CUPTI node callbacks)"
                                       : ", " + count(f, "graph_replay.attributed_by_capture_info") +
                                             " through the capture-info fallback";
    }
    return "graph replay: " + count(f, "graph_replay.attributed_kernels") + " of " +
           count(f, "graph_replay.replayed_kernels") +
           " replayed kernels attributed to the op that created their graph node" + sources +
           (attributed == replayed ? "" : " (the rest: no node record)");
  }
  if (f.value_or("device_timing.enabled", 0) > 0 && !plan_replay) {
    return "graph replay: CUPTI reported no replayed kernels with graph node ids";
  }
  return "";
}

std::string unmatched_launches_note(const Figures& f) {
  if (f.value_or("steady.unmatched_launches", 0) <= 0) return "";
  return count(f, "steady.unmatched_launches") +
         " launch calls of the timed calls returned success but have no kernel record (dropped records?)";
}

std::string failed_launches_note(const Figures& f) {
  if (f.value_or("steady.failed_launches", 0) <= 0) return "";
  return count(f, "steady.failed_launches") +
         " launch calls of the timed calls returned an error (CUPTI's return value), so ran no kernel; their "
         "host time is in the launch row";
}

std::string unmatched_kernels_note(const Figures& f) {
  if (f.value_or("steady.unmatched_kernels", 0) <= 0) return "";
  return count(f, "steady.unmatched_kernels") + " kernels of the timed calls have no launch record; they count in no row";
}

std::string timestamp_note(const Figures& f) {
  std::string out;
  const double outside = f.value_or("steady.launches_outside_zones", 0);
  const double early = f.value_or("steady.kernels_before_launch", 0);
  if (outside > 0 || early > 0) {
    out = "CUPTI's timestamps disagree with strata's host clock (";
    if (outside > 0) out += count(f, "steady.launches_outside_zones") + " launch calls in no host zone of their op";
    if (outside > 0 && early > 0) out += ", ";
    if (early > 0) out += count(f, "steady.kernels_before_launch") + " kernels starting before their launch call";
    out += "): the launch and queue rows are not trustworthy (a sign that CUPTI's host-clock timestamp "
           "callback is not in effect)";
  }
  if (f.value_or("steady.kernels_latency_disordered", 0) > 0) {
    out += (out.empty() ? "" : "; ") + count(f, "steady.kernels_latency_disordered") +
           " kernels have queued/submitted timestamps out of order (queued <= submitted <= start does not hold)";
  }
  return out;
}

std::string allocator_note(const Figures& f) {
  if (f.find("allocator.cuda_mallocs") == nullptr) return "";
  return "caching allocator: " + count(f, "allocator.cuda_mallocs") + " cudaMalloc in this run (" +
         format_bytes(f.value_or("allocator.bytes_reserved", 0)) + " reserved), " + count(f, "allocator.cache_hits") +
         " allocations served from the cache";
}

std::string compare_check_note(const Figures& f, const std::string& replay_kind) {
  const Figure* eager = f.find("check.eager_relative_error");
  const Figure* replay = f.find("check.replay_relative_error");
  const Figure* tolerance = f.find("check.tolerance");
  if (eager == nullptr || replay == nullptr || tolerance == nullptr) return "";
  char buf[200];
  std::snprintf(buf, sizeof buf, "check: relative error vs float64 reference: eager %.3g, %s %.3g (tolerance %.1g): %s",
                eager->value, replay_kind.c_str(), replay->value, tolerance->value,
                std::max(eager->value, replay->value) <= tolerance->value ? "PASS" : "FAIL");
  return buf;
}

std::string cold_call_note(const Figures& f) {
  const Figure* host = f.find("cold.host_ns");
  if (host == nullptr) return "";
  std::string parts;
  auto part = [&](const std::string& text) { parts += (parts.empty() ? " " : ", ") + text; };
  if (const double handles = f.value_or("cold.handle_creation_ns", 0); handles > 0)
    part("cuBLAS/cuDNN handle creation " + format_ns(handles));
  if (f.value_or("cold.module_loads", 0) > 0)
    part("kernel module loading " + format_ns(f.value_or("cold.module_loading_ns", 0)) + " (" +
         count(f, "cold.module_loads") + " CUPTI overhead records)");
  if (const double search = f.value_or("cold.algorithm_search_ns", 0); search > 0)
    part("algorithm search " + format_ns(search));
  if (f.value_or("cold.cuda_mallocs", 0) > 0)
    part("cudaMalloc " + format_ns(f.value_or("cold.cuda_malloc_ns", 0)) + " (" + count(f, "cold.cuda_mallocs") +
         " blocks)");
  if (parts.empty()) part("no handle creation, module loading, search or allocation seen");
  if (f.value_or("device_timing.enabled", 0) <= 0) parts += "; module loading unknown without CUPTI";
  return "cold call " + format_ns(host->value) + " (host spans):" + parts + "; context creation (" +
         format_ns(f.value_or("cold.context_creation_ns", 0)) + ") happened at session start and is not included";
}

}  // namespace strata::reports
