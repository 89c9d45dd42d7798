// The only translation unit in strata that includes cupti.h. CUPTI's raw records become strata's own plain
// structs here (cupti::RecordConverter), so everything after this file is tested on machines without a GPU
// by feeding it those structs, and a change of CUPTI's structs (one per CUDA release) touches one file.
// That is also why this file is longer than strata's ~500 lines: the session, its callbacks and the record
// conversion all need cupti.h. What needs only the converted structs is in launch_resolution.cpp and
// graph_node_origins.cpp; what the reader is told about drops is the report's (reports/formats/notes.h).
//
// Note [One CUPTI session]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// CUPTI 13.0 gives wrong graph-launch correlation ids from the second profiling session on in one process
// (fixed in 13.1 Update 1), and the host-clock timestamp callback must be registered before any activity
// kind is enabled. So strata starts CUPTI at most once per process, before the first CUDA context, and a
// second start_session() in the same process is refused with that reason instead of producing subtly
// wrong joins. The session state is never destroyed: CUPTI may still call the buffer callbacks while the
// process exits.
#include "layers/device/cupti/cupti_trace.h"

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "layers/device/cupti/cupti_call.h"
#include "lib/host_clock.h"

namespace strata::cupti {
namespace {

// CUPTI_TIMESTAMP_UNKNOWN (0) means "not collected"; strata's structs use -1 for that.
int64_t optional_timestamp(uint64_t t) { return t == CUPTI_TIMESTAMP_UNKNOWN ? -1 : static_cast<int64_t>(t); }

// CUPTI marks a kernel or API record it could not time with start == end == 0 (cupti_activity.h: "a value
// of 0 for both the start and end timestamps indicates that timestamp information could not be
// collected"; kernel records get them when the device runs short of memory for its timestamp buffers).
// Taken at face value such a kernel would be the op's first, with a queue time of minus the launch's
// timestamp. Those records are left out and counted (cupti.untimed_records), and the report says how many.
bool untimed(uint64_t start, uint64_t end) { return (start == 0 && end == 0) || end < start; }

std::string demangle(const char* name) {
  if (name == nullptr) return "(unnamed kernel)";
  if (std::strncmp(name, "_Z", 2) != 0) return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = (status == 0 && out != nullptr) ? std::string(out) : std::string(name);
  std::free(out);
  return result;
}

std::string memcpy_kind_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "memcpy";
  }
}

std::string overhead_kind_name(CUpti_ActivityOverheadKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "JIT compilation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "CUPTI buffer flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "CUPTI instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "CUPTI resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "module loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "lazy function loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "command buffer full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "CUPTI buffer request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return "UVM activity init";
    default: return "unknown overhead";
  }
}

// ---- Session state ----------------------------------------------------------------------------------------

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kBufferAlignment = 8;  // CUPTI's requirement for activity buffers

// Two locks, so that no CUPTI call is ever made while holding the lock CUPTI's callbacks take (a callback
// fired from inside cuptiActivityDisable or cuptiActivityFlushAll on this thread would deadlock):
//  - control: start/finish, the subscriber and the enabled kinds; held across CUPTI calls;
//  - mutex: what the callbacks fill in; never held across a CUPTI call.
struct Session {
  std::mutex control;
  std::mutex mutex;
  bool started_once = false;
  std::atomic<bool> active{false};
  CUpti_SubscriberHandle subscriber = nullptr;
  std::vector<CUpti_ActivityKind> enabled_kinds;
  std::vector<std::pair<uint8_t*, size_t>> completed;  // filled buffers, converted at finish
  uint64_t dropped_in_callbacks = 0;
  uint64_t lost_buffers = 0;  // completed buffers that could not be kept (out of memory)
  std::vector<ExternalCorrelation> callback_correlations;
  GraphNodeOrigins graph_nodes;  // from resource callbacks (on_graph_node) and attribute_graph_nodes
  std::vector<std::string> warnings;  // optional features that could not be enabled, failures after start
};

Session& session() {
  static Session* s = new Session();  // never destroyed: see Note [One CUPTI session]
  return *s;
}

