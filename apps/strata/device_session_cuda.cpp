// Device selection and sessions for a build with the CUDA layers (the no-CUDA build compiles
// device_session_cpu.cpp instead). The CUDA session owns the order of start-up, which matters:
//   0. ask CUPTI for latency timestamps (it wants that before CUDA initialises: choose_device);
//   1. probe the runtime (cudaGetDeviceCount: loads the driver, creates no context);
//   2. start CUPTI (latency timestamps and the host-clock callback must precede the first context);
//   3. create the context, strata's stream and the allocator (runtime::cuda::init_device), timed as setup.
// After the run it flushes CUPTI into the timeline and turns what it saw into notes for the report.
#include <algorithm>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "apps/strata/commands.h"
#include "apps/strata/device_session.h"
#include "layers/device/cupti/cupti_trace.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"
#include "lib/host_clock.h"
#include "reports/notes.h"

namespace strata::app {
namespace {

namespace rt = runtime::cuda;

std::string mhz(int khz) { return std::to_string(khz / 1000) + " MHz"; }

// K calls captured into a CUDA Graph through the full stack; the outputs of the captured calls are kept:
// the graph writes into their memory at every replay, and the last one is what --check reads.
class GraphReplay final : public Replay {
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

class CudaSession final : public DeviceSession {
 public:
  CudaSession(Device device, const SessionOptions& options) : device_(device), options_(options) {
    if (options.device_timing) {
      cupti_reason_ = cupti::start_session();
    } else {
      cupti_reason_ = "--no-device-timing: CUPTI was not started";
    }
    const int64_t t0 = host_clock::now_ns();
    rt::init_device(device.index);
    context_ns_ = double(host_clock::now_ns() - t0);
    kernels::cuda::set_tf32(options.tf32);
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

  void synchronize() override {
    if (cold_op_ == 0) ran_untraced_ = true;
    rt::synchronize(device_.index);
  }

  std::unique_ptr<Replay> capture(const std::function<binding::IValue()>& call_once, const std::vector<uint32_t>& op_ids,
                                  CaptureCost& cost) override {
    std::vector<binding::IValue> outputs;
    Timeline scratch(4096);
    std::unordered_set<cudaGraphNode_t> seen;
    auto graph = std::make_unique<rt::CapturedGraph>(device_.index, [&] {
      tracing::ActiveScope scope(&scratch);
      for (size_t i = 0; i < op_ids.size(); ++i) {
        {
          OpCall tag(*this, op_ids[i]);
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
    notes_ = cupti::trace_notes(timeline.device);
    for (const std::string& w : cupti::session_warnings()) notes_.push_back("CUPTI: " + w);
    reports::add_device_trace_figures(figures_, timeline.device);
    if (cold_op_ != 0) {
      reports::add_cold_call_figures(figures_, timeline, cold_op_, context_ns_);
      if (std::string cold = reports::cold_call_note(figures_); !cold.empty()) notes_.push_back(cold);
    }
    device_enabled_ = timeline.device.enabled;
  }

  void describe(reports::TraceReport& report) override {
    const rt::DeviceInfo info = rt::device_info(device_.index);
    report.device = device_.str() + " " + info.name;
    auto& env = report.env.device;
    env.emplace_back("name", info.name);
    env.emplace_back("index", device_.str());
    env.emplace_back("SMs", std::to_string(info.sm_count));
    env.emplace_back("compute capability", std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor));
    env.emplace_back("memory", format_bytes(double(info.total_bytes)) + " (" + format_bytes(double(info.free_bytes)) + " free)");
    env.emplace_back("SM clock (peak)", mhz(info.clock_khz));
    env.emplace_back("memory clock (peak)", mhz(info.memory_clock_khz));
    env.emplace_back("memory bus", std::to_string(info.memory_bus_bits) + " bit");
    env.emplace_back("PCI bus", info.pci_bus_id);
    env.emplace_back("CUDA driver", rt::cuda_version_string(info.driver_version));
    env.emplace_back("CUDA runtime", rt::cuda_version_string(info.runtime_version));
    env.emplace_back("cuBLAS", info.cublas_version);
    env.emplace_back("cuBLASLt", info.cublaslt_version);
    env.emplace_back("cuDNN", info.cudnn_version);
    env.emplace_back("CUPTI", cupti::cupti_version());
    env.emplace_back("GPU timing", device_enabled_ ? "CUPTI activity records" : "off: " + cupti_reason_);

    const std::string dtype_text = report.dtype.substr(0, report.dtype.find(' '));
    if (const std::optional<DType> dtype = parse_dtype(dtype_text)) {
      const rt::PeakFlops peak = rt::published_peak(info.name, info.cc_major, info.cc_minor, info.sm_count, *dtype,
                                                     options_.tf32);
      report.peak_flops = peak.flops;
      report.peak_source = peak.source;
    }

    if (device_enabled_) {
      using reports::RowKind;
      report.describe(RowKind::kQueue, "", "launch call begin -> first kernel start");
      for (const reports::BreakdownRow& row : report.steady.rows) {
        if (row.kind == RowKind::kLaunch && !row.names.empty()) {
          std::string names;
          for (const std::string& n : row.names) names += (names.empty() ? "" : " > ") + n;
          report.describe(RowKind::kLaunch, "", names + " (CUPTI API records)");
        }
        if (row.kind == RowKind::kGpu && !row.names.empty()) {
          report.describe(RowKind::kGpu, "",
                          row.names.front() + (row.names.size() > 1 ? " (+" + std::to_string(row.names.size() - 1) + " more)" : ""));
        }
      }
    } else {
      const std::string na = "n/a: GPU timing is off (" + cupti_reason_ + ")";
      for (reports::RowKind row : {reports::RowKind::kLaunch, reports::RowKind::kQueue, reports::RowKind::kGpu})
        report.describe_na(row, na);
    }

    for (const reports::Figure& f : figures_.all()) report.figures.set(f.name, f.value, f.unit);
    for (const std::string& n : notes_) report.notes.push_back(n);
    for (const std::string& plan : kernels::cuda::plan_descriptions()) report.notes.push_back("plan: " + plan);
    if (std::string note = reports::unmatched_launches_note(report.figures); !note.empty()) report.notes.push_back(note);
    if (std::string note = reports::unmatched_kernels_note(report.figures); !note.empty()) report.notes.push_back(note);
    const rt::AllocatorStats stats = rt::allocator_stats(device_.index);
    report.figures.set("allocator.cuda_mallocs", double(stats.cuda_mallocs), "count");
    report.figures.set("allocator.bytes_reserved", double(stats.bytes_reserved), "bytes");
    report.figures.set("allocator.cache_hits", double(stats.cache_hits), "count");
    report.notes.push_back(reports::allocator_note(report.figures));
    if (!report.peak_source.empty() && report.peak_flops == 0) report.notes.push_back("peak: " + report.peak_source);
  }

 private:
  Device device_;
  SessionOptions options_;
  std::string cupti_reason_;  // why CUPTI is off; "" when it runs
  bool pushed_ = false;
  bool ran_untraced_ = false;
  bool device_enabled_ = false;
  uint32_t cold_op_ = 0;
  double context_ns_ = 0;
  std::vector<std::string> notes_;
  reports::Figures figures_;  // what finish() measured, for describe()
};

std::string request_text(const frontend::DeviceRequest& request) {
  return request.any_cuda ? std::string("cuda") : request.device.str();
}

}  // namespace

DeviceChoice choose_device(const frontend::DeviceRequest& request, bool device_timing) {
  // The probe below initialises CUDA; CUPTI's latency timestamps must be requested before that. Not
  // under --no-device-timing, which promises a run without CUPTI (and so leaves another profiler's
  // CUPTI session alone).
  if (device_timing && (request.automatic || request.device.is_cuda())) cupti::enable_latency_timestamps();
  if (request.automatic) {
    const rt::Probe p = rt::probe();
    if (!p.usable) return {kCPU, "auto chose the CPU: " + p.reason};
    try {
      if (std::string why = rt::unsupported_reason(0); !why.empty()) return {kCPU, "auto chose the CPU: " + why};
    } catch (const Error& e) {
      return {kCPU, std::string("auto chose the CPU: ") + e.what()};
    }
    return {Device{DeviceType::kCUDA, 0},
            "auto chose cuda:0 (" + std::to_string(p.device_count) + " CUDA device" + (p.device_count == 1 ? "" : "s") + " found)"};
  }
  if (!request.device.is_cuda()) return {kCPU, ""};
  const rt::Probe p = rt::probe();
  if (!p.usable) {
    throw UnavailableError("--device " + request_text(request) + ": " + p.reason + "; use --device cpu (or auto)");
  }
  if (request.device.index >= p.device_count) {
    throw UnavailableError("--device " + request.device.str() + ": this machine has " + std::to_string(p.device_count) +
                           " CUDA device" + (p.device_count == 1 ? "" : "s") + " (cuda:0" +
                           (p.device_count > 1 ? " to cuda:" + std::to_string(p.device_count - 1) : "") + ")");
  }
  if (std::string why = rt::unsupported_reason(request.device.index); !why.empty()) {
    throw UnavailableError("--device " + request.device.str() + ": " + why);
  }
  return {request.device, ""};
}

size_t available_bytes(Device device) {
  if (device.is_cuda()) return rt::free_bytes(device.index);
  return frontend::available_host_bytes();
}

std::unique_ptr<DeviceSession> open_device_session(Device device, const SessionOptions& options) {
  if (device.is_cuda()) return std::make_unique<CudaSession>(device, options);
  if (options.tf32) throw UsageError("--tf32 selects TF32 tensor-core math and needs a CUDA device");
  return std::make_unique<DeviceSession>();
}

int run_devices() {
  std::cout << "cpu: " << frontend::available_host_bytes() / (1024 * 1024) << " MiB available\n";
  const rt::Probe p = rt::probe();
  if (!p.usable) {
    std::cout << "cuda: none: " << p.reason << "\n";
    return 0;
  }
  for (int i = 0; i < p.device_count; ++i) {
    const rt::DeviceInfo info = rt::device_info(i);
    std::cout << "cuda:" << i << ": " << info.name << ", " << info.sm_count << " SMs, compute capability "
              << info.cc_major << "." << info.cc_minor << ", " << format_bytes(double(info.total_bytes)) << " ("
              << format_bytes(double(info.free_bytes)) << " free), SM clock " << mhz(info.clock_khz) << ", PCI "
              << info.pci_bus_id << "\n";
    if (std::string why = rt::unsupported_reason(i); !why.empty()) std::cout << "  not usable by strata: " << why << "\n";
    if (i == p.device_count - 1) {
      std::cout << "  CUDA driver " << rt::cuda_version_string(info.driver_version) << ", runtime "
                << rt::cuda_version_string(info.runtime_version) << ", cuBLAS " << info.cublas_version << ", cuBLASLt "
                << info.cublaslt_version << ", cuDNN " << info.cudnn_version << ", CUPTI " << cupti::cupti_version()
                << "\n";
    }
  }
  return 0;
}

}  // namespace strata::app
