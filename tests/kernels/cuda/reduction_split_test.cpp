// How the CUDA reductions split a channel across blocks (channel_sum_parts, pointwise.cu): host-only, the
// launch geometry needs no GPU. The sums themselves are checked on a GPU in cuda_kernels_test.cpp.
#include <doctest/doctest.h>

#include <cstdint>

#include "layers/kernels/cuda/pointwise_launch.h"

using strata::kernels::cuda::channel_sum_parts;

TEST_CASE("channel_sum_parts: 4096 elements per block, at most 256 parts, a grid CUDA accepts") {
  CHECK(channel_sum_parts(1, 1, 1) == 1);
  CHECK(channel_sum_parts(1, 1, 4096) == 1);
  CHECK(channel_sum_parts(1, 1, 4097) == 2);
  CHECK(channel_sum_parts(1, 1, (int64_t{1} << 20) + 3) == 256);  // 1M + 3 elements: capped at 256 parts
  CHECK(channel_sum_parts(1, 1, int64_t{1} << 19) == 128);
  CHECK(channel_sum_parts(32, 64, 56 * 56) == 25);                   // conv's bias gradient: 100352 per channel
  CHECK(channel_sum_parts(33, 3072, 1) == 1);                        // linear's: a few rows per channel
  CHECK(channel_sum_parts(1, 0, 5) == 1);
  // Channels * parts stays under CUDA's 2^31 - 1 blocks.
  const int64_t channels = int64_t{1} << 30;
  CHECK(channel_sum_parts(1 << 12, channels, 1) * channels < (int64_t{1} << 31));
}
