// The CPU backend's inner loops for one instruction set (Note [One loop source per instruction set] in
// loops.h): built once per STRATA_CPU_CAPABILITY (portable, avx2, avx512) by layers/kernels/cpu/CMakeLists.txt.
#include "layers/kernels/cpu/vectorized/loops.h"

#include <cmath>
#include <cstring>

#include "layers/kernels/pointwise_math.h"

#if STRATA_CPU_VECTOR_BYTES
#include "layers/kernels/cpu/vectorized/vec.h"
#else
#include "layers/kernels/cpu/cpu_common.h"  // the scalar half conversions
#endif

#define STRATA_CAT2(a, b) a##b
#define STRATA_CAT(a, b) STRATA_CAT2(a, b)

namespace strata::kernels::cpu::vectorized::STRATA_CPU_CAPABILITY {
namespace {

#if STRATA_CPU_VECTOR_BYTES
// A value of the loop: a vector in the vector builds.
template <typename T>
using Num = Vec<T>;

// out[i] = f(a[i]) a vector at a time; the last n % lanes elements through a padded vector.
template <typename T, typename F>
void map1(const T* a, T* out, int64_t n, F f) {
  using V = Vec<T>;
  constexpr int kW = V::kLanes;
  int64_t i = 0;
  for (; i + kW <= n; i += kW) f(V::load(a + i)).store(out + i);
  if (i < n) {
    T buf[kW] = {};
    const size_t rest = size_t(n - i) * sizeof(T);
    std::memcpy(buf, a + i, rest);
    f(V::load(buf)).store(buf);
    std::memcpy(out + i, buf, rest);
  }
}

template <typename T, typename F>
void map2(const T* a, const T* b, T* out, int64_t n, F f) {
  using V = Vec<T>;
  constexpr int kW = V::kLanes;
  int64_t i = 0;
  for (; i + kW <= n; i += kW) f(V::load(a + i), V::load(b + i)).store(out + i);
  if (i < n) {
    T buf_a[kW] = {}, buf_b[kW] = {};
    const size_t rest = size_t(n - i) * sizeof(T);
    std::memcpy(buf_a, a + i, rest);
    std::memcpy(buf_b, b + i, rest);
    f(V::load(buf_a), V::load(buf_b)).store(buf_a);
    std::memcpy(out + i, buf_a, rest);
  }
}

constexpr Isa kIsa = STRATA_CPU_VECTOR_BYTES == 64 ? Isa::kAvx512 : Isa::kAvx2;
#else
template <typename T>
using Num = T;

template <typename T, typename F>
void map1(const T* __restrict a, T* __restrict out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i]);
}

