// Private to layers/kernels/cpu: the sums of contiguous rows, shared by sum (pointwise.cpp) and the
// reductions over trailing dims (reduce.cpp), so that x.sum(), x.mean() and x.sum(-1) add in one order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "layers/kernels/cpu/vectorized/loops.h"
#include "lib/parallel.h"

namespace strata::kernels::cpu {

// Note [Sums that do not depend on the thread count]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A row is cut into blocks of kSumBlock elements, whatever the thread count: each block is summed in
// double in one fixed order (vectorized/loops.cpp), the threads take whole blocks (of any row), and a
// row's blocks are added in block order. So `strata --threads 1` and `--threads 8` give the same bits, as
// the float64 reference check and a user comparing runs expect; torch's cascade sum in f32 is within the
// same bound. A row of one block is one task, and rows are split across the threads; a few long rows (a
// whole-tensor sum is one row) still use every thread.
inline constexpr int64_t kSumBlock = 16384;

// acc[r] += the sum of x[r * inner, (r + 1) * inner), for r in [0, rows); returns the threads it used.
template <typename T>
int sum_rows(const T* x, int64_t rows, int64_t inner, double* acc) {
  const auto& loops = vectorized::loops().of<T>();
  if (rows == 0 || inner == 0) return 1;
  const int64_t blocks = (inner + kSumBlock - 1) / kSumBlock;  // per row
  if (blocks == 1) {
    const int64_t grain = std::max<int64_t>(1, parallel::kGrainSize / inner);
    const int threads = parallel::threads_for(0, rows, grain);
    parallel::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) acc[r] += loops.sum(x + r * inner, inner);
    });
    return threads;
  }
  std::vector<double> partial(static_cast<size_t>(rows * blocks));
  const int64_t grain = std::max<int64_t>(1, parallel::kGrainSize / kSumBlock);
  const int threads = parallel::threads_for(0, rows * blocks, grain);
  parallel::parallel_for(0, rows * blocks, grain, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t begin = (k % blocks) * kSumBlock;
      partial[static_cast<size_t>(k)] = loops.sum(x + (k / blocks) * inner + begin, std::min(kSumBlock, inner - begin));
    }
  });
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t j = 0; j < blocks; ++j) s += partial[static_cast<size_t>(r * blocks + j)];
    acc[r] += s;
  }
  return threads;
}

}  // namespace strata::kernels::cpu
