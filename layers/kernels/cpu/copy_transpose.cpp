// The transposed case of the strided copy: see Note [The transposed copy].
#include "layers/kernels/cpu/copy_transpose.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif
// AVX2 code is compiled per function (target attribute) and entered only after a run-time CPU check, so
// the binary still runs on any x86-64.
#if defined(__SSE2__) && defined(__x86_64__) && defined(__GNUC__)
#define STRATA_COPY_AVX2 1
#include <immintrin.h>
#else
#define STRATA_COPY_AVX2 0
#endif

namespace strata::kernels::cpu {
namespace {

// Note [The transposed copy]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// d[c * dst_row + i] = s[c + i * src_col]: the source is read along c, the destination written along i.
// The copy goes tile by tile, a tile being one cache line by one cache line (16x16 f32, 8x8 f64, 32x32
// f16/bf16): its source lines are read through registers (8x8 AVX2 or 4x4 SSE transposes for f32; 4x4 or
// 2x2 for f64; 8x8 SSE2 for 2-byte types) into a 1 to 2 KiB buffer on the stack, each source line read
// whole before the next, and the buffer's rows are then written out, each destination line written whole
// once. At power-of-two row strides every source line of a tile, and every destination line, falls in the
// same few L1 sets (a 4 KiB stride: one set, 8 ways, for 16 lines): transposing straight into the
// destination (the previous 16x16 tiles of 4x4 SSE blocks) kept 16 destination lines open across the
// tile and 16 source lines across its columns, and they evicted each other; through the buffer only the
// 8 (or 4, 2) source lines of the current block must stay, and the buffer sits in sets of its own.
// The buffer's rows go out with moves as wide as the blocks' stores, so that each load is forwarded from
// one store. bench/views_bench measures it against memcpy and a plain loop (docs/performance.md). Not
// taken, each measured no faster: larger tiles (32x32 and 64x64 f32 alias worse), non-temporal stores
// (slower where the copy stays in the caches), a recursive (cache-oblivious) order, software prefetch of
// the next tile's source lines. The order of the tiles: tiles_through_buffer.

template <typename T>
constexpr int64_t kLine = 64 / int64_t(sizeof(T));  // elements per 64-byte cache line: a tile's side

// d[c * dst_row + i] = s[c + i * src_col] over one whole tile (kLine x kLine), through a buffer.
template <typename T>
using CopyTile = void (*)(T* d, int64_t dst_row, const T* s, int64_t src_col);

// The buffer's rows out, one destination line each.
template <typename T>
inline void write_tile(T* d, int64_t dst_row, const T* tile) {
  for (int64_t c = 0; c < kLine<T>; ++c) std::memcpy(d + c * dst_row, tile + c * kLine<T>, 64);
}

template <typename T>
void copy_tile_scalar(T* d, int64_t dst_row, const T* s, int64_t src_col) {
  alignas(64) T tile[kLine<T> * kLine<T>];
  for (int64_t i = 0; i < kLine<T>; ++i)
    for (int64_t c = 0; c < kLine<T>; ++c) tile[c * kLine<T> + i] = s[c + i * src_col];
  write_tile(d, dst_row, tile);
}

#if defined(__SSE2__)
// Each block: out[c * out_row + i] = in[c + i * in_row] for c, i < its side. Shuffles only: bits unchanged.
inline void block_sse2(uint32_t* out, int64_t out_row, const uint32_t* in, int64_t in_row) {
  __m128 r0 = _mm_loadu_ps(reinterpret_cast<const float*>(in));
  __m128 r1 = _mm_loadu_ps(reinterpret_cast<const float*>(in + in_row));
  __m128 r2 = _mm_loadu_ps(reinterpret_cast<const float*>(in + 2 * in_row));
  __m128 r3 = _mm_loadu_ps(reinterpret_cast<const float*>(in + 3 * in_row));
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  _mm_storeu_ps(reinterpret_cast<float*>(out), r0);
  _mm_storeu_ps(reinterpret_cast<float*>(out + out_row), r1);
  _mm_storeu_ps(reinterpret_cast<float*>(out + 2 * out_row), r2);
  _mm_storeu_ps(reinterpret_cast<float*>(out + 3 * out_row), r3);
}
inline void block_sse2(uint64_t* out, int64_t out_row, const uint64_t* in, int64_t in_row) {
  const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
  const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + in_row));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi64(r0, r1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + out_row), _mm_unpackhi_epi64(r0, r1));
}
inline void block_sse2(uint16_t* out, int64_t out_row, const uint16_t* in, int64_t in_row) {
  __m128i r[8], pairs[8], quads[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + k * in_row));
  for (int k = 0; k < 8; k += 2) {  // (row k, row k+1) interleaved: columns 0..3, then 4..7
    pairs[k / 2] = _mm_unpacklo_epi16(r[k], r[k + 1]);
    pairs[4 + k / 2] = _mm_unpackhi_epi16(r[k], r[k + 1]);
  }
  for (int h = 0; h < 8; h += 4) {  // four rows per column pair: rows 0..3 in quads[h..], 4..7 after
    quads[h] = _mm_unpacklo_epi32(pairs[h], pairs[h + 1]);
    quads[h + 1] = _mm_unpackhi_epi32(pairs[h], pairs[h + 1]);
    quads[h + 2] = _mm_unpacklo_epi32(pairs[h + 2], pairs[h + 3]);
    quads[h + 3] = _mm_unpackhi_epi32(pairs[h + 2], pairs[h + 3]);
  }
  // quads[0] holds columns 0,1 of rows 0..3, quads[2] the same of rows 4..7; quads[1]/[3] columns 2,3;
  // quads[4..7] columns 4..7 likewise.
  for (int q = 0; q < 4; ++q) {
    const int lo = q < 2 ? q : q + 2;  // 0, 1, 4, 5
    const __m128i top = quads[lo], bottom = quads[lo + 2];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * q) * out_row), _mm_unpacklo_epi64(top, bottom));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * q + 1) * out_row), _mm_unpackhi_epi64(top, bottom));
  }
}

