// What a CUDA run adds to the report: the device's properties and library versions, the datasheet peak
// for the report's dtype, the words of the launch / queue / gpu rows (or why they are n/a), and the notes
// rendered from the session's figures (cold call, unmatched records, the allocator, the plans).
#pragma once

#include <string>
#include <vector>

#include "layers/kernels/cuda/gemm_candidates.h"
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
  std::vector<kernels::cuda::GemmCandidateList> gemm_candidates;  // --algos / --algo, one list per GEMM shape
};

void describe_cuda_run(reports::TraceReport& report, const CudaRunSummary& run);

// cuBLASLt's candidates as figures (Note [Figures, not prose]), for the JSON and scripts: for list L and
// candidate J, "gemm_algos.L.candidates" and "gemm_algos.L.chosen" (count), "gemm_algos.L.J.algo_id",
// ".tile_id", ".stages_id", ".splitk", ".reduction_scheme" (count: the enums' values), ".workspace_bytes"
// (bytes), ".waves" (ratio) and, when --time measured it, ".time_ns" (ns). The table's lines are notes.
void add_gemm_candidate_figures(reports::Figures& figures, const std::vector<kernels::cuda::GemmCandidateList>& lists);

std::string mhz(int khz);  // "1980 MHz"

}  // namespace strata::cuda_module
