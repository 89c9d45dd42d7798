// layers/runtime/cuda: what strata needs from the CUDA runtime, in one place. Probing (never throws),
// device discovery, one stream per device, events, the caching device allocator behind lib's Allocator,
// host <-> device copies, and the checking macro every CUDA runtime call goes through (the cuBLAS and
// cuDNN ones live with the kernels that call those libraries: layers/kernels/cuda/library_check.h).
//
// Nothing here links libcuda, cuBLAS or cuDNN: the program must start, and say why there is no GPU, on a machine without
// a driver. The runtime (libcudart, shared) loads the driver itself and reports its absence as an error
// code, which probe() turns into one line of text.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "layers/runtime/cuda/per_device.h"
#include "lib/dtype.h"
#include "lib/storage.h"

namespace strata::runtime::cuda {

// ---- Probing and discovery ---------------------------------------------------------------------------

struct Probe {
  bool usable = false;
  int device_count = 0;
  int error_code = 0;  // the cudaError_t of cudaGetDeviceCount, 0 when it succeeded
  std::string reason;  // one line, when !usable: "no CUDA driver (cudaErrorInsufficientDriver)"
};

// Asks the runtime how many devices it sees. Never throws; the answer is computed once per process
// (the runtime caches its own driver load, so a second answer could not differ anyway).
Probe probe() noexcept;

// "" when strata has code for device `index`, else why not (no kernel image for its compute capability).
std::string unsupported_reason(int index);

// "" when kernels built for `architectures` (CMake's CUDA_ARCHITECTURES, ';' or ',' separated:
// "80-real,90-real,120-virtual")
// run on a device of compute capability major.minor, else why not. A real architecture runs on devices of
// the same major and an equal or higher minor; a virtual one (PTX) is JIT-compiled for any device at or
// above it.
std::string kernel_image_problem(int major, int minor, const std::string& architectures);

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t total_bytes = 0, free_bytes = 0;
  int clock_khz = 0;         // peak SM clock
  int memory_clock_khz = 0;  // peak memory clock
  int memory_bus_bits = 0;
  std::string pci_bus_id;
  int driver_version = 0;   // CUDA version the driver supports, 13000 = 13.0
  int runtime_version = 0;  // libcudart in use
  // The library versions are kernels::cuda::library_versions(): the runtime does not link those libraries.
};

// Properties of device `index`. Creates the device's primary context (free memory needs one).
DeviceInfo device_info(int index);

std::string cuda_version_string(int version);  // 13000 -> "13.0"

// ---- Devices, streams, events -----------------------------------------------------------------------

// Creates the context and strata's stream on device `index` and registers the caching allocator for
// DeviceType::kCUDA. Idempotent. Context creation is setup, so callers do it before the first traced call.
void init_device(int index);

// Makes `index` current on this thread (cheap when it already is: no runtime call).
void set_current_device(int index);

// strata's stream on `index` (init_device first). All of strata's work on a device goes to this one
// stream, which is what lets the caching allocator reuse a freed block without an event.
cudaStream_t stream(int index);

// Blocks until everything strata queued on `index` has finished.
void synchronize(int index);

// Blocks until all work on device `index` has finished, on every stream: libraries may use streams of
// their own, and CUPTI's forced flush hands over incomplete records for work still running.
void synchronize_device(int index);

size_t free_bytes(int index);

// A CUDA event on the current device, for GPU-side intervals (used by the raw-library baseline).
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t stream);
  void synchronize();
  cudaEvent_t get() const { return event_; }
  // Milliseconds between two recorded events (both must have completed).
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  cudaEvent_t event_ = nullptr;
};

// ---- Memory ---------------------------------------------------------------------------------------------

// The caching device allocator (one per process). Freed blocks go back to a per-device free list keyed by
// rounded size, so steady-state calls never reach cudaMalloc; a miss runs cudaMalloc inside a Runtime zone.
Allocator& caching_allocator();

struct AllocatorStats {
  uint64_t cuda_mallocs = 0;   // cache misses
  uint64_t cache_hits = 0;
  uint64_t bytes_reserved = 0; // held from cudaMalloc, in use or cached
  uint64_t bytes_cached = 0;   // free, waiting in the cache
};
AllocatorStats allocator_stats(int index);

// Blocks freed while this object holds them are kept out of the cache until it is destroyed: a CUDA Graph
// captured meanwhile still uses them (workspaces, intermediates) at every replay. Give each CapturedGraph
// one and destroy it with the graph.
class HeldBlocks {
 public:
  explicit HeldBlocks(int index);
  ~HeldBlocks();
  HeldBlocks(const HeldBlocks&) = delete;
  HeldBlocks& operator=(const HeldBlocks&) = delete;
  void stop();  // frees from now on go to the cache again; what was held stays held

 private:
  int index_;
  bool holding_ = true;
  std::vector<std::pair<void*, size_t>> blocks_;
};

// The rounding the cache applies: 512 B granules below 1 MiB, 2 MiB granules above.
size_t rounded_allocation_size(size_t nbytes);

// ---- CUDA Graphs --------------------------------------------------------------------------------------------

// Captures what `issue` enqueues on strata's stream of device `index` (K calls through the full stack:
// binding, dispatch, library, launch) into a CUDA Graph, and instantiates it. Callers check
// capture_valid() between their calls to name the one that broke a capture. Anything that cannot be
// captured ends the capture and throws Error naming what failed.
class CapturedGraph {
 public:
  CapturedGraph(int index, const std::function<void()>& issue);
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  void launch();  // cudaGraphLaunch on strata's stream, inside a Runtime-layer zone
  size_t nodes() const { return nodes_; }
  double capture_ns() const { return capture_ns_; }
  double instantiate_ns() const { return instantiate_ns_; }

 private:
  int index_;
  HeldBlocks held_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
  double capture_ns_ = 0;
  double instantiate_ns_ = 0;
};

// False once something on strata's stream of `index` has invalidated the capture in progress (and when
// nothing is being captured).
bool capture_valid(int index) noexcept;

// True while a capture is in progress on strata's stream of `index`, valid or already invalidated:
// what must not run then (a timed algorithm search, a free-memory query) asks this first.
bool capturing(int index) noexcept;

// The nodes of the graph being captured on strata's stream of `index`; empty when nothing is being
// captured or the query fails (it only feeds attribution, never the capture itself).
std::vector<cudaGraphNode_t> capturing_graph_nodes(int index) noexcept;

// ---- Checking ---------------------------------------------------------------------------------------------
// nvbench's NVBENCH_CUDA_CALL is the model: the error carries file, line, the call's text and the library's
// own error name and string. Out-of-memory statuses throw UnavailableError (exit 4), everything else Error.

[[noreturn]] void throw_cuda_error(int error, const char* call, const char* file, int line);

// The one message format of every checking macro (this one and layers/kernels/cuda/library_check.h):
// "cudaMalloc(&ptr, size) failed: <what> [layers/runtime/cuda/caching_allocator.cpp:97]".
std::string call_failure(const char* call, const std::string& what, const char* file, int line);

}  // namespace strata::runtime::cuda

#define STRATA_CUDA_CHECK(call)                                                                       \
  do {                                                                                                \
    const cudaError_t strata_status_ = (call);                                                        \
    if (strata_status_ != cudaSuccess) [[unlikely]]                                                   \
      ::strata::runtime::cuda::throw_cuda_error(static_cast<int>(strata_status_), #call, __FILE__, __LINE__); \
  } while (0)