// Which cuptiActivityEnableLatencyTimestamps succeeded: the early one (before cuInit), start_session's
// late retry (after CUDA initialised, where CUPTI does not promise them), or neither.
std::atomic<LatencyTimestamps> g_latency{LatencyTimestamps::kOff};

// The op whose calls this thread is making; read by the launch callback.
thread_local uint64_t t_current_op = 0;
// The fused kernel of a compiled forward this thread is issuing (push_step); read by the node callback.
thread_local uint32_t t_current_step = 0;

uint64_t CUPTIAPI host_timestamp() { return static_cast<uint64_t>(host_clock::now_ns()); }

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer == nullptr ? 0 : kBufferBytes;  // 0: CUPTI drops the records and counts them
  *max_records = 0;                                // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t /*size*/,
                               size_t valid_size) {
  size_t dropped = 0;
  // On CUPTI's thread, per buffer: a failure here is not worth a note per buffer; finish_session counts
  // the drops again and says so when it cannot.
  if (!STRATA_CUPTI_CALL(cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped)).ok()) dropped = 0;
  Session& s = session();
  std::lock_guard lock(s.mutex);
  s.dropped_in_callbacks += dropped;
  if (buffer == nullptr) return;
  try {
    s.completed.emplace_back(buffer, valid_size);
  } catch (...) {  // see on_api_callback: nothing may unwind into CUPTI; the buffer's records are lost
    s.lost_buffers += 1;
    std::free(buffer);
  }
}

// Graph nodes (resource callbacks): which op created each node. A node created while an op is being
// captured belongs to that op; the executable graph's nodes are clones of those (new ids), and replayed
// kernel records may carry either id, so a clone inherits its original's op. This is what lets strata
// attribute every replayed kernel to the op and layer that created it (reports/model/comparison.h).
void on_graph_node(CUpti_CallbackId cbid, const CUpti_ResourceData* resource) {
  const auto* graph = static_cast<const CUpti_GraphData*>(resource->resourceDescriptor);
  if (graph == nullptr || graph->node == nullptr) return;
  uint64_t node_id = 0;
  // Without an id the node stays unattributed, which the comparison counts and reports.
  if (!STRATA_CUPTI_CALL(cuptiGetGraphNodeId(graph->node, &node_id)).ok()) return;
  Session& s = session();
  std::lock_guard lock(s.mutex);
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    if (t_current_op != 0) {
      s.graph_nodes.add(node_id, static_cast<uint32_t>(t_current_op), GraphNodeSource::kResourceCallback,
                        t_current_step);
    }
    return;
  }
  uint64_t original_id = 0;  // CLONED
  if (graph->originalNode == nullptr || !STRATA_CUPTI_CALL(cuptiGetGraphNodeId(graph->originalNode, &original_id)).ok()) {
    return;
  }
  s.graph_nodes.add_clone(node_id, original_id);
}

// Launch callbacks (both domains): remember which op each launch belongs to, from the host side. The
// EXTERNAL_CORRELATION records say the same; this is the fallback when one of those is dropped.
void on_api_callback_body(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED || cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
      on_graph_node(cbid, static_cast<const CUpti_ResourceData*>(data));
    }
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite != CUPTI_API_ENTER || t_current_op == 0) return;
  Session& s = session();
  std::lock_guard lock(s.mutex);
  s.callback_correlations.push_back({cb->correlationId, t_current_op});
}

// No exception may unwind through CUPTI's C frames. The only ones possible are allocation failures; the
// tag or node they lose is counted in g_callback_losses, which finish_session turns into a note.
std::atomic<uint64_t> g_callback_losses{0};

void CUPTIAPI on_api_callback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                              const void* data) {
  try {
    on_api_callback_body(domain, cbid, data);
  } catch (...) {
    g_callback_losses.fetch_add(1, std::memory_order_relaxed);
  }
}

constexpr CUpti_CallbackId kRuntimeLaunchCbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    // nvcc 13 lowers kernel<<<...>>> to __cudaLaunchKernel, a runtime entry new in CUDA 13.0, not to
    // cudaLaunchKernel: without these, strata's own kernels would have no launch to join.
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
};

constexpr CUpti_CallbackId kDriverLaunchCbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    // cuBLAS 13 and cuDNN 9 launch their kernels through the driver's cuLaunchKernelEx, not the runtime:
    // without these, the library kernels would have no launch to join.
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
};

