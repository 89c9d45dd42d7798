// The Timeline: every host span of a traced run plus the device records the CUPTI layer converted into
// strata's own structs. Layers write spans through zones (lib/zone.h); reports read the finished
// timeline and never call back into layers. All times share one axis: see Note [One host clock].
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lib/host_clock.h"

namespace strata {

// The layer that owns a span; the breakdown has one row per layer (dispatch one per key).
enum class Layer : uint8_t {
  kFrontend,  // tensor creation, spec parsing (setup, not per call)
  // The two layers above the binding when an op is called from Python (Note [The python and pybind11
  // rows] in apps/python/probes.h): the frontend function from its entry to the call into the
  // extension, then the pybind11 crossing (overload resolution, argument and result conversion).
  kPython,
  kPybind11,
  kBinding,   // boxed arguments matched against the schema
  kDispatch,  // key-set computation, table lookup, wrapper-key work (span name = the key)
  kLibrary,   // the backend kernel's host side: BLAS, cuBLAS/cuDNN host work, allocation of outputs
  kRuntime,   // synchronisation, graph capture/instantiate/launch as seen from the host
  kHarness,   // strata's own measurement loop (iterations), never part of an op's breakdown
};
const char* layer_name(Layer layer);

// What kind of one-time work a zone is, for the cold-call figures: the layer that opens a zone knows
// whether it creates a handle, searches for an algorithm or allocates device memory; reports count zones
// by this tag instead of matching the names other layers chose.
enum class ZoneKind : uint8_t {
  kPlain,
  kHandleCreation,   // cublasCreate, cudnnCreate, ...
  kAlgorithmSearch,  // cuDNN Find, cuBLASLt heuristics
  kDeviceMalloc,     // cudaMalloc behind the caching allocator
};

struct Span {
  uint64_t begin = 0;  // raw host_clock ticks; Timeline::ns() converts
  uint64_t end = 0;
  int32_t parent = -1;  // index into Timeline::spans(), -1 for a root
  uint32_t op_id = 0;   // 0 = outside any op call
  Layer layer = Layer::kHarness;
  ZoneKind kind = ZoneKind::kPlain;
  const char* name = "";  // static string: zones never allocate
};

// ---- Device-side records, produced by layers/device/cupti from CUPTI activity records ------------
enum class ApiDomain : uint8_t { kRuntime, kDriver };

struct ApiCallRecord {  // a CUDA runtime or driver API call (CUPTI RUNTIME / DRIVER activity)
  std::string name;     // "cuLaunchKernelEx", "cudaGraphLaunch", ...
  ApiDomain domain = ApiDomain::kRuntime;
  uint32_t cbid = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t correlation_id = 0;
  uint32_t thread_id = 0;
  // What the call returned (cudaError_t or CUresult): a launch that returned an error put nothing on the
  // GPU, so no kernel record is to be expected for it (a library's algorithm search tries configurations
  // the device may refuse).
  uint32_t return_value = 0;
  bool is_launch = false;  // a call that puts work on a stream (kernel launch, graph launch)
  // An INTERNAL_LAUNCH_API record: a driver launch outside any public call. It is a launch only when a
  // kernel or memory record shares its correlation id (cupti::resolve_internal_launches).
  bool internal_launch = false;
};

struct KernelRecord {  // one GPU kernel execution (CUPTI CONCURRENT_KERNEL activity)
  std::string name;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t queued_ns = -1;     // -1 when CUPTI did not provide latency timestamps
  int64_t submitted_ns = -1;
  uint32_t correlation_id = 0;
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  int32_t grid[3] = {0, 0, 0};
  int32_t block[3] = {0, 0, 0};
  int32_t registers_per_thread = 0;
  int32_t static_shared_bytes = 0;
  int32_t dynamic_shared_bytes = 0;
  uint64_t graph_node_id = 0;  // non-zero for kernels replayed from a CUDA Graph
  uint32_t graph_id = 0;
};

struct MemoryRecord {  // memcpy / memset on the GPU (CUPTI MEMCPY / MEMSET activity)
  std::string kind;  // "HtoD", "DtoH", "DtoD", "memset", ...
  uint64_t bytes = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t correlation_id = 0;
  uint32_t device_id = 0;
  uint32_t stream_id = 0;
};

struct OverheadRecord {  // CUPTI OVERHEAD activity: work the tool or the driver did on our behalf
  std::string kind;      // "lazy module load", "CUPTI buffer flush", ...
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct ExternalCorrelation {  // CUPTI EXTERNAL_CORRELATION: which op a CUDA API call belonged to
  uint32_t correlation_id = 0;
  uint64_t external_id = 0;  // = Span::op_id
};

// Who told strata which op created a graph node: CUPTI's GRAPHNODE_CREATED callback (a clone inherits its
// original's source), or the fallback that reads the capturing graph's nodes after each captured op.
enum class GraphNodeSource : uint8_t { kResourceCallback, kCaptureInfo };

struct GraphNodeOrigin {  // recorded at capture time: which op created a graph node
  uint64_t graph_node_id = 0;
  uint32_t op_id = 0;
  GraphNodeSource source = GraphNodeSource::kResourceCallback;
  // The step tag pushed when the node was created (0: none): which fused kernel of a compiled forward
  // made it (Note [Compiled kernels attributed to their group] in reports/model/compiled_attribution.h).
  uint32_t step_tag = 0;
};

struct DeviceTrace {
  bool enabled = false;            // CUPTI collected records for this run
  std::string unavailable_reason;  // why not, in one line, when !enabled
  uint64_t dropped_records = 0;    // cuptiActivityGetNumDroppedRecords after the flush
  uint64_t untimed_records = 0;    // kernel / API / overhead records CUPTI delivered without timestamps (left out)
  std::vector<ApiCallRecord> api_calls;
  std::vector<KernelRecord> kernels;
  std::vector<MemoryRecord> memory;
  std::vector<OverheadRecord> overhead;
  std::vector<ExternalCorrelation> external;
  // The same for step tags (CUSTOM1): which fused kernel of a compiled forward a call belonged to; its
  // external_id is the tag (Note [Compiled kernels attributed to their group]).
  std::vector<ExternalCorrelation> step_tags;
  std::vector<GraphNodeOrigin> graph_nodes;
};

// Note [Annotations on the timeline]
// What a layer decided while a call ran, in words: a library's plan for a shape (cuDNN's chosen
// algorithm, whether cuBLASLt gave an epilogue kernel). The layer writes it into the active timeline
// (tracing::annotate), like a span; reports read it from the finished timeline. No layer keeps a
// process-wide log that the app reaches into.
enum class AnnotationKind : uint8_t { kPlan };

struct Annotation {
  AnnotationKind kind = AnnotationKind::kPlan;
  uint32_t op_id = 0;  // the call that made the decision
  std::string text;
};

// Note [Interruptible pre-faulting]
// A run's span buffer is reserved up front and may be GiBs (compare allows up to half of the free host
// memory: rounds x K forwards x every zone). Touching that many pages takes seconds to tens of seconds,
// and a Ctrl-C in that time took effect only after the last page: the one place the run was deaf to it.
// So pages are touched in chunks, and a reservation made with a check (Timeline::reserve_more's
// `between_chunks`, strata's stop_if_interrupted) runs it between chunks. The check may throw: the
// half-touched block is freed, and std::vector::reserve leaves the buffer as it was. Only a reservation
// asks for the check; the buffer growing under a zone never throws from it.
namespace detail {
inline thread_local void (*t_prefault_check)() = nullptr;
void prefault(void* p, size_t bytes);
}  // namespace detail

// Allocates and touches every page up front: a zone must never take a page fault in the middle of the
// call it is timing (a fresh 4 KiB page costs a microsecond or more, far more than the zone itself).
template <typename T>
struct PrefaultingAllocator {
  using value_type = T;
  PrefaultingAllocator() = default;
  template <typename U>
  PrefaultingAllocator(const PrefaultingAllocator<U>&) {}
  T* allocate(size_t n) {
    T* p = std::allocator<T>().allocate(n);
    try {
      detail::prefault(p, n * sizeof(T));  // Note [Interruptible pre-faulting]
    } catch (...) {
      std::allocator<T>().deallocate(p, n);
      throw;
    }
    return p;
  }
  void deallocate(T* p, size_t n) { std::allocator<T>().deallocate(p, n); }
  friend bool operator==(const PrefaultingAllocator&, const PrefaultingAllocator&) { return true; }
};
using SpanVector = std::vector<Span, PrefaultingAllocator<Span>>;

class Timeline {
 public:
  explicit Timeline(size_t reserve_spans = 1 << 14);

