#include "layers/device/cupti/launch_resolution.h"

#include <algorithm>
#include <unordered_set>

namespace strata::cupti {
namespace {

using CorrelationIds = std::unordered_set<uint32_t>;

// The correlation ids that some kernel or memory record carries: the calls that put measured work on a
// stream.
CorrelationIds correlations_with_work(const DeviceTrace& trace) {
  CorrelationIds with_work;
  for (const KernelRecord& k : trace.kernels) with_work.insert(k.correlation_id);
  for (const MemoryRecord& m : trace.memory) with_work.insert(m.correlation_id);
  return with_work;
}

size_t resolve_internal_launches(DeviceTrace& trace, const CorrelationIds& with_work) {
  size_t launches = 0;
  for (ApiCallRecord& call : trace.api_calls) {
    if (!call.internal_launch) continue;
    call.is_launch = with_work.count(call.correlation_id) > 0;
    launches += call.is_launch ? 1 : 0;
  }
  return launches;
}

// The launch calls per thread, outer calls first: by start, and the longer of two calls that start
// together first.
std::vector<ApiCallRecord*> launches_outer_first(DeviceTrace& trace) {
  std::vector<ApiCallRecord*> launches;
  for (ApiCallRecord& call : trace.api_calls)
    if (call.is_launch) launches.push_back(&call);
  std::sort(launches.begin(), launches.end(), [](const ApiCallRecord* a, const ApiCallRecord* b) {
    if (a->thread_id != b->thread_id) return a->thread_id < b->thread_id;
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
    return a->end_ns > b->end_ns;
  });
  return launches;
}

// `inner` runs inside `outer` on the same thread: which of the two stops being a launch. Returns how many
// were demoted and whether `inner` still counts (and so may enclose later calls).
struct NestedVerdict {
  size_t demoted = 0;
  bool inner_kept = true;
};
NestedVerdict resolve_pair(ApiCallRecord& outer, ApiCallRecord& inner, const CorrelationIds& with_work) {
  // One call seen twice (both domains, one correlation id): count it once, as the outer.
  if (inner.correlation_id == outer.correlation_id || with_work.count(inner.correlation_id) == 0) {
    inner.is_launch = false;
    return {1, false};
  }
  if (with_work.count(outer.correlation_id) == 0 && outer.is_launch) {
    outer.is_launch = false;
    return {1, true};
  }
  return {0, true};
}

size_t resolve_nested_launches(DeviceTrace& trace, const CorrelationIds& with_work) {
  size_t demoted = 0;
  std::vector<ApiCallRecord*> open;  // the enclosing calls of the current one, innermost last
  for (ApiCallRecord* call : launches_outer_first(trace)) {
    while (!open.empty() && (open.back()->thread_id != call->thread_id || open.back()->end_ns < call->start_ns))
      open.pop_back();
    if (!open.empty() && call->end_ns <= open.back()->end_ns) {
      const NestedVerdict verdict = resolve_pair(*open.back(), *call, with_work);
      demoted += verdict.demoted;
      if (!verdict.inner_kept) continue;
    }
    open.push_back(call);
  }
  return demoted;
}

}  // namespace

size_t resolve_internal_launches(DeviceTrace& trace) {
  return resolve_internal_launches(trace, correlations_with_work(trace));
}

size_t resolve_nested_launches(DeviceTrace& trace) { return resolve_nested_launches(trace, correlations_with_work(trace)); }

void resolve_launches(DeviceTrace& trace) {
  const CorrelationIds with_work = correlations_with_work(trace);
  resolve_internal_launches(trace, with_work);
  resolve_nested_launches(trace, with_work);
}

size_t merge_callback_correlations(DeviceTrace& trace, const std::vector<ExternalCorrelation>& from_callbacks) {
  CorrelationIds known;
  for (const ExternalCorrelation& e : trace.external) known.insert(e.correlation_id);
  size_t added = 0;
  for (const ExternalCorrelation& e : from_callbacks) {
    if (known.insert(e.correlation_id).second) {
      trace.external.push_back(e);
      ++added;
    }
  }
  return added;
}

}  // namespace strata::cupti