void warn(Session& s, std::string text) {
  std::lock_guard lock(s.mutex);
  if (s.warnings.size() < 16) s.warnings.push_back(std::move(text));
}

void teardown_under_control(Session& s) {
  for (CUpti_ActivityKind kind : s.enabled_kinds) (void)cuptiActivityDisable(kind);
  s.enabled_kinds.clear();
  if (s.subscriber != nullptr) {
    (void)cuptiUnsubscribe(s.subscriber);
    s.subscriber = nullptr;
  }
  s.active.store(false);
}

std::string subscribe_under_control(Session& s) {
#ifdef CUpti_SubscriberParams_STRUCT_SIZE
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "strata";
  params.oldSubscriberName = holder;
  params.oldSubscriberSize = sizeof holder;
  const CuptiCall subscribed = STRATA_CUPTI_CALL(cuptiSubscribe_v2(&s.subscriber, &on_api_callback, nullptr, &params));
#else
  const char holder[] = "";
  const CuptiCall subscribed = STRATA_CUPTI_CALL(cuptiSubscribe(&s.subscriber, &on_api_callback, nullptr));
#endif
  if (subscribed.ok()) return "";
  s.subscriber = nullptr;
  if (subscribed.is(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)) {
    const std::string who = holder[0] != '\0' ? std::string(holder) : std::string("another CUPTI client");
    return who + " already holds CUPTI's one subscription (running under Nsight Systems / Nsight Compute?); "
                 "run strata outside the other tool to get GPU timing";
  }
  return subscribed.failure();
}

}  // namespace

// ---- Record conversion ---------------------------------------------------------------------------------------

bool is_launch_api(ApiDomain domain, uint32_t cbid) {
  if (domain == ApiDomain::kRuntime) {
    return std::find(std::begin(kRuntimeLaunchCbids), std::end(kRuntimeLaunchCbids), cbid) != std::end(kRuntimeLaunchCbids);
  }
  return std::find(std::begin(kDriverLaunchCbids), std::end(kDriverLaunchCbids), cbid) != std::end(kDriverLaunchCbids);
}

