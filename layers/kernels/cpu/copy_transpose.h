// The transposed case of the strided copy (Note [The transposed copy] in copy_transpose.cpp), private to
// layers/kernels/cpu: copy.cpp calls it, the copy tests pick its instruction set.
#pragma once

#include <cstdint>

namespace strata::kernels::cpu {

// Which vector instructions the transposed copy uses. kAvx2 only where the CPU reports AVX2 at run time;
// the build itself assumes no more than x86-64's SSE2 (kScalar elsewhere).
enum class CopySimd { kScalar, kSse2, kAvx2 };

// The best the running CPU allows; what transposed_copy uses unless the tests chose another.
CopySimd best_copy_simd();
// For the tests: the level transposed_copy uses from now on, capped at best_copy_simd(); returns the
// level in force.
CopySimd use_copy_simd(CopySimd wanted);

// d[c * dst_row + i * dst_col] = s[c * src_row + i * src_col] for c < rows, i < cols, elements of
// `element_bytes` (2, 4 or 8) moved as bits. Fast when src_row == 1 and dst_col == 1 (a transposed pair).
void transposed_copy(int element_bytes, int64_t rows, int64_t cols, int64_t dst_row, int64_t dst_col,
                     int64_t src_row, int64_t src_col, void* dst, const void* src);

}  // namespace strata::kernels::cpu