  int32_t open(Layer layer, const char* name, ZoneKind kind = ZoneKind::kPlain) {
    if (boundary_ != nullptr) [[unlikely]]
      boundary_(boundary_context_, current_, false);
    int32_t index = static_cast<int32_t>(spans_.size());
    spans_.push_back(Span{host_clock::ticks(), 0, current_, op_id_, layer, kind, name});
    current_ = index;
    if (boundary_ != nullptr) [[unlikely]]
      boundary_(boundary_context_, index, true);
    return index;
  }
  void close(int32_t index) noexcept { close_at(index, host_clock::ticks()); }
  // Closes with a reading already taken: two spans that end together cost one clock read.
  void close_at(int32_t index, uint64_t end) noexcept {
    if (boundary_ != nullptr) [[unlikely]]
      boundary_(boundary_context_, index, false);
    spans_[static_cast<size_t>(index)].end = end;
    current_ = spans_[static_cast<size_t>(index)].parent;
    if (boundary_ != nullptr) [[unlikely]]
      boundary_(boundary_context_, current_, true);
  }
  void rename(int32_t index, const char* name) noexcept { spans_[static_cast<size_t>(index)].name = name; }

  // Spans opened after this belong to op `op_id` (0 = none). The harness numbers calls 1, 2, ...
  void set_op(uint32_t op_id) noexcept { op_id_ = op_id; }
  uint32_t op() const noexcept { return op_id_; }