std::string api_name(ApiDomain domain, uint32_t cbid) {
  static std::mutex mutex;
  static std::unordered_map<uint64_t, std::string> cache;
  const uint64_t key = (uint64_t{domain == ApiDomain::kDriver} << 32) | cbid;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const char* raw = nullptr;
  const CUpti_CallbackDomain d = domain == ApiDomain::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
  std::string name;
  // Without CUPTI's name the call is named by its cbid, which says what happened.
  if (STRATA_CUPTI_CALL(cuptiGetCallbackName(d, cbid, &raw)).ok() && raw != nullptr) {
    name = raw;
    // "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": the suffix is the API version CUPTI tracks.
    const size_t v = name.rfind("_v");
    if (v != std::string::npos && v + 2 < name.size() &&
        std::all_of(name.begin() + static_cast<std::ptrdiff_t>(v) + 2, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      name.erase(v);
    }
  } else {
    name = std::string(domain == ApiDomain::kRuntime ? "runtime" : "driver") + " API cbid " + std::to_string(cbid);
  }
  cache.emplace(key, name);
  return name;
}

namespace {

KernelRecord kernel_record(const CUpti_ActivityKernel10& kernel, std::string name) {
  KernelRecord r;
  r.name = std::move(name);
  r.start_ns = static_cast<int64_t>(kernel.start);
  r.end_ns = static_cast<int64_t>(kernel.end);
  r.queued_ns = optional_timestamp(kernel.queued);
  r.submitted_ns = optional_timestamp(kernel.submitted);
  r.correlation_id = kernel.correlationId;
  r.device_id = kernel.deviceId;
  r.context_id = kernel.contextId;
  r.stream_id = kernel.streamId;
  r.grid[0] = kernel.gridX;
  r.grid[1] = kernel.gridY;
  r.grid[2] = kernel.gridZ;
  r.block[0] = kernel.blockX;
  r.block[1] = kernel.blockY;
  r.block[2] = kernel.blockZ;
  r.registers_per_thread = kernel.registersPerThread;
  r.static_shared_bytes = kernel.staticSharedMemory;
  r.dynamic_shared_bytes = kernel.dynamicSharedMemory;
  r.graph_node_id = kernel.graphNodeId;
  r.graph_id = kernel.graphId;
  return r;
}

ApiCallRecord api_call_record(CUpti_ActivityKind kind, const CUpti_ActivityAPI& call) {
  ApiCallRecord r;
  r.domain = kind == CUPTI_ACTIVITY_KIND_RUNTIME ? ApiDomain::kRuntime : ApiDomain::kDriver;
  r.cbid = call.cbid;
  if (kind == CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API) {
    // A driver launch outside any public API call (CUPTI leaves cbid unused). Whether it launched
    // anything strata measures is only known once every record is in: resolve_internal_launches.
    r.name = "driver-internal launch";
    r.internal_launch = true;
    r.is_launch = false;
  } else {
    r.name = api_name(r.domain, r.cbid);
    r.is_launch = is_launch_api(r.domain, r.cbid);
  }
  r.start_ns = static_cast<int64_t>(call.start);
  r.end_ns = static_cast<int64_t>(call.end);
  r.correlation_id = call.correlationId;
  r.thread_id = call.threadId;
  r.return_value = call.returnValue;
  return r;
}

using KernelNames = std::unordered_map<std::string, std::string>;

// Note [A kernel's name is copied when its record is read]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CUpti_ActivityKernel10::name points at a string CUPTI shares among the records of one kernel and keeps
// with the kernel's module. Everything after conversion holds its own std::string (KernelRecord::name),
// copied here, when the records are read at the session's finish. So the modules that ran must still be
// loaded then: a compiled graph's modules live as long as the graph, and the commands keep it past their
// run's finish (a graph dropped before the finish would leave its kernels' names to chance). The
// demangling cache is keyed by the name's text: a pointer says nothing once a module was unloaded and
// another one's name took its address.
bool add_kernel(DeviceTrace& out, KernelNames& kernel_names, const CUpti_ActivityKernel10& kernel) {
  if (untimed(kernel.start, kernel.end)) {
    ++out.untimed_records;
    return false;
  }
  if (kernel.name == nullptr) {
    out.kernels.push_back(kernel_record(kernel, demangle(nullptr)));
    return true;
  }
  auto [it, inserted] = kernel_names.try_emplace(kernel.name);
  if (inserted) it->second = demangle(kernel.name);
  out.kernels.push_back(kernel_record(kernel, it->second));
  return true;
}

bool add_api_call(DeviceTrace& out, CUpti_ActivityKind kind, const CUpti_ActivityAPI& call) {
  if (untimed(call.start, call.end)) {
    ++out.untimed_records;
    return false;
  }
  out.api_calls.push_back(api_call_record(kind, call));
  return true;
}

bool add_overhead(DeviceTrace& out, const CUpti_ActivityOverhead3& overhead) {
  // Kept, an untimed overhead would sit at time 0, outside every zone, where only the cold-call
  // note's clipping hides it: left out and counted like an untimed kernel.
  if (untimed(overhead.start, overhead.end)) {
    ++out.untimed_records;
    return false;
  }
  out.overhead.push_back(OverheadRecord{overhead_kind_name(overhead.overheadKind), static_cast<int64_t>(overhead.start),
                                         static_cast<int64_t>(overhead.end)});
  return true;
}

}  // namespace

bool RecordConverter::add(const void* raw) {
  const auto* record = static_cast<const CUpti_Activity*>(raw);
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return add_kernel(out_, kernel_names_, *static_cast<const CUpti_ActivityKernel10*>(raw));
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API:
      return add_api_call(out_, record->kind, *static_cast<const CUpti_ActivityAPI*>(raw));
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = static_cast<const CUpti_ActivityMemcpy6*>(raw);
      out_.memory.push_back(MemoryRecord{memcpy_kind_name(m->copyKind), m->bytes, static_cast<int64_t>(m->start),
                                         static_cast<int64_t>(m->end), m->correlationId, m->deviceId, m->streamId});
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = static_cast<const CUpti_ActivityMemset4*>(raw);
      out_.memory.push_back(MemoryRecord{"memset", m->bytes, static_cast<int64_t>(m->start),
                                         static_cast<int64_t>(m->end), m->correlationId, m->deviceId, m->streamId});
      return true;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return add_overhead(out_, *static_cast<const CUpti_ActivityOverhead3*>(raw));
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = static_cast<const CUpti_ActivityExternalCorrelation*>(raw);
      // Only strata's own tags (CUSTOM0 the op, CUSTOM1 the fused kernel's step: push_step); another
      // library's kinds would name ops strata never numbered.
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
        out_.external.push_back(ExternalCorrelation{e->correlationId, e->externalId});
        return true;
      }
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1) {
        out_.step_tags.push_back(ExternalCorrelation{e->correlationId, e->externalId});
        return true;
      }
      break;
    }
    default:
      break;
  }
  ++ignored_;
  return false;
}