template <typename T, typename F>
void map2(const T* __restrict a, const T* __restrict b, T* __restrict out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

template <typename T>
T sqrt_of(T x) {
  return std::sqrt(x);
}
template <typename T>
T pow_of(T x, T y) {
  return std::pow(x, y);
}

constexpr Isa kIsa = Isa::kPortable;
#endif

template <typename Fn, typename T>
void unary(const T* in, T* out, int64_t n) {
  map1(in, out, n, [](auto x) { return Fn::forward(x); });
}

template <typename Fn, typename T>
void gradient(const T* g, const T* s, T* out, int64_t n) {
  map2(g, s, out, n, [](auto a, auto b) { return Fn::gradient(a, b); });
}

template <typename T>
void add(const T* a, const T* b, T alpha, T* out, int64_t n) {
  const Num<T> va(alpha);
  map2(a, b, out, n, [va](auto x, auto y) { return x + va * y; });
}
template <typename T>
void mul(const T* a, const T* b, T* out, int64_t n) {
  map2(a, b, out, n, [](auto x, auto y) { return x * y; });
}
template <typename T>
void div(const T* a, const T* b, T* out, int64_t n) {
  map2(a, b, out, n, [](auto x, auto y) { return x / y; });
}
template <typename T>
void mul_scalar(const T* a, T s, T* out, int64_t n) {
  const Num<T> vs(s);
  map1(a, out, n, [vs](auto x) { return x * vs; });
}
template <typename T>
void div_scalar(const T* a, T s, T* out, int64_t n) {
  const Num<T> vs(s);
  map1(a, out, n, [vs](auto x) { return x / vs; });
}
template <typename T>
void add_scalar(const T* a, T c, T* out, int64_t n) {
  const Num<T> vc(c);
  map1(a, out, n, [vc](auto x) { return x + vc; });
}

// PyTorch's pow with a number (aten/src/ATen/native/cpu/PowKernel.cpp): 0 fills ones, 1 copies, 0.5 / -0.5 /
// -1 are sqrt / rsqrt / reciprocal, 2, 3 and -2 multiplies, the rest pow. Not only faster: the special
// values follow those functions (sqrt(-0) = -0 and sqrt(-inf) = NaN, where pow gives +0 and +inf). The
// exponent (the number as given, before rounding to T) is looked at once per call, not per element, so each case is a loop of its own.
template <typename T>
void pow(const T* a, double e, T* out, int64_t n) {
  const Num<T> one(T(1));
  if (e == 0.0) {
    map1(a, out, n, [one](auto) { return one; });
  } else if (e == 1.0) {
    map1(a, out, n, [](auto x) { return x; });
  } else if (e == 0.5) {
    map1(a, out, n, [](auto x) { return sqrt_of(x); });
  } else if (e == -0.5) {
    map1(a, out, n, [one](auto x) { return one / sqrt_of(x); });
  } else if (e == -1.0) {
    map1(a, out, n, [one](auto x) { return one / x; });
  } else if (e == 2.0) {
    map1(a, out, n, [](auto x) { return x * x; });
  } else if (e == 3.0) {
    map1(a, out, n, [](auto x) { return x * x * x; });
  } else if (e == -2.0) {
    map1(a, out, n, [one](auto x) { return one / (x * x); });
  } else {
    const Num<T> ve(static_cast<T>(e));
    map1(a, out, n, [ve](auto x) { return pow_of(x, ve); });
  }
}

// PyTorch's: x <= threshold gives 0 (NaN in x compares false, so its gradient passes).
template <typename T>
void threshold_backward(const T* g, const T* x, T threshold, T* out, int64_t n) {
  const Num<T> vt(threshold), zero(T(0));
  map2(g, x, out, n, [vt, zero](auto gv, auto xv) {
    using math::select_of;  // the vector builds' overload is found by argument-dependent lookup
    return select_of(xv <= vt, zero, gv);
  });
}

template <typename T>
void fill(T* __restrict out, T value, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = value;
}

// Running sums in double, in one fixed order of additions, so every build (and every thread count, Note
// [Sums that do not depend on the thread count]) gives the same bits: the range is read as four streams
// side by side (four equal parts, each a multiple of 16 long, 16 running sums each; the rest into the
// first stream's), then the 64 sums added in order. Four streams, not one: a single sequential read
// reached 8.9 GB/s from memory on one core here, four 16.3 (sum of 16M floats), as ATen's reduction reads
// several rows at once; the vector builds add 16 lanes at a time.
template <typename T>
double sum(const T* __restrict x, int64_t n) {
  constexpr int kK = 16, kStreams = 4;
  double acc[kStreams][kK] = {};
  const int64_t part = n / (kStreams * kK) * kK;
  for (int64_t i = 0; i < part; i += kK) {
    for (int s = 0; s < kStreams; ++s) {
      for (int k = 0; k < kK; ++k) acc[s][k] += double(x[s * part + i + k]);
    }
  }
  int64_t i = kStreams * part;
  for (; i + kK <= n; i += kK) {
    for (int k = 0; k < kK; ++k) acc[0][k] += double(x[i + k]);
  }
  for (int k = 0; i < n; ++i, ++k) acc[0][k] += double(x[i]);
  double total = 0;
  for (const auto& stream : acc) {
    for (double v : stream) total += v;
  }
  return total;
}

template <typename T>
void accumulate(const T* __restrict row, double* __restrict acc, int64_t n) {
  for (int64_t j = 0; j < n; ++j) acc[j] += double(row[j]);
}

void bf16_to_f32(const uint16_t* __restrict in, float* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t x = uint32_t(in[i]) << 16;
    std::memcpy(out + i, &x, sizeof x);
  }
}

