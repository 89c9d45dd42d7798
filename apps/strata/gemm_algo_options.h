// --algos N, --algo K and --time (Note [Which cuBLASLt algorithm] in layers/kernels/cuda/gemm_candidates.h):
// checked at the edge, in every build, so that a CPU-only build refuses them as clearly as a CUDA one.
// Whether K names a candidate is known only once cuBLASLt's heuristic has answered, on the GPU
// (kernels::cuda::checked_algo_index).
#pragma once

#include <cstdint>
#include <string>

#include "apps/strata/trace_request.h"
#include "measure/device_session.h"

namespace strata::app {

// The most candidates --algos lists (cuBLASLt returns a few dozen at most for a shape).
inline constexpr int64_t kMaxGemmAlgos = 64;

// The values and what they apply to: N in 1..kMaxGemmAlgos, K in 0..kMaxGemmAlgos-1, --time only with
// --algos, and only for `op` matmul or linear. UsageError (exit 2) naming what was wrong and what is allowed.
void check_gemm_algo_options(const std::string& op, const GemmAlgoOptions& options);

// Once the device is chosen: the CPU has no cuBLASLt (UsageError, with auto's reason for choosing it).
void refuse_gemm_algo_on_cpu(const GemmAlgoOptions& options, const measure::DeviceChoice& choice);

// The session's fields for the CUDA module (measure::SessionOptions::gemm_algo*).
void set_session_gemm_algo(const GemmAlgoOptions& options, measure::SessionOptions& session);

}  // namespace strata::app
