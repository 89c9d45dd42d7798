// The subcommands of the strata program. Each returns the process exit code (lib/error.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "layers/frontend/frontend.h"

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

int run_trace(const TraceOptions& options);
int run_ops();
int run_devices();  // device_session_{cpu,cuda}.cpp

}  // namespace strata::app
