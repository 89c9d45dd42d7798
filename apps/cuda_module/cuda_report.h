// What a CUDA run adds to the report: the device's properties and library versions, the datasheet peak
// for the report's dtype, the words of the launch / queue / gpu rows (or why they are n/a), and the notes
// rendered from the session's figures (cold call, unmatched records, the allocator, the plans).
#pragma once

#include <string>
#include <vector>

#include "lib/device.h"
#include "reports/model/figures.h"
#include "reports/model/report.h"

namespace strata::cuda_module {

struct CudaRunSummary {
  Device device;
  bool device_timing = false;     // CUPTI delivered records for this run
  std::string timing_off_reason;  // why not, when !device_timing
  std::vector<std::string> notes;  // the session's notes so far (CUPTI's, the cold call's), in order
  reports::Figures figures;        // what the session measured
  std::vector<std::string> plans;  // the libraries' plan annotations of the run, in order
};

void describe_cuda_run(reports::TraceReport& report, const CudaRunSummary& run);

std::string mhz(int khz);  // "1980 MHz"

}  // namespace strata::cuda_module
