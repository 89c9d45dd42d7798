// layers/device/cupti: GPU-side timing from CUPTI, turned into strata's own structs (lib/timeline.h).
// cupti_trace.cpp is the only translation unit in strata that includes cupti.h (Kineto's CuptiActivityApi
// is the model); everything downstream reads DeviceTrace and is testable without a GPU.
//
// Two halves:
//  - record conversion: plain functions that take raw CUPTI activity records (a pointer to a
//    CUpti_Activity of any kind) and append ApiCallRecord / KernelRecord / ... to a DeviceTrace. Tests
//    feed them hand-built records of the real CUPTI structs.
//  - the profiling session: subscribe, enable launch callbacks and activity kinds, tag every call with
//    its op id (external correlation), flush, convert. One per process (see Note [One CUPTI session]).
// Tracing failures never throw (Note [CUPTI failures degrade] in cupti_call.h): a profiler that ends the
// run it measures loses the host figures too, so a session that cannot start says why, in one line, and
// the run goes on with host timers only.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "layers/device/cupti/graph_node_origins.h"
#include "layers/device/cupti/launch_resolution.h"
#include "lib/timeline.h"

namespace strata::cupti {

// ---- Record conversion ---------------------------------------------------------------------------------

class RecordConverter {
 public:
  explicit RecordConverter(DeviceTrace& out) : out_(out) {}
  // Appends what the record says to the trace. Returns false for a record it leaves out: a kind strata
  // ignores (counted in ignored()) or one CUPTI could not time (counted in DeviceTrace::untimed_records).
  bool add(const void* record);
  uint64_t ignored() const { return ignored_; }

 private:
  DeviceTrace& out_;
  uint64_t ignored_ = 0;
  // Demangled names by CUPTI's name, keyed by its text, not its pointer: CUPTI's name of a kernel belongs
  // to the kernel's module, and once a module is unloaded (a compiled graph's cuModuleUnload) the same
  // address may hold another kernel's name (Note [A kernel's name is copied when its record is read]).
  std::unordered_map<std::string, std::string> kernel_names_;
};

// True for the API calls that put a kernel or a graph on a stream, in either domain. Joins never use
// this: they go through correlation ids; it only decides which calls form the launch row.
bool is_launch_api(ApiDomain domain, uint32_t cbid);

// The call's name without CUPTI's version suffix: "__cudaLaunchKernel", "cuLaunchKernelEx".
std::string api_name(ApiDomain domain, uint32_t cbid);

// Launch resolution (launch_resolution.h) and graph-node origins (graph_node_origins.h) need no cupti.h and
// live in their own files; what a reader is told about dropped or untimed records is rendered by the report
// from the counts in DeviceTrace (reports/formats/notes.h, device_trace_notes).

// ---- The profiling session -------------------------------------------------------------------------------

// Asks CUPTI for queued/submitted kernel timestamps. CUPTI wants this before CUDA initialises (before the
// runtime's first call loads the driver), so device selection calls it ahead of its probe; start_session
// repeats it if this early call did not succeed. Never fails loudly: the result only decides a warning.
void enable_latency_timestamps() noexcept;

// Where queued/submitted timestamps stand: asked for before CUDA initialised (as CUPTI wants), only after
// (start_session's retry; they may be missing), or not at all.
enum class LatencyTimestamps : uint8_t { kOff, kAfterInit, kBeforeInit };
LatencyTimestamps latency_timestamps() noexcept;

// Starts the process's one CUPTI session. Call after the runtime has found a driver and BEFORE the first
// CUDA context exists (latency timestamps must be enabled before it). Returns "" on success, else the
// one-line reason GPU timing is unavailable.
std::string start_session();
bool session_active() noexcept;

// Tags the CUDA calls that follow on this thread with `op_id` (Span::op_id), until pop_op.
void push_op(uint64_t op_id) noexcept;
void pop_op() noexcept;

// Tags the CUDA calls that follow on this thread, and the graph nodes they create, with the fused kernel
// `step_tag` of a compiled forward (reports/model/compiled_attribution.h), until pop_step. Inside an op's
// push_op: the op's tag stays.
void push_step(uint32_t step_tag) noexcept;
void pop_step() noexcept;

// Records that graph nodes `nodes` (cudaGraphNode_t handles of a graph being captured) were created by
// op `op_id`, unless a resource callback already attributed them. Called after each captured op: the
// fallback for drivers that create captured nodes without a GRAPHNODE_CREATED callback.
void attribute_graph_nodes(const std::vector<void*>& nodes, uint32_t op_id) noexcept;

// Ends the session: forced flush (synchronise the device first), converts every record into `out`,
// counts dropped records. Sets out.enabled, or out.unavailable_reason when nothing could be collected.
void finish_session(DeviceTrace& out);

// What did not work but did not stop the session: optional record kinds, latency timestamps, failed
// push/pop or flush calls. One line each, for the report's notes.
std::vector<std::string> session_warnings();

// "API 130001", or "unavailable (reason)".
std::string cupti_version();

}  // namespace strata::cupti
