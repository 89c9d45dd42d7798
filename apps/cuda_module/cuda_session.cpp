// The CUDA session behind measure/device_session.h (a build with the CUDA layers; one without has only the
// CPU's, measure/devices/cpu_only.cpp). It
// owns the order of start-up, which matters:
//   0. ask CUPTI for latency timestamps (it wants that before CUDA initialises: choose_device, in
//      device_choice_cuda.cpp);
//   1. probe the runtime (cudaGetDeviceCount: loads the driver, creates no context);
//   2. start CUPTI (latency timestamps and the host-clock callback must precede the first context);
//   3. create the context, strata's stream and the allocator (runtime::cuda::init_device), timed as setup.
// After the run it flushes CUPTI into the timeline and measures what it saw into figures; cuda_report.cpp
// turns them into the report's words.
#include <unordered_set>

#include "apps/cuda_module/cuda_report.h"
#include "apps/cuda_module/device_session_cuda.h"
#include "layers/device/cupti/cupti_trace.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"
#include "lib/host_clock.h"
#include "measure/device_session.h"
#include "reports/formats/notes.h"

namespace strata::cuda_module {
namespace {

namespace rt = runtime::cuda;

// K calls captured into a CUDA Graph through the full stack; the outputs of the captured calls are kept:
// the graph writes into their memory at every replay, and the last one is what --check reads.
class GraphReplay final : public measure::Replay {
 public:
  GraphReplay(std::unique_ptr<rt::CapturedGraph> graph, std::vector<binding::IValue> outputs)
      : graph_(std::move(graph)), outputs_(std::move(outputs)) {}
  std::string kind() const override { return "CUDA Graph"; }
  void replay() override { graph_->launch(); }
  binding::IValue last_result() const override { return outputs_.back(); }

 private:
  std::unique_ptr<rt::CapturedGraph> graph_;
  std::vector<binding::IValue> outputs_;
};

// The call that broke a capture: the innermost library or runtime zone the capture was in when the stream
// stopped capturing (zones are recorded into a scratch timeline during capture for exactly this).
std::string last_library_call(const Timeline& scratch) {
  for (auto it = scratch.spans().rbegin(); it != scratch.spans().rend(); ++it) {
    if (it->layer == Layer::kLibrary || it->layer == Layer::kRuntime) return it->name;
  }
  return "an unknown call";
}

class CudaSession final : public measure::DeviceSession {
 public:
  CudaSession(Device device, const measure::SessionOptions& options) : device_(device), options_(options) {
    if (options.device_timing) {
      cupti_reason_ = cupti::start_session();
    } else {
      cupti_reason_ = "--no-device-timing: CUPTI was not started";
    }
    const int64_t t0 = host_clock::now_ns();
    rt::init_device(device.index);
    context_ns_ = double(host_clock::now_ns() - t0);
    kernels::cuda::set_tf32(options.tf32);
    kernels::cuda::set_gemm_algo_request({options.gemm_algos, options.gemm_algo, options.gemm_algo_time});
    (void)kernels::cuda::take_gemm_candidate_lists();  // an earlier session's (the Python package's), not this run's
  }

  void begin_call(uint32_t op_id) override {
    // The cold call is the first call only if nothing ran before it (`strata compare` warms up untraced,
    // and its first traced call is not cold).
    if (cold_op_ == 0 && !ran_untraced_) cold_op_ = op_id;
    if (cupti_reason_.empty()) {
      cupti::push_op(op_id);
      pushed_ = true;
    }
  }

  void end_call() override {
    if (pushed_) {
      cupti::pop_op();
      pushed_ = false;
    }
  }

  // Inside a call: the fused kernel's tag beside the op's (Note [Compiled kernels attributed to their
  // group] in reports/model/compiled_attribution.h).
  void begin_step(uint32_t step_tag) override {
    if (cupti_reason_.empty()) {
      cupti::push_step(step_tag);
      step_pushed_ = true;
    }
  }

  void end_step() override {
    if (step_pushed_) {
      cupti::pop_step();
      step_pushed_ = false;
    }
  }

  void synchronize() override {
    if (cold_op_ == 0) ran_untraced_ = true;
    rt::synchronize(device_.index);
  }

