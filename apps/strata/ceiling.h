// The CPU's measured ceiling for `strata sweep` (docs/sweep.md, "The ceiling"): the best rate a large
// problem of the sweep's kind reaches on this machine, measured in the same run, before the sweep.
#pragma once

#include "lib/dtype.h"
#include "reports/model/sweep.h"

namespace strata::app {

// FLOP-bound ops (memory_bound false): the best FLOP/s of a few n x n x n GEMMs in the type `dtype`
// computes in (f64 in f64; f32, bf16 and f16 in f32, Note [Half types on the CPU]) through kernels::cpu::matmul, the same OpenBLAS routine and thread count the sweep's GEMMs use.
// Memory-bound ops: the best bytes/s (read + written) of a few passes of a one-thread streaming copy of
// `copy_bytes`, one thread as the pointwise kernels run. Each is a warm-up then up to `passes` timed
// runs, stopping early once `budget_s` has passed: about 0.1-0.3 s at the defaults on a 2-core VM.
struct CeilingOptions {
  int64_t gemm_n = 1024;
  size_t copy_bytes = size_t(64) << 20;
  int passes = 10;
  double budget_s = 0.25;
};
reports::Ceiling measure_cpu_ceiling(bool memory_bound, DType dtype, const CeilingOptions& options = {});

}  // namespace strata::app
