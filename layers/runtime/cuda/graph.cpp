// CUDA Graph capture and replay of strata's own calls (`strata compare` on a GPU).
#include <cuda_runtime_api.h>

#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"
#include "lib/host_clock.h"
#include "lib/zone.h"

namespace strata::runtime::cuda {

namespace {

// strata's stream of `index`, or nullptr for a device that was never initialised (stream() throws then,
// and stream() never returns nullptr otherwise): such a device captures nothing.
cudaStream_t initialised_stream(int index) noexcept {
  try {
    return stream(index);
  } catch (const std::exception&) {
    return nullptr;
  }
}

// The capture status of strata's stream of `index`: None as well for a device never initialised or a
// failed query (whose error is cleared, so no later cudaGetLastError reports it).
cudaStreamCaptureStatus capture_status(int index) noexcept {
  const cudaStream_t s = initialised_stream(index);
  if (s == nullptr) return cudaStreamCaptureStatusNone;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return cudaStreamCaptureStatusNone;
  }
  return status;
}

}  // namespace

bool capture_valid(int index) noexcept { return capture_status(index) == cudaStreamCaptureStatusActive; }

bool capturing(int index) noexcept { return capture_status(index) != cudaStreamCaptureStatusNone; }

std::vector<cudaGraphNode_t> capturing_graph_nodes(int index) noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  size_t count = 0;
  const cudaStream_t s = initialised_stream(index);
  if (s == nullptr) return {};
  if (cudaStreamGetCaptureInfo(s, &status, nullptr, &graph) != cudaSuccess ||
      status != cudaStreamCaptureStatusActive || graph == nullptr ||
      cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0 && cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  nodes.resize(count);
  return nodes;
}

CapturedGraph::CapturedGraph(int index, const std::function<void()>& issue) : index_(index), held_(index) {
  set_current_device(index);
  const cudaStream_t s = stream(index);
  // Everything strata would run before the capture has run: a capture must not pick up other work.
  STRATA_CUDA_CHECK(cudaStreamSynchronize(s));
  const int64_t t0 = host_clock::now_ns();
  // Relaxed: the caching allocator may still need a fresh block mid-capture (cudaMalloc is refused in the
  // stricter modes), and strata issues nothing on other streams or threads that could leak into the graph.
  STRATA_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  // Leave capture mode whatever happened, and say the failure was during capture. An UnavailableError
  // (device out of memory) stays one, so the exit code still says "this machine cannot serve it".
  auto abandon_capture = [&] {
    cudaGraph_t broken = nullptr;
    (void)cudaStreamEndCapture(s, &broken);
    if (broken != nullptr) (void)cudaGraphDestroy(broken);
    (void)cudaGetLastError();
    held_.stop();
  };
  try {
    issue();
  } catch (const UnavailableError& e) {
    abandon_capture();
    throw UnavailableError(std::string("CUDA Graph capture failed: ") + e.what());
  } catch (const std::exception& e) {
    abandon_capture();
    throw Error(std::string("CUDA Graph capture failed: ") + e.what());
  }
  const cudaError_t ended = cudaStreamEndCapture(s, &graph_);
  held_.stop();
  if (ended != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(std::string("CUDA Graph capture failed: cudaStreamEndCapture: ") + cudaGetErrorName(ended) + " (" +
                cudaGetErrorString(ended) + "): a call made during capture cannot be captured");
  }
  const int64_t t1 = host_clock::now_ns();
  // The destructor does not run when the constructor throws: release the captured graph on failure.
  cudaError_t e = cudaGraphGetNodes(graph_, nullptr, &nodes_);
  if (e == cudaSuccess) e = cudaGraphInstantiate(&exec_, graph_, 0);
  if (e != cudaSuccess) {
    (void)cudaGraphDestroy(graph_);
    graph_ = nullptr;
    throw_cuda_error(static_cast<int>(e), "cudaGraphInstantiate(&exec_, graph_, 0)", __FILE__, __LINE__);
  }
  capture_ns_ = double(t1 - t0);
  instantiate_ns_ = double(host_clock::now_ns() - t1);
}

CapturedGraph::~CapturedGraph() {
  // The held blocks go back to the cache when held_ is destroyed: wait until no replay still uses them.
  (void)cudaStreamSynchronize(stream(index_));
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
}

void CapturedGraph::launch() {
  STRATA_ZONE(zone, Layer::kRuntime, "cudaGraphLaunch");
  STRATA_CUDA_CHECK(cudaGraphLaunch(exec_, stream(index_)));
}

}  // namespace strata::runtime::cuda
