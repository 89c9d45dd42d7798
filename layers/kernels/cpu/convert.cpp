// Element-type conversion on the CPU: the to_copy kernel (the cast Autocast calls), and the widening that
// lets every CPU kernel take bf16 and f16 tensors. Note [Half types on the CPU]: the CPU has no bf16/f16
// arithmetic that OpenBLAS uses, so a kernel given half-precision tensors widens them to f32, computes in
// f32 (cblas_sgemm, the f32 loops) and rounds the result to the input dtype, as PyTorch's CPU kernels do
// for bf16 where no native kernel exists. The zones say so ("cblas_sgemm (bf16 widened to f32)").
//
// The bit conversions are written here, not shared with layers/kernels/reference: a bug in one cannot
// hide in the other (the tests compare them).
#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "layers/kernels/cpu/cpu_common.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/cpu/vectorized/loops.h"
#include "lib/zone.h"

namespace strata::kernels::cpu {

float bf16_bits_to_float(uint16_t bits) {
  const uint32_t x = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

uint16_t float_to_bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays a quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest, ties to even (may carry into the exponent: inf)
  return static_cast<uint16_t>(x >> 16);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t x = 0;
  if (exponent == 0x1f) {
    x = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN
  } else if (exponent != 0) {
    x = sign | ((exponent + 112) << 23) | (mantissa << 13);  // rebias 15 -> 127
  } else if (mantissa == 0) {
    x = sign;  // +-0
  } else {
    int e = 113;  // a subnormal half: normalise it (2^-14 * 0.m)
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    x = sign | (static_cast<uint32_t>(e) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

double number_in(DType dtype, double number) {
  const auto f = static_cast<float>(number);
  if (dtype == DType::kF16) return half_bits_to_float(float_to_half_bits(f));
  if (dtype == DType::kBF16) return bf16_bits_to_float(float_to_bf16_bits(f));
  return number;
}

uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (magnitude < 0x38800000u) {
    // Below the smallest normal half (2^-14): a subnormal or zero, 2^-24 per step, rounded to nearest even.
    if (magnitude < 0x33000000u) return sign;  // below half the smallest subnormal: +-0
    const uint32_t exponent = magnitude >> 23;
    const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // value / 2^-24 = mantissa * 2^(exponent - 126)
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((magnitude >> 13) - (112u << 10));  // rebias 127 -> 15, keep 10 mantissa bits
  const uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

namespace {

// One element type's storage and its way to and from f32 (f64 converts directly where it can).
template <DType D>
struct Element;
template <>
struct Element<DType::kF32> {
  using Storage = float;
  static float to_f32(float v) { return v; }
  static float from_f32(float v) { return v; }
};
template <>
struct Element<DType::kF64> {
  using Storage = double;
  static float to_f32(double v) { return static_cast<float>(v); }
  static double from_f32(float v) { return v; }
};
template <>
struct Element<DType::kBF16> {
  using Storage = uint16_t;
  static float to_f32(uint16_t v) { return bf16_bits_to_float(v); }
  static uint16_t from_f32(float v) { return float_to_bf16_bits(v); }
};
template <>
struct Element<DType::kF16> {
  using Storage = uint16_t;
  static float to_f32(uint16_t v) { return half_bits_to_float(v); }
  static uint16_t from_f32(float v) { return float_to_half_bits(v); }
};

template <DType From, DType To>
void convert_loop(const void* src, void* dst, int64_t n) {
  const auto* __restrict in = static_cast<const typename Element<From>::Storage*>(src);
  auto* __restrict out = static_cast<typename Element<To>::Storage*>(dst);
  const vectorized::Loops& loops = vectorized::loops();  // f32 <-> half: the vector builds' (F16C) loops
  if constexpr (From == DType::kF16 && To == DType::kF32) {
    loops.f16_to_f32(in, out, n);
  } else if constexpr (From == DType::kF32 && To == DType::kF16) {
    loops.f32_to_f16(in, out, n);
  } else if constexpr (From == DType::kBF16 && To == DType::kF32) {
    loops.bf16_to_f32(in, out, n);
  } else if constexpr (From == DType::kF32 && To == DType::kBF16) {
    loops.f32_to_bf16(in, out, n);
  } else if constexpr (From == To) {
    std::memcpy(out, in, static_cast<size_t>(n) * sizeof *in);
  } else if constexpr (To == DType::kF64) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(Element<From>::to_f32(in[i]));
  } else {
    // f64 -> half goes through f32, as c10::BFloat16(double) and c10::Half(double) do.
    for (int64_t i = 0; i < n; ++i) out[i] = Element<To>::from_f32(Element<From>::to_f32(in[i]));
  }
}

template <typename F>
void with_dtype(DType d, F&& f) {
  switch (d) {
    case DType::kF32: f(std::integral_constant<DType, DType::kF32>{}); break;
    case DType::kF64: f(std::integral_constant<DType, DType::kF64>{}); break;
    case DType::kF16: f(std::integral_constant<DType, DType::kF16>{}); break;
    case DType::kBF16: f(std::integral_constant<DType, DType::kBF16>{}); break;
  }
}

// Split across the intra-op threads (Note [Intra-op threads] in lib/parallel.h), as ATen's copy_ kernel.
void convert(const Tensor& from, Tensor& to) {
  with_dtype(from.dtype(), [&](auto src) {
    with_dtype(to.dtype(), [&](auto dst) {
      constexpr DType kFrom = decltype(src)::value, kTo = decltype(dst)::value;
      const auto* in = static_cast<const char*>(from.data_ptr());
      auto* out = static_cast<char*>(to.data_ptr());
      const size_t in_size = element_size(kFrom), out_size = element_size(kTo);
      split(from.numel(), [&](int64_t b, int64_t e) {
        convert_loop<kFrom, kTo>(in + size_t(b) * in_size, out + size_t(b) * out_size, e - b);
      });
    });
  });
}

// Zone names must live as long as the timeline: one per (from, to) pair, built once.
const char* to_copy_zone_name(DType from, DType to) {
  static const auto kNames = [] {
    std::array<std::string, 16> names;
    for (DType a : kAllDTypes)
      for (DType b : kAllDTypes)
        names[static_cast<size_t>(a) * 4 + static_cast<size_t>(b)] =
            a == b ? "to_copy " + std::string(dtype_name(a)) + " (memcpy)"
                   : "to_copy " + std::string(dtype_name(a)) + "->" + std::string(dtype_name(b)) + " (cpu loop)";
    return names;
  }();
  return kNames[static_cast<size_t>(from) * 4 + static_cast<size_t>(to)].c_str();
}

}  // namespace

Tensor to_copy(const Tensor& self, std::optional<DType> dtype) {
  STRATA_ZONE(zone, Layer::kLibrary, "to_copy (cpu)");
  check_cpu_input("to_copy", self);
  const DType to = dtype.value_or(self.dtype());
  zone.rename(to_copy_zone_name(self.dtype(), to));
  Tensor out = Tensor::empty(self.sizes(), to, self.device());
  convert(self, out);
  return out;
}

Tensor widen_to_f32(const Tensor& t) {
  if (!t.defined() || !is_half(t.dtype())) return t;
  STRATA_ZONE(zone, Layer::kLibrary, t.dtype() == DType::kBF16 ? "widen bf16->f32" : "widen f16->f32");
  Tensor out = Tensor::empty(t.sizes(), DType::kF32, t.device());
  convert(t, out);
  return out;
}

Tensor round_from_f32(Tensor t, DType to) {
  if (t.dtype() == to) return t;
  STRATA_ZONE(zone, Layer::kLibrary, to == DType::kBF16 ? "round f32->bf16" : "round f32->f16");
  Tensor out = Tensor::empty(t.sizes(), to, t.device());
  convert(t, out);
  return out;
}

}  // namespace strata::kernels::cpu