// A whole tile from blocks of side kB, a block's source lines (rows i) outermost so that the blocks
// across c read each source line to its end before the next lines start.
template <typename T>
void copy_tile_sse2(T* d, int64_t dst_row, const T* s, int64_t src_col) {
  constexpr int64_t kB = 16 / int64_t(sizeof(T));
  alignas(64) T tile[kLine<T> * kLine<T>];
  for (int64_t i = 0; i < kLine<T>; i += kB)
    for (int64_t c = 0; c < kLine<T>; c += kB) block_sse2(tile + c * kLine<T> + i, kLine<T>, s + c + i * src_col, src_col);
  write_tile(d, dst_row, tile);
}
#endif

#if STRATA_COPY_AVX2
__attribute__((target("avx2"))) inline void block_avx2(uint32_t* out, int64_t out_row, const uint32_t* in,
                                                       int64_t in_row) {
  __m256 r[8], t[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(reinterpret_cast<const float*>(in + k * in_row));
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
    r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
    r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
    r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
  }
  // r[k] (k < 4) holds column k of rows 0..3 in its low half and column k+4 in its high half; r[k+4] the
  // same of rows 4..7.
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(reinterpret_cast<float*>(out + k * out_row), _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
    _mm256_storeu_ps(reinterpret_cast<float*>(out + (k + 4) * out_row), _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
  }
}
__attribute__((target("avx2"))) inline void block_avx2(uint64_t* out, int64_t out_row, const uint64_t* in,
                                                       int64_t in_row) {
  __m256d r[4];
  for (int k = 0; k < 4; ++k) r[k] = _mm256_loadu_pd(reinterpret_cast<const double*>(in + k * in_row));
  const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
  const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
  _mm256_storeu_pd(reinterpret_cast<double*>(out), _mm256_permute2f128_pd(t0, t2, 0x20));
  _mm256_storeu_pd(reinterpret_cast<double*>(out + out_row), _mm256_permute2f128_pd(t1, t3, 0x20));
  _mm256_storeu_pd(reinterpret_cast<double*>(out + 2 * out_row), _mm256_permute2f128_pd(t0, t2, 0x31));
  _mm256_storeu_pd(reinterpret_cast<double*>(out + 3 * out_row), _mm256_permute2f128_pd(t1, t3, 0x31));
}
// The buffer's rows out as 32-byte moves: each load reads exactly what one of the blocks' 32-byte stores
// wrote (memcpy's 16-byte moves here read half a store each, and took the AVX2 tile back to SSE2's speed).
template <typename T>
__attribute__((target("avx2"))) inline void write_tile_avx2(T* d, int64_t dst_row, const T* tile) {
  for (int64_t c = 0; c < kLine<T>; ++c) {
    const auto* from = reinterpret_cast<const __m256i*>(tile + c * kLine<T>);
    auto* to = reinterpret_cast<__m256i*>(d + c * dst_row);
    _mm256_storeu_si256(to, _mm256_load_si256(from));
    _mm256_storeu_si256(to + 1, _mm256_load_si256(from + 1));
  }
}
// As copy_tile_sse2, with blocks twice as wide; written out per type since the target attribute must be
// on the function the blocks are inlined into.
__attribute__((target("avx2"))) void copy_tile_avx2_u32(uint32_t* d, int64_t dst_row, const uint32_t* s,
                                                        int64_t src_col) {
  alignas(64) uint32_t tile[16 * 16];
  for (int64_t i = 0; i < 16; i += 8)
    for (int64_t c = 0; c < 16; c += 8) block_avx2(tile + c * 16 + i, 16, s + c + i * src_col, src_col);
  write_tile_avx2(d, dst_row, tile);
}
__attribute__((target("avx2"))) void copy_tile_avx2_u64(uint64_t* d, int64_t dst_row, const uint64_t* s,
                                                        int64_t src_col) {
  alignas(64) uint64_t tile[8 * 8];
  for (int64_t i = 0; i < 8; i += 4)
    for (int64_t c = 0; c < 8; c += 4) block_avx2(tile + c * 8 + i, 8, s + c + i * src_col, src_col);
  write_tile_avx2(d, dst_row, tile);
}
#endif

template <typename T>
CopyTile<T> copy_tile_for(CopySimd level) {
#if STRATA_COPY_AVX2
  if constexpr (std::is_same_v<T, uint32_t>) {
    if (level == CopySimd::kAvx2) return copy_tile_avx2_u32;
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    if (level == CopySimd::kAvx2) return copy_tile_avx2_u64;
  }
#endif
#if defined(__SSE2__)
  if (level != CopySimd::kScalar) return copy_tile_sse2<T>;  // 2-byte types: the SSE2 8x8 under AVX2 too
#endif
  (void)level;
  return copy_tile_scalar<T>;
}

// One tile of the transposed pair at (c0, i0): whole, through the buffer; partial (at the edges), element by
// element, still within one tile so that its lines stay in the cache.
template <typename T>
inline void one_tile(CopyTile<T> copy_tile, int64_t rows, int64_t cols, int64_t dst_row, int64_t src_col, T* d,
                     const T* s, int64_t c0, int64_t i0) {
  constexpr int64_t kL = kLine<T>;
  T* d_tile = d + c0 * dst_row + i0;
  const T* s_tile = s + c0 + i0 * src_col;
  if (c0 + kL <= rows && i0 + kL <= cols) {
    copy_tile(d_tile, dst_row, s_tile, src_col);
    return;
  }
  const int64_t c_end = std::min(kL, rows - c0), i_end = std::min(kL, cols - i0);
  for (int64_t c = 0; c < c_end; ++c)
    for (int64_t i = 0; i < i_end; ++i) d_tile[c * dst_row + i] = s_tile[c + i * src_col];
}

// The transposed pair (src_row == 1, dst_col == 1), tile by tile. The tiles of a strip (one tile wide)
// read or write one line in each row they cross, and the other side runs along the strip's rows; strips
// go along the longer rows: destination rows (kLine of them at once) when they are at least as long as
// the source's, else source rows. (At 2048x512 and 4096x256 f32, strips along the destination's short
// rows took 1.2 and 1.45x as long as strips along the source's.)
template <typename T>
void tiles_through_buffer(CopyTile<T> copy_tile, int64_t rows, int64_t cols, int64_t dst_row, int64_t src_col, T* d,
                          const T* s) {
  constexpr int64_t kL = kLine<T>;
  if (cols >= rows) {
    for (int64_t c0 = 0; c0 < rows; c0 += kL)
      for (int64_t i0 = 0; i0 < cols; i0 += kL) one_tile(copy_tile, rows, cols, dst_row, src_col, d, s, c0, i0);
  } else {
    for (int64_t i0 = 0; i0 < cols; i0 += kL)
      for (int64_t c0 = 0; c0 < rows; c0 += kL) one_tile(copy_tile, rows, cols, dst_row, src_col, d, s, c0, i0);
  }
}

// Any other pair of strides (a strided destination): square tiles of 16, element by element.
template <typename T>
void strided_tiles(int64_t rows, int64_t cols, int64_t dst_row, int64_t dst_col, int64_t src_row, int64_t src_col,
                   T* d, const T* s) {
  constexpr int64_t kTile = 16;
  for (int64_t c0 = 0; c0 < rows; c0 += kTile)
    for (int64_t i0 = 0; i0 < cols; i0 += kTile) {
      const int64_t c1 = std::min(c0 + kTile, rows), i1 = std::min(i0 + kTile, cols);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t i = i0; i < i1; ++i) d[c * dst_row + i * dst_col] = s[c * src_row + i * src_col];
    }
}

