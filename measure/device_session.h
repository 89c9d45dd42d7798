// What the measurement harness needs from the device a call runs on, and how a device is chosen. The CPU
// needs nothing; the CUDA session (apps/cuda_module/cuda_session.cpp, in libstrata_cuda.so) synchronises
// after each call, tags CUDA work with the op id (CUPTI external correlation) and flushes the device
// records into the timeline at the end. choose_device, available_bytes, open_device_session and
// list_devices are defined in measure/devices: cpu_only.cpp in a build without the CUDA layers,
// cuda_module.cpp (which loads libstrata_cuda.so for CUDA requests, Note [The CUDA module]) in one with.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "layers/frontend/frontend.h"
#include "lib/timeline.h"
#include "reports/formats/chrome_trace.h"
#include "reports/model/report.h"

namespace strata::measure {

struct DeviceChoice {
  Device device;
  std::string reason;  // one line: why this device ("auto: no CUDA driver (cudaErrorInsufficientDriver)")
};

// Resolves --device. An explicit CUDA request with no usable GPU throws UnavailableError saying why.
// `device_timing` false (--no-device-timing) keeps CUPTI out of the process altogether.
DeviceChoice choose_device(const frontend::DeviceRequest& request, bool device_timing = true);

// Bytes a call may use on `device` (host MemAvailable, or free device memory).
size_t available_bytes(Device device);

// The devices this build can use, one line each (`strata devices`): the host's memory, then each CUDA
// device with its properties, or "cuda: none: " and why there is none.
void list_devices(std::ostream& out);

struct SessionOptions {
  bool tf32 = false;
  bool device_timing = true;  // CUPTI on a GPU; no effect on the CPU
  // --algos N / --algo K / --time: cuBLASLt's candidates for matmul and linear, listed, forced and timed
  // (Note [Which cuBLASLt algorithm] in layers/kernels/cuda/gemm_candidates.h). CUDA only: the CLI refuses
  // them on the CPU (apps/strata/gemm_algo_options.h).
  int gemm_algos = 0;
  int gemm_algo = -1;
  bool gemm_algo_time = false;
};

// K calls captured once and replayed: a CUDA Graph on a GPU; on the CPU a plan of the resolved kernel
// calls (recorded through the full stack, replayed without binding and dispatch), never called a graph.
class Replay {
 public:
  virtual ~Replay() = default;
  virtual std::string kind() const = 0;  // "CUDA Graph", "plan replay"
  virtual void replay() = 0;             // all K ops once; host side inside a Runtime-layer zone
  virtual binding::IValue last_result() const = 0;
};

struct CaptureCost {
  double capture_ns = 0;      // issuing the K calls through the full stack while recording
  double instantiate_ns = 0;  // turning the recording into something replayable
  size_t recorded_calls = 0;  // kernel calls in a CPU plan (0 for a CUDA Graph: its nodes are not counted)
};

class DeviceSession {
 public:
  virtual ~DeviceSession() = default;
  virtual void begin_call(uint32_t /*op_id*/) {}  // work issued from now on belongs to op_id
  virtual void end_call() {}                      // the op's work has been issued
  // Inside a call, the work of one fused kernel of a compiled forward: tagged with `step_tag` beside the
  // op (reports/model/compiled_attribution.h). Nothing where no device records kernels.
  virtual void begin_step(uint32_t /*step_tag*/) {}
  virtual void end_step() {}
  virtual void synchronize() {}                   // wait until all issued device work is done
  virtual void finish(Timeline& /*timeline*/) {}  // move device records into the timeline
  virtual void describe(reports::TraceReport& /*report*/) {}  // device properties, peak, notes
  // The GPU in use, for the Chrome trace's deviceProperties (Note [Kineto trace layout]); none on the CPU.
  virtual std::vector<reports::GpuProperties> trace_gpus() { return {}; }
  // Captures one call of `call_once` per id in `op_ids` (each through the full stack, tagged with its
  // id) for replay. The default records a CPU plan; the CUDA session captures a CUDA Graph.
  virtual std::unique_ptr<Replay> capture(const std::function<binding::IValue()>& call_once,
                                          const std::vector<uint32_t>& op_ids, CaptureCost& cost);
};

// begin_call(op_id) now, end_call() on every way out of the scope: a call that throws must not leave its
// op tag in place for the work that follows (CUPTI would tag later records with it).
class OpCall {
 public:
  OpCall(DeviceSession& session, uint32_t op_id) : session_(session) { session_.begin_call(op_id); }
  ~OpCall() { session_.end_call(); }
  OpCall(const OpCall&) = delete;
  OpCall& operator=(const OpCall&) = delete;

 private:
  DeviceSession& session_;
};

// The CPU plan replay (plan_replay.cpp), also used by sessions whose device is the CPU.
std::unique_ptr<Replay> capture_plan(DeviceSession& session, const std::function<binding::IValue()>& call_once,
                                     const std::vector<uint32_t>& op_ids, CaptureCost& cost);

std::unique_ptr<DeviceSession> open_device_session(Device device, const SessionOptions& options);

}  // namespace strata::measure
