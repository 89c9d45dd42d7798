// The CPU's thread settings as torch.set_num_threads makes them: the intra-op pool that strata's CPU loops
// and generated kernels split their work across (Note [Intra-op threads] in lib/parallel.h) and OpenBLAS's
// threads, one count for both, so `strata --threads 1` compares with torch.set_num_threads(1).
#pragma once

#include <string>

namespace strata::measure {

// Both counts; throws UsageError for n outside [1, parallel::kMaxThreads]. `source` names the setting
// in reports' environment ("--threads", "strata.set_num_threads").
void set_cpu_threads(int n, const std::string& source);
// `--threads TEXT` as typed: a clear refusal (UsageError, exit 2) for 0, negatives, words and huge counts.
void set_cpu_threads(const std::string& text);
// STRATA_NUM_THREADS, when set, for both counts (a bad value is a UsageError naming the variable). The
// front ends call this first, before anything runs on a thread.
void apply_cpu_threads_from_environment();

}  // namespace strata::measure