template <typename T>
void transposed_copy_of(int64_t rows, int64_t cols, int64_t dst_row, int64_t dst_col, int64_t src_row,
                        int64_t src_col, void* dst, const void* src, CopySimd level) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  if (src_row == 1 && dst_col == 1)
    tiles_through_buffer(copy_tile_for<T>(level), rows, cols, dst_row, src_col, d, s);
  else
    strided_tiles(rows, cols, dst_row, dst_col, src_row, src_col, d, s);
}

std::atomic<CopySimd>& level_in_use() {
  static std::atomic<CopySimd> level{best_copy_simd()};
  return level;
}

}  // namespace

CopySimd best_copy_simd() {
#if STRATA_COPY_AVX2
  // libgcc's check also asks the OS (XGETBV) whether it saves the AVX registers.
  static const bool kHasAvx2 = __builtin_cpu_supports("avx2");
  return kHasAvx2 ? CopySimd::kAvx2 : CopySimd::kSse2;
#elif defined(__SSE2__)
  return CopySimd::kSse2;
#else
  return CopySimd::kScalar;
#endif
}

CopySimd use_copy_simd(CopySimd wanted) {
  const CopySimd level = std::min(wanted, best_copy_simd());
  level_in_use().store(level);
  return level;
}

void transposed_copy(int element_bytes, int64_t rows, int64_t cols, int64_t dst_row, int64_t dst_col,
                     int64_t src_row, int64_t src_col, void* dst, const void* src) {
  const CopySimd level = level_in_use().load(std::memory_order_relaxed);
  switch (element_bytes) {
    case 2:
      transposed_copy_of<uint16_t>(rows, cols, dst_row, dst_col, src_row, src_col, dst, src, level);
      break;
    case 4:
      transposed_copy_of<uint32_t>(rows, cols, dst_row, dst_col, src_row, src_col, dst, src, level);
      break;
    default:
      transposed_copy_of<uint64_t>(rows, cols, dst_row, dst_col, src_row, src_col, dst, src, level);
      break;
  }
}

}  // namespace strata::kernels::cpu