  std::unique_ptr<measure::Replay> capture(const std::function<binding::IValue()>& call_once, const std::vector<uint32_t>& op_ids,
                                  measure::CaptureCost& cost) override {
    std::vector<binding::IValue> outputs;
    Timeline scratch(4096);
    std::unordered_set<cudaGraphNode_t> seen;
    auto graph = std::make_unique<rt::CapturedGraph>(device_.index, [&] {
      tracing::ActiveScope scope(&scratch);
      for (size_t i = 0; i < op_ids.size(); ++i) {
        {
          measure::OpCall tag(*this, op_ids[i]);
          outputs.push_back(call_once());
        }
        if (!rt::capture_valid(device_.index)) {
          throw Error("call " + std::to_string(i + 1) + " of " + std::to_string(op_ids.size()) + " (" +
                      last_library_call(scratch) + ") invalidated the stream capture; this op cannot be replayed "
                      "from a CUDA Graph");
        }
        // The nodes this call added belong to it, whether or not CUPTI's node callbacks said so.
        std::vector<void*> fresh;
        for (cudaGraphNode_t node : rt::capturing_graph_nodes(device_.index))
          if (seen.insert(node).second) fresh.push_back(node);
        if (cupti_reason_.empty()) cupti::attribute_graph_nodes(fresh, op_ids[i]);
      }
    });
    cost.capture_ns = graph->capture_ns();
    cost.instantiate_ns = graph->instantiate_ns();
    return std::make_unique<GraphReplay>(std::move(graph), std::move(outputs));
  }

  void finish(Timeline& timeline) override {
    // The whole device, not only strata's stream: see rt::synchronize_device.
    rt::synchronize_device(device_.index);
    if (cupti_reason_.empty()) {
      cupti::finish_session(timeline.device);
      // CUPTI ran but delivered nothing usable: the reason goes wherever "GPU timing is off" is said.
      if (!timeline.device.enabled) cupti_reason_ = timeline.device.unavailable_reason;
    } else {
      timeline.device.enabled = false;
      timeline.device.unavailable_reason = cupti_reason_;
    }
    reports::add_device_trace_figures(figures_, timeline.device);
    notes_ = reports::device_trace_notes(figures_, timeline.device.unavailable_reason);
    for (const std::string& w : cupti::session_warnings()) notes_.push_back("CUPTI: " + w);
    if (cupti_reason_.empty()) {
      const cupti::LatencyTimestamps latency = cupti::latency_timestamps();
      figures_.set("cupti.latency_timestamps", latency != cupti::LatencyTimestamps::kOff ? 1 : 0, "bool");
      figures_.set("cupti.latency_timestamps_before_init", latency == cupti::LatencyTimestamps::kBeforeInit ? 1 : 0,
                   "bool");
    }
    if (cold_op_ != 0) {
      reports::add_cold_call_figures(figures_, timeline, cold_op_, context_ns_);
      if (std::string cold = reports::cold_call_note(figures_); !cold.empty()) notes_.push_back(cold);
    }
    device_enabled_ = timeline.device.enabled;
    const rt::AllocatorStats stats = rt::allocator_stats(device_.index);
    figures_.set("allocator.cuda_mallocs", double(stats.cuda_mallocs), "count");
    figures_.set("allocator.bytes_reserved", double(stats.bytes_reserved), "bytes");
    figures_.set("allocator.cache_hits", double(stats.cache_hits), "count");
    for (const Annotation& a : timeline.annotations())
      if (a.kind == AnnotationKind::kPlan) plans_.push_back(a.text);
    gemm_candidates_ = kernels::cuda::take_gemm_candidate_lists();
  }

  std::vector<reports::GpuProperties> trace_gpus() override {
    const rt::DeviceInfo info = rt::device_info(device_.index);
    reports::GpuProperties gpu;
    gpu.id = device_.index;
    gpu.name = info.name;
    gpu.sm_count = info.sm_count;
    gpu.compute_major = info.cc_major;
    gpu.compute_minor = info.cc_minor;
    gpu.total_memory_bytes = info.total_bytes;
    return {gpu};
  }

  void describe(reports::TraceReport& report) override {
    describe_cuda_run(report, {device_, device_enabled_, cupti_reason_, notes_, figures_, plans_, gemm_candidates_});
  }
 private:
  Device device_;
  measure::SessionOptions options_;
  std::string cupti_reason_;  // why CUPTI is off; "" when it runs
  bool pushed_ = false;
  bool step_pushed_ = false;  // begin_step pushed a step tag that end_step must pop
  bool ran_untraced_ = false;
  bool device_enabled_ = false;
  uint32_t cold_op_ = 0;
  double context_ns_ = 0;
  std::vector<std::string> notes_;
  reports::Figures figures_;  // what finish() measured, for describe()
  std::vector<std::string> plans_;
  std::vector<kernels::cuda::GemmCandidateList> gemm_candidates_;  // --algos / --algo
};

}  // namespace

std::unique_ptr<measure::DeviceSession> open_device_session(Device device, const measure::SessionOptions& options) {
  if (device.is_cuda()) return std::make_unique<CudaSession>(device, options);
  if (options.tf32) throw UsageError("--tf32 selects TF32 tensor-core math and needs a CUDA device");
  return std::make_unique<measure::DeviceSession>();
}

}  // namespace strata::cuda_module