  // Makes room (pre-faulted) for `spans` more spans, so that no zone in the timed region pays for the
  // buffer growing under it. `between_chunks`, when given, runs between chunks of pages and may throw to
  // stop (Note [Interruptible pre-faulting]); the timeline is then as before the call.
  void reserve_more(size_t spans, void (*between_chunks)() = nullptr);

  const SpanVector& spans() const { return spans_; }
  int64_t ns(uint64_t ticks) const noexcept { return host_clock::ticks_to_ns(ticks); }
  int64_t begin_ns(const Span& s) const noexcept { return ns(s.begin); }
  int64_t end_ns(const Span& s) const noexcept { return ns(s.end); }

  // For tests and for converting other sources: append a finished span with times in ns.
  // Only valid when the clock source is steady_clock or for timelines built by hand (see tests).
  int32_t add_span(Layer layer, const char* name, uint64_t begin, uint64_t end, int32_t parent,
                   uint32_t op_id, ZoneKind kind = ZoneKind::kPlain);

  // See Note [Annotations on the timeline]. Not on the timed path: layers annotate once per decision.
  void annotate(AnnotationKind kind, std::string text) { annotations_.push_back({kind, op_id_, std::move(text)}); }
  void add_annotation(Annotation annotation) { annotations_.push_back(std::move(annotation)); }
  const std::vector<Annotation>& annotations() const { return annotations_; }

  DeviceTrace device;

  // Called at every span boundary while set: first with `resumed` false and the span whose self work
  // ends there (-1: none), then, after the timeline's own bookkeeping, with `resumed` true and the span
  // whose self work starts. Only `--count instructions` sets one (Note [Instructions per row] in
  // measure/instruction_count.h); unset, a zone pays one more predictable branch and only while traced.
  using BoundaryHook = void (*)(void* context, int32_t span, bool resumed) noexcept;
  void set_boundary_hook(BoundaryHook hook, void* context) noexcept {
    boundary_ = hook;
    boundary_context_ = context;
  }

 private:
  BoundaryHook boundary_ = nullptr;
  void* boundary_context_ = nullptr;
  std::vector<Annotation> annotations_;
  SpanVector spans_;
  int32_t current_ = -1;
  uint32_t op_id_ = 0;
};

// The timeline zones record into on this thread; nullptr = tracing off (zones cost one branch).
namespace tracing {
inline thread_local Timeline* t_active = nullptr;
inline Timeline* active() noexcept { return t_active; }
// RAII: activates a timeline for the scope, restores the previous one after.
class ActiveScope {
 public:
  explicit ActiveScope(Timeline* timeline) noexcept : previous_(t_active) { t_active = timeline; }
  ~ActiveScope() { t_active = previous_; }
  ActiveScope(const ActiveScope&) = delete;
  ActiveScope& operator=(const ActiveScope&) = delete;

 private:
  Timeline* previous_;
};
// Into the active timeline; nothing when tracing is off (the decision is then not reported).
inline void annotate(AnnotationKind kind, std::string text) {
  if (Timeline* t = t_active) t->annotate(kind, std::move(text));
}
}  // namespace tracing

}  // namespace strata
