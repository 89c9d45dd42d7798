#include "apps/strata/gemm_algo_options.h"

#include "lib/error.h"

namespace strata::app {
namespace {

// The option a message is about: --algo when it was given (it is the one that runs something else).
std::string given(const GemmAlgoOptions& options) { return options.algo ? "--algo" : "--algos"; }

}  // namespace

void check_gemm_algo_options(const std::string& op, const GemmAlgoOptions& options) {
  if (options.time && !options.algos) {
    throw UsageError("--time measures each candidate --algos lists: add --algos N (1 to " +
                     std::to_string(kMaxGemmAlgos) + ")");
  }
  if (options.algos && (*options.algos < 1 || *options.algos > kMaxGemmAlgos)) {
    throw UsageError("--algos " + std::to_string(*options.algos) + ": N is how many of cuBLASLt's candidates to list, 1 to " +
                     std::to_string(kMaxGemmAlgos));
  }
  if (options.algo && (*options.algo < 0 || *options.algo >= kMaxGemmAlgos)) {
    throw UsageError("--algo " + std::to_string(*options.algo) + ": K is a candidate's index in the heuristic's list, 0 to " +
                     std::to_string(kMaxGemmAlgos - 1) + " (--algos N lists them)");
  }
  if (options.any() && op != "matmul" && op != "linear") {
    throw UsageError(given(options) + " chooses among cuBLASLt's kernels for matmul and linear; " + op +
                     " calls no cuBLASLt GEMM of its own");
  }
}

void refuse_gemm_algo_on_cpu(const GemmAlgoOptions& options, const measure::DeviceChoice& choice) {
  if (!options.any() || !choice.device.is_cpu()) return;
  throw UsageError(given(options) + " chooses among cuBLASLt's kernels and needs a CUDA device; the CPU's GEMM is "
                   "OpenBLAS's, which has no candidates to list" +
                   (choice.reason.empty() ? std::string() : " (" + choice.reason + ")"));
}

void set_session_gemm_algo(const GemmAlgoOptions& options, measure::SessionOptions& session) {
  session.gemm_algos = options.algos ? static_cast<int>(*options.algos) : 0;
  session.gemm_algo = options.algo ? static_cast<int>(*options.algo) : -1;
  session.gemm_algo_time = options.time;
}

}  // namespace strata::app