// ---- The session -------------------------------------------------------------------------------------------

namespace {

// Launch callbacks in both domains and the graph-node resource callbacks. Each is optional: without one,
// a warning says what the report loses.
void enable_callbacks_under_control(Session& s) {
  size_t callbacks_enabled = 0;
  for (CUpti_CallbackId cbid : kRuntimeLaunchCbids)
    callbacks_enabled += STRATA_CUPTI_CALL(cuptiEnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid)).ok();
  for (CUpti_CallbackId cbid : kDriverLaunchCbids)
    callbacks_enabled += STRATA_CUPTI_CALL(cuptiEnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid)).ok();
  if (callbacks_enabled == 0) warn(s, "no launch callbacks (op tags come from activity records only)");
  size_t graph_callbacks = 0;
  for (CUpti_CallbackId cbid : {CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED})
    graph_callbacks += STRATA_CUPTI_CALL(cuptiEnableCallback(1, s.subscriber, CUPTI_CB_DOMAIN_RESOURCE, cbid)).ok();
  if (graph_callbacks < 2) warn(s, "no graph node callbacks: replayed graph kernels cannot be attributed to ops");
}

// CUPTI documents this as "before initialization of CUDA"; device selection already tried before its
// probe. A late success still helps if only the context (not cuInit) is what matters.
void retry_latency_timestamps(Session& s) {
  if (g_latency.load() == LatencyTimestamps::kBeforeInit) return;
  if (const CuptiCall latency = STRATA_CUPTI_CALL(cuptiActivityEnableLatencyTimestamps(1)); !latency.ok()) {
    warn(s, "no queued/submitted kernel timestamps (" + latency.failure() + ")");
  } else {
    g_latency.store(LatencyTimestamps::kAfterInit);
    warn(s, "latency timestamps enabled only after CUDA initialised: queued/submitted may be missing");
  }
}

// The host-clock timestamp callback and the buffer callbacks. Returns "" or the failure that ends the
// session. See Note [One host clock]: CUPTI stamps its records with strata's clock, so no skew fitting is
// needed. Without it records would be on CLOCK_REALTIME and every device row would be wrong: not optional.
std::string register_activity_callbacks() {
  if (const CuptiCall c = STRATA_CUPTI_CALL(cuptiActivityRegisterTimestampCallback(&host_timestamp)); !c.ok()) {
    return c.failure();
  }
  if (const CuptiCall c = STRATA_CUPTI_CALL(cuptiActivityRegisterCallbacks(&buffer_requested, &buffer_completed));
      !c.ok()) {
    return c.failure();
  }
  return "";
}

