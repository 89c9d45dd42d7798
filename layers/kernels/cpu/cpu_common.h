// Private to layers/kernels/cpu.
#pragma once

#include <cstdint>
#include <string>

#include "lib/dtype.h"
#include "lib/error.h"
#include "lib/parallel.h"
#include "lib/tensor.h"

namespace strata::kernels::cpu {

// The CPU kernels take contiguous tensors on the CPU, of any dtype strata has (f16/bf16 are widened, see
// Note [Half types on the CPU] in convert.cpp); anything else is refused here with the reason, because the
// frontend and binding cannot know every way a caller might construct a tensor.
inline void check_cpu_input(const char* op, const Tensor& t) {
  if (!t.device().is_cpu()) throw UsageError(std::string(op) + ": CPU kernel got " + t.str());
  if (!t.is_contiguous()) throw UsageError(std::string(op) + ": CPU kernel needs contiguous tensors");
}

// What ran, in the loop's name for the library row: "tanh (cpu loop, strata tanh AVX-512, 2 threads)" from
// "tanh (cpu loop)", the vector math the loop calls (`math`: "SLEEF", "strata tanh"; nullptr for none;
// the portable loops call libm and say only "portable"), the instruction set of the loops this process
// chose (vectorized/loops.h) and the threads the call used. Made once per (loop, threads) and interned
// (Note [Zone names made at run time] in lib/zone.h); a thread keeps the ones it used, so a call pays one
// small map lookup.
const char* ran_name(const char* base, const char* math, int threads);

// range(b, e) over [0, n) on the intra-op threads (Note [Intra-op threads] in lib/parallel.h); returns
// the number of threads it ran on.
template <typename F>
int split(int64_t n, const F& range) {
  const int threads = parallel::threads_for(0, n, parallel::kGrainSize);
  parallel::parallel_for(0, n, parallel::kGrainSize, range);
  return threads;
}

inline bool is_half(DType d) { return d == DType::kBF16 || d == DType::kF16; }

// Note [Half types on the CPU] (convert.cpp): a bf16/f16 tensor as an f32 copy (in a "widen" zone); any
// other tensor, and an undefined one, as it is.
Tensor widen_to_f32(const Tensor& t);
// The tensor a kernel computes on: `t` itself unless it is bf16/f16, else its f32 copy, kept in `widened`.
// A reference, not a copy: a Tensor's header holds shared pointers, and each copy is two atomic counts.
inline const Tensor& as_f32(const Tensor& t, Tensor& widened) {
  if (!t.defined() || !is_half(t.dtype())) return t;
  widened = widen_to_f32(t);
  return widened;
}
// An f32 result rounded to `to` (in a "round" zone), or `t` itself when it already has that dtype.
Tensor round_from_f32(Tensor t, DType to);

// The bit conversions (round to nearest even; NaN stays NaN, overflow becomes inf).
float bf16_bits_to_float(uint16_t bits);
uint16_t float_to_bf16_bits(float f);
float half_bits_to_float(uint16_t bits);
uint16_t float_to_half_bits(float f);

// Note [A number added to a half tensor]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch's add and sub with a number (and rsub, and their in-place forms) wrap the number as a tensor and
// cast it to the result's dtype before computing, so x_f16 + 0.1 adds half(0.1) (double -> float -> half,
// as c10::Half converts), in float; its mul and div keep the number in float. strata's add.Scalar /
// sub.Scalar kernels (and add_.Scalar / sub_.Scalar), on the CPU and on CUDA, round the number the same
// way, so that strata.add(x, 0.1), x + 0.1 from Python and the CLI agree with torch bit for bit
// (tests/python/torch_api_test.py). The value of `number` as a tensor of `dtype` stores it.
double number_in(DType dtype, double number);

}  // namespace strata::kernels::cpu
