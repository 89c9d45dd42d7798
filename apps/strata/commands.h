// The subcommands of the strata program. Each returns the process exit code (lib/error.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "apps/strata/device_session.h"
#include "layers/frontend/frontend.h"
#include "reports/report.h"

namespace strata::app {

struct TraceOptions {
  std::string op;
  std::string spec;
  std::string device = "auto";
  std::string dtype = "f32";
  std::optional<int64_t> repeat;  // unset = auto
  int64_t warmup = 3;
  double budget_s = 1.0;
  uint64_t seed = 42;
  bool requires_grad = false;
  bool check = false;
  bool tf32 = false;
  bool no_device_timing = false;
  std::string json_path;
  std::string chrome_trace_path;
  frontend::ConvOptions conv;
};

struct CompareOptions {
  TraceOptions trace;
  int64_t ops_per_graph = 8;
};

// What trace and compare share: the checked options, the device session and the prepared call.
struct Prepared {
  frontend::OpSpec spec;
  DType dtype = DType::kF32;
  DeviceChoice choice;
  std::unique_ptr<DeviceSession> session;
  frontend::PreparedCall call;
};
Prepared prepare_trace(const TraceOptions& options);
// The op, device and environment part of a report (no figures).
reports::TraceReport describe_context(const Prepared& prepared, const TraceOptions& options);

int run_trace(const TraceOptions& options);
int run_compare(const CompareOptions& options);
int run_ops();
int run_check_trace(const std::string& path);  // exit 0 when valid, 1 with one line per violation
int run_devices();  // device_session_cpu.cpp, or cuda_module.cpp (through libstrata_cuda.so) with CUDA

}  // namespace strata::app