// Round to nearest even; a NaN stays a quiet NaN (convert.cpp's float_to_bf16_bits, without its branch).
void f32_to_bf16(const float* __restrict in, uint16_t* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t x;
    std::memcpy(&x, in + i, sizeof x);
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    out[i] = uint16_t((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40u : rounded);
  }
}

#if STRATA_CPU_VECTOR_BYTES
// F16C, 8 at a time (every AVX2 and AVX-512 CPU has it; isa.cpp checks); the rest through a padded vector.
void f16_to_f32(const uint16_t* __restrict in, float* __restrict out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  if (i < n) {
    uint16_t buf[8] = {};
    float res[8];
    std::memcpy(buf, in + i, size_t(n - i) * sizeof(uint16_t));
    _mm256_storeu_ps(res, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buf))));
    std::memcpy(out + i, res, size_t(n - i) * sizeof(float));
  }
}

void f32_to_f16(const float* __restrict in, uint16_t* __restrict out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    float buf[8] = {};
    uint16_t res[8];
    std::memcpy(buf, in + i, size_t(n - i) * sizeof(float));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(res), _mm256_cvtps_ph(_mm256_loadu_ps(buf), _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(out + i, res, size_t(n - i) * sizeof(uint16_t));
  }
}
#else
void f16_to_f32(const uint16_t* __restrict in, float* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = half_bits_to_float(in[i]);
}

void f32_to_f16(const float* __restrict in, uint16_t* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_half_bits(in[i]);
}
#endif

template <typename T, typename... Fns>
auto unary_table(math::MathList<Fns...>) {
  return std::array<void (*)(const T*, T*, int64_t), sizeof...(Fns)>{&unary<Fns, T>...};
}
template <typename T, typename... Fns>
auto gradient_table(math::MathList<Fns...>) {
  return std::array<void (*)(const T*, const T*, T*, int64_t), sizeof...(Fns)>{&gradient<Fns, T>...};
}

template <typename T>
TypedLoops<T> typed_loops() {
  TypedLoops<T> l{};
  l.unary = unary_table<T>(math::UnaryMath{});
  l.gradient = gradient_table<T>(math::UnaryGradientMath{});
  l.add = &add<T>;
  l.mul = &mul<T>;
  l.div = &div<T>;
  l.mul_scalar = &mul_scalar<T>;
  l.div_scalar = &div_scalar<T>;
  l.add_scalar = &add_scalar<T>;
  l.pow = &pow<T>;
  l.threshold_backward = &threshold_backward<T>;
  l.fill = &fill<T>;
  l.sum = &sum<T>;
  l.accumulate = &accumulate<T>;
  return l;
}

}  // namespace
}  // namespace strata::kernels::cpu::vectorized::STRATA_CPU_CAPABILITY

namespace strata::kernels::cpu::vectorized {

Loops STRATA_CAT(make_loops_, STRATA_CPU_CAPABILITY)() {
  namespace here = STRATA_CPU_CAPABILITY;
  Loops l;
  l.isa = here::kIsa;
  l.f32 = here::typed_loops<float>();
  l.f64 = here::typed_loops<double>();
  l.f16_to_f32 = &here::f16_to_f32;
  l.f32_to_f16 = &here::f32_to_f16;
  l.bf16_to_f32 = &here::bf16_to_f32;
  l.f32_to_bf16 = &here::f32_to_bf16;
  return l;
}

}  // namespace strata::kernels::cpu::vectorized