// The activity kinds strata reads. Optional ones: the run goes on without them, with a warning, except
// where `quiet`: INTERNAL_LAUNCH_API only adds launches made outside any public API call, and not every
// CUPTI build accepts it as a kind. Returns "" or the failure of a required kind.
std::string enable_activity_kinds_under_control(Session& s) {
  struct Kind {
    CUpti_ActivityKind kind;
    const char* name;
    bool required;
    bool quiet = false;
  };
  constexpr Kind kKinds[] = {
      {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION", true},
      {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME", true},
      {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER", true},
      {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", true},
      {CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API, "INTERNAL_LAUNCH_API", false, true},
      {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", false},
      {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", false},
      {CUPTI_ACTIVITY_KIND_OVERHEAD, "OVERHEAD", false},
  };
  for (const Kind& k : kKinds) {
    const CuptiCall enabled = STRATA_CUPTI_CALL(cuptiActivityEnable(k.kind));
    if (enabled.ok()) {
      s.enabled_kinds.push_back(k.kind);
    } else if (k.required) {
      // The kind by name: "cuptiActivityEnable(k.kind)" would not say which one.
      return std::string("cuptiActivityEnable(") + k.name + ") failed: " + enabled.reason();
    } else if (!k.quiet) {
      warn(s, std::string("no ") + k.name + " records (" + enabled.reason() + ")");
    }
  }
  return "";
}

}  // namespace

std::string start_session() {
  Session& s = session();
  std::lock_guard control(s.control);
  if (s.started_once) {
    return "CUPTI was already used once in this process; strata profiles one session per process "
           "(CUPTI 13.0 gives wrong graph-launch correlation ids from the second session on)";
  }
  s.started_once = true;
  host_clock::calibrate();  // the timestamp callback below reads the calibrated clock from CUPTI's threads

  if (std::string reason = subscribe_under_control(s); !reason.empty()) return reason;
  enable_callbacks_under_control(s);
  retry_latency_timestamps(s);
  // A failure of what the session cannot do without: no GPU timing, with the call and CUPTI's error.
  std::string failure = register_activity_callbacks();
  if (failure.empty()) failure = enable_activity_kinds_under_control(s);
  if (!failure.empty()) {
    teardown_under_control(s);
    return failure;
  }
  {
    std::lock_guard lock(s.mutex);
    s.callback_correlations.reserve(size_t{1} << 16);  // no reallocation inside timed calls
    s.graph_nodes.reserve(1024);
  }
  s.active.store(true);
  return "";
}

void enable_latency_timestamps() noexcept {
  // A failure only costs the queued/submitted timestamps; start_session tries again and warns then.
  if (STRATA_CUPTI_CALL(cuptiActivityEnableLatencyTimestamps(1)).ok()) g_latency.store(LatencyTimestamps::kBeforeInit);
}

LatencyTimestamps latency_timestamps() noexcept { return g_latency.load(); }

bool session_active() noexcept { return session().active.load(std::memory_order_relaxed); }

namespace {

// One of strata's tags (CUSTOM0 the op, CUSTOM1 the fused kernel's step) onto or off CUPTI's stack for
// this thread; a failure is a warning, never the run's end (Note [CUPTI failures degrade]).
void push_tag(CUpti_ExternalCorrelationKind kind, uint64_t id) noexcept {
  if (const CuptiCall c = STRATA_CUPTI_CALL(cuptiActivityPushExternalCorrelationId(kind, id)); !c.ok()) {
    warn(session(), c.failure());
  }
}

void pop_tag(CUpti_ExternalCorrelationKind kind) noexcept {
  uint64_t last = 0;
  if (const CuptiCall c = STRATA_CUPTI_CALL(cuptiActivityPopExternalCorrelationId(kind, &last)); !c.ok()) {
    warn(session(), c.failure());
  }
}

}  // namespace

void push_op(uint64_t op_id) noexcept {
  if (!session_active()) return;
  t_current_op = op_id;
  push_tag(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, op_id);
}

void attribute_graph_nodes(const std::vector<void*>& nodes, uint32_t op_id) noexcept {
  if (!session_active()) return;
  Session& s = session();
  for (void* node : nodes) {
    uint64_t id = 0;
    if (!STRATA_CUPTI_CALL(cuptiGetGraphNodeId(static_cast<CUgraphNode>(node), &id)).ok()) continue;
    std::lock_guard lock(s.mutex);
    // A node the resource callback already reported keeps that report.
    s.graph_nodes.add(id, op_id, GraphNodeSource::kCaptureInfo);
  }
}

void pop_op() noexcept {
  if (!session_active()) return;
  t_current_op = 0;
  pop_tag(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
}

// A kind of its own (CUSTOM1), so the op's tag (CUSTOM0) stays on every call inside the step and every
// join by op is what it was (Note [Compiled kernels attributed to their group]).
void push_step(uint32_t step_tag) noexcept {
  if (!session_active()) return;
  t_current_step = step_tag;
  push_tag(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, step_tag);
}

void pop_step() noexcept {
  if (!session_active()) return;
  t_current_step = 0;
  pop_tag(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1);
}

namespace {

// Every record of the completed buffers into `out`; frees the buffers.
void convert_buffers(Session& s, const std::vector<std::pair<uint8_t*, size_t>>& buffers, DeviceTrace& out) {
  RecordConverter converter(out);
  for (auto [buffer, valid] : buffers) {
    CUpti_Activity* record = nullptr;
    for (;;) {
      const CuptiCall next = STRATA_CUPTI_CALL(cuptiActivityGetNextRecord(buffer, valid, &record));
      if (next.is(CUPTI_ERROR_MAX_LIMIT_REACHED)) break;  // the normal end of a buffer
      if (!next.ok()) {
        warn(s, next.failure() + " (rest of a buffer lost)");
        break;
      }
      converter.add(record);
      // cupti_activity.h, CUpti_ActivityOverhead3::overheadData: "Client is responsible for freeing this
      // memory". The converter only reads records (tests feed it stack-built ones), so it is freed here.
      if (record->kind == CUPTI_ACTIVITY_KIND_OVERHEAD) {
        std::free(reinterpret_cast<CUpti_ActivityOverhead3*>(record)->overheadData);
      }
    }
    std::free(buffer);
  }
}

}  // namespace

void finish_session(DeviceTrace& out) {
  Session& s = session();
  std::lock_guard control(s.control);
  if (!s.active.load()) {
    out.enabled = false;
    if (out.unavailable_reason.empty()) out.unavailable_reason = "CUPTI session not active";
    return;
  }
  // Forced: also hands over buffers that are only partly full, which is all of them after a short run.
  const CuptiCall flushed = STRATA_CUPTI_CALL(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  if (!flushed.ok()) warn(s, flushed.failure());
  size_t dropped_global = 0;
  // Never drop silently: a dropped record makes a row undercount without a sign, so when CUPTI cannot
  // count its drops, the reader is told so.
  if (const CuptiCall c = STRATA_CUPTI_CALL(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped_global)); !c.ok()) {
    dropped_global = 0;
    warn(s, c.failure() + " (records CUPTI dropped, if any, are not counted)");
  }
  teardown_under_control(s);  // one session per process: nothing is recorded after this point

  std::vector<std::pair<uint8_t*, size_t>> buffers;
  std::vector<ExternalCorrelation> callback_correlations;
  uint64_t lost_buffers = 0;
  {
    std::lock_guard lock(s.mutex);
    buffers.swap(s.completed);
    callback_correlations.swap(s.callback_correlations);
    for (const GraphNodeOrigin& g : s.graph_nodes.take()) out.graph_nodes.push_back(g);
    out.dropped_records += s.dropped_in_callbacks + dropped_global;
    s.dropped_in_callbacks = 0;
    lost_buffers = s.lost_buffers;
    s.lost_buffers = 0;
  }
  convert_buffers(s, buffers, out);
  merge_callback_correlations(out, callback_correlations);
  resolve_launches(out);
  if (const uint64_t losses = g_callback_losses.exchange(0) + lost_buffers; losses > 0) {
    warn(s, std::to_string(losses) + " callback tags or record buffers lost to allocation failures");
  }
  // A run on the GPU always launches something: a trace with no API and no kernel record measured
  // nothing, and rows of 0 us would read as measured. Say so instead.
  out.enabled = !(out.api_calls.empty() && out.kernels.empty());
  if (!out.enabled) {
    out.unavailable_reason = !flushed.ok() ? flushed.failure() : std::string("CUPTI delivered no API or kernel records");
  }
}

std::vector<std::string> session_warnings() {
  Session& s = session();
  std::lock_guard lock(s.mutex);
  return s.warnings;
}

std::string cupti_version() {
  uint32_t api = 0;
  if (const CuptiCall c = STRATA_CUPTI_CALL(cuptiGetVersion(&api)); !c.ok()) return "unavailable (" + c.reason() + ")";
  return "API " + std::to_string(api);
}

}  // namespace strata::cupti
