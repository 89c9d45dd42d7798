// What the measurement harness needs from the device a call runs on. The CPU needs nothing; the CUDA
// session (device_session_cuda.cpp) synchronises after each call, tags CUDA work with the op id
// (CUPTI external correlation) and flushes the device records into the timeline at the end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "layers/frontend/frontend.h"
#include "lib/timeline.h"
#include "reports/report.h"

namespace strata::app {

struct DeviceChoice {
  Device device;
  std::string reason;  // one line: why this device ("auto: no CUDA driver (cudaErrorInsufficientDriver)")
};

// Resolves --device. An explicit CUDA request with no usable GPU throws UnavailableError saying why.
DeviceChoice choose_device(const frontend::DeviceRequest& request);

// Bytes a call may use on `device` (host MemAvailable, or free device memory).
size_t available_bytes(Device device);

struct SessionOptions {
  bool tf32 = false;
  bool device_timing = true;  // CUPTI on a GPU; no effect on the CPU
};

class DeviceSession {
 public:
  virtual ~DeviceSession() = default;
  virtual void begin_call(uint32_t /*op_id*/) {}
  virtual void end_call() {}                        // wait until the call's device work is done
  virtual void finish(Timeline& /*timeline*/) {}    // move device records into the timeline
  virtual void describe(reports::TraceReport& /*report*/) {}  // device properties, peak, notes
};

std::unique_ptr<DeviceSession> open_device_session(Device device, const SessionOptions& options);

}  // namespace strata::app
