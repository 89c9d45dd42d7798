// The CPU loops of every instruction set this CPU runs (layers/kernels/cpu/vectorized) against the portable
// build: arithmetic bit for bit (no FMA contraction, the same order of additions in a sum), the SLEEF
// functions within a few ulp of libm and equal to it on NaN, infinities and signed zeros; on every length
// from 0 to 70 (tails that are not a multiple of the vector width) and on fresh random values with the
// special ones mixed in. Then the kernels: the same bits on 1, 2 and 3 threads.
#include "layers/kernels/cpu/vectorized/loops.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "layers/kernels/cpu/cpu_common.h"  // the scalar half conversions
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "lib/parallel.h"
#include "tests/kernels/fresh_seed.h"

using namespace strata;
namespace vec = strata::kernels::cpu::vectorized;
using strata::testing::run_seed;

namespace {

template <typename T>
std::vector<T> values(size_t n, uint64_t stream) {
  std::mt19937_64 rng(run_seed() + stream);
  std::uniform_real_distribution<double> u(-6.0, 6.0);
  const T specials[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity(), T(0), -T(0), T(1e-30), T(-1e-30), T(80), T(-80)};
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (rng() % 5 == 0) ? specials[rng() % 9] : T(u(rng));
  return v;
}

template <typename T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0 || (std::isnan(a) && std::isnan(b));
}

// Equal on NaN and infinities; elsewhere within `ulps` units in the last place of max(|want|, 1): the
// functions' terms are of order 1 on these inputs, and near a root (gelu's gradient at x = -0.75) or
// after a cancellation (1 + erf(x) for x << 0) two 1-ulp libraries differ by ulps of the terms, not of
// the result.
// `scale`: the size of the terms beyond the result (a gradient's grad multiplies the error of its formula).
template <typename T>
bool close(T got, T want, double ulps, double scale = 1.0) {
  if (std::isnan(want) || std::isinf(want)) return same_bits(got, want);
  if (want == T(0) && got == T(0)) return std::signbit(got) == std::signbit(want);
  const double tol = ulps * double(std::numeric_limits<T>::epsilon()) * std::max({std::fabs(double(want)), std::fabs(scale), 1.0});
  return std::fabs(double(got) - double(want)) <= tol;
}

std::vector<vec::Isa> vector_isas() {
  std::vector<vec::Isa> isas;
  for (vec::Isa isa : {vec::Isa::kAvx2, vec::Isa::kAvx512})
    if (vec::cpu_runs(isa)) isas.push_back(isa);
  if (isas.empty()) MESSAGE("this CPU runs no vector build (no AVX2): only the portable loops are tested");
  return isas;
}

template <typename T>
void compare_builds(const vec::Loops& fast, const vec::Loops& portable) {
  const auto& f = fast.of<T>();
  const auto& p = portable.of<T>();
  for (size_t n = 0; n <= 70; ++n) {
    CAPTURE(n);
    const std::vector<T> a = values<T>(n, n), b = values<T>(n, n + 1000);
    std::vector<T> got(n), want(n);
    auto exact = [&](const char* what) {
      for (size_t i = 0; i < n; ++i) {
        INFO(std::string(what) << " element " << i << " of " << a[i] << ", " << b[i]);
        CHECK(same_bits(got[i], want[i]));
      }
    };
    f.add(a.data(), b.data(), T(0.5), got.data(), int64_t(n));
    p.add(a.data(), b.data(), T(0.5), want.data(), int64_t(n));
    exact("add");
    f.mul(a.data(), b.data(), got.data(), int64_t(n));
    p.mul(a.data(), b.data(), want.data(), int64_t(n));
    exact("mul");
    f.div(a.data(), b.data(), got.data(), int64_t(n));
    p.div(a.data(), b.data(), want.data(), int64_t(n));
    exact("div");
    f.mul_scalar(a.data(), T(-3), got.data(), int64_t(n));
    p.mul_scalar(a.data(), T(-3), want.data(), int64_t(n));
    exact("mul_scalar");
    f.div_scalar(a.data(), T(7), got.data(), int64_t(n));
    p.div_scalar(a.data(), T(7), want.data(), int64_t(n));
    exact("div_scalar");
    f.add_scalar(a.data(), T(0.25), got.data(), int64_t(n));
    p.add_scalar(a.data(), T(0.25), want.data(), int64_t(n));
    exact("add_scalar");
    f.threshold_backward(b.data(), a.data(), T(0), got.data(), int64_t(n));
    p.threshold_backward(b.data(), a.data(), T(0), want.data(), int64_t(n));
    exact("threshold_backward");
    for (double e : {0.0, 1.0, 0.5, -0.5, -1.0, 2.0, 3.0, -2.0}) {
      f.pow(a.data(), e, got.data(), int64_t(n));
      p.pow(a.data(), e, want.data(), int64_t(n));
      exact("pow (special exponent)");
    }
    f.pow(a.data(), 1.7, got.data(), int64_t(n));
    p.pow(a.data(), 1.7, want.data(), int64_t(n));
    for (size_t i = 0; i < n; ++i) CHECK(close(got[i], want[i], 4));
    CHECK(same_bits(f.sum(a.data(), int64_t(n)), p.sum(a.data(), int64_t(n))));
    std::vector<double> acc_f(n, 1.0), acc_p(n, 1.0);
    f.accumulate(a.data(), acc_f.data(), int64_t(n));
    p.accumulate(a.data(), acc_p.data(), int64_t(n));
    for (size_t i = 0; i < n; ++i) CHECK(same_bits(acc_f[i], acc_p[i]));
    // The functors: SLEEF (1 ulp) against libm (1-2 ulp), NaN and infinities exact.
    for (size_t k = 0; k < vec::kUnaryCount; ++k) {
      CAPTURE(k);
      f.unary[k](a.data(), got.data(), int64_t(n));
      p.unary[k](a.data(), want.data(), int64_t(n));
      for (size_t i = 0; i < n; ++i) {
        INFO("unary " << k << " of " << a[i] << ": " << got[i] << " vs " << want[i]);
        CHECK(close(got[i], want[i], 8));
      }
    }
    for (size_t k = 0; k < vec::kGradientCount; ++k) {
      CAPTURE(k);
      f.gradient[k](b.data(), a.data(), got.data(), int64_t(n));
      p.gradient[k](b.data(), a.data(), want.data(), int64_t(n));
      for (size_t i = 0; i < n; ++i) {
        INFO("gradient " << k << " of " << b[i] << ", " << a[i] << ": " << got[i] << " vs " << want[i]);
        CHECK(close(got[i], want[i], 16, double(b[i])));
      }
    }
  }
}

}  // namespace

TEST_CASE("every vector build agrees with the portable loops") {
  INFO("seed " << run_seed());
  const vec::Loops portable = vec::loops_for(vec::Isa::kPortable);
  for (vec::Isa isa : vector_isas()) {
    CAPTURE(std::string(vec::isa_name(isa)));
    const vec::Loops fast = vec::loops_for(isa);
    CHECK(fast.isa == isa);
    compare_builds<float>(fast, portable);
    compare_builds<double>(fast, portable);
  }
}

TEST_CASE("every build's half conversions give the scalar conversions' bits (a NaN for a NaN)") {
  INFO("seed " << run_seed());
  // Every 16-bit pattern as f16 and as bf16; f32 patterns at random, near the half types' rounding
  // boundaries (low bits 0x0fff..0x1001 and 0x7fff..0x8001: ties and their neighbours), subnormal,
  // overflowing, infinite and NaN.
  std::vector<uint16_t> halves(65536);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = uint16_t(i);
  std::mt19937 rng{uint32_t(run_seed())};
  std::vector<float> floats;
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = uint32_t(rng());
    if (i % 4 == 1) bits = (bits & ~0x1fffu) | (0x0fffu + rng() % 3);
    if (i % 4 == 2) bits = (bits & ~0xffffu) | (0x7fffu + rng() % 3);
    if (i % 8 == 3) bits = (bits & 0x807fffffu) | ((100u + rng() % 50) << 23);  // f16 subnormal .. overflow
    float f;
    std::memcpy(&f, &bits, sizeof f);
    floats.push_back(f);
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 5.9604645e-8f,
                  2.9802322e-8f, 2.9802326e-8f, 3.3895314e38f, 3.4028235e38f})
    floats.push_back(f);
  auto same = [](uint32_t a, uint32_t b, bool a_nan, bool b_nan) { return a_nan ? b_nan : a == b; };
  for (vec::Isa isa : vector_isas()) {
    CAPTURE(std::string(vec::isa_name(isa)));
    const vec::Loops l = vec::loops_for(isa);
    std::vector<float> wide(halves.size());
    l.f16_to_f32(halves.data(), wide.data(), int64_t(halves.size()));
    size_t differ = 0;
    for (size_t i = 0; i < halves.size(); ++i) {
      const float want = kernels::cpu::half_bits_to_float(halves[i]);
      differ += !same_bits(double(wide[i]), double(want)) && !(std::isnan(wide[i]) && std::isnan(want));
    }
    CHECK(differ == 0);
    l.bf16_to_f32(halves.data(), wide.data(), int64_t(halves.size()));
    differ = 0;
    for (size_t i = 0; i < halves.size(); ++i) {
      const float want = kernels::cpu::bf16_bits_to_float(halves[i]);
      differ += !same_bits(double(wide[i]), double(want)) && !(std::isnan(wide[i]) && std::isnan(want));
    }
    CHECK(differ == 0);
    std::vector<uint16_t> narrow(floats.size());
    l.f32_to_f16(floats.data(), narrow.data(), int64_t(floats.size()) - 3);  // an odd length: the padded tail
    differ = 0;
    for (size_t i = 0; i + 3 < floats.size(); ++i) {
      const uint16_t want = kernels::cpu::float_to_half_bits(floats[i]);
      differ += !same(narrow[i], want, (narrow[i] & 0x7fffu) > 0x7c00u, (want & 0x7fffu) > 0x7c00u);
    }
    CHECK(differ == 0);
    l.f32_to_bf16(floats.data(), narrow.data(), int64_t(floats.size()));
    differ = 0;
    for (size_t i = 0; i < floats.size(); ++i) {
      const uint16_t want = kernels::cpu::float_to_bf16_bits(floats[i]);
      differ += !same(narrow[i], want, (narrow[i] & 0x7fffu) > 0x7f80u, (want & 0x7fffu) > 0x7f80u);
    }
    CHECK(differ == 0);
  }
}

TEST_CASE("relu keeps NaN and -0.0 in every build, as PyTorch's") {
  constexpr size_t kRelu = vec::index_of<kernels::math::Relu>(kernels::math::UnaryMath{});
  std::vector<vec::Isa> isas = vector_isas();
  isas.push_back(vec::Isa::kPortable);
  for (vec::Isa isa : isas) {
    const vec::Loops l = vec::loops_for(isa);
    const float in[] = {std::numeric_limits<float>::quiet_NaN(), -0.0f, 0.0f, -1.0f, 2.0f};
    float out[5];
    l.f32.unary[kRelu](in, out, 5);
    CHECK(std::isnan(out[0]));
    CHECK(std::signbit(out[1]));
    CHECK(out[1] == 0.0f);
    CHECK_FALSE(std::signbit(out[2]));
    CHECK(out[3] == 0.0f);
    CHECK(out[4] == 2.0f);
  }
}

TEST_CASE("a CPU without the wider builds is told so, and the chosen loops are the widest it runs") {
  const vec::Isa chosen = vec::loops().isa;
  CHECK(vec::cpu_runs(chosen));
  if (chosen != vec::Isa::kAvx512) CHECK_FALSE(vec::cpu_runs(vec::Isa::kAvx512));
  if (!vec::cpu_runs(vec::Isa::kAvx2)) CHECK_THROWS_AS(vec::loops_for(vec::Isa::kAvx2), UnavailableError);
  CHECK(kernels::cpu::cpu_loops().find(vec::isa_name(chosen)) == 0);
}

TEST_CASE("the CPU kernels give the same bits on 1, 2 and 3 threads") {
  INFO("seed " << run_seed());
  const int saved = parallel::num_threads();
  const int64_t n = 3 * parallel::kGrainSize + 37;
  std::vector<float> host = values<float>(size_t(n), 77);
  for (float& v : host)
    if (std::isnan(v) || std::isinf(v)) v = 0.5f;  // a sum of finite values
  Tensor x = Tensor::empty(Shape{n}, DType::kF32, kCPU);
  std::memcpy(x.data<float>(), host.data(), host.size() * sizeof(float));
  Tensor rows = Tensor::empty(Shape{n / 37, 37}, DType::kF32, kCPU);
  std::memcpy(rows.data<float>(), host.data(), size_t(rows.numel()) * sizeof(float));
  // Three rows of several sum blocks each (sum_rows.h): the blocks of every row split across the threads.
  Tensor long_rows = Tensor::empty(Shape{3, n / 3}, DType::kF32, kCPU);
  std::memcpy(long_rows.data<float>(), host.data(), size_t(long_rows.numel()) * sizeof(float));
  // Reduced dims around a kept one: copied with the kept dim outermost, then summed as rows.
  Tensor cube = Tensor::empty(Shape{7, 5, n / 35}, DType::kF32, kCPU);
  std::memcpy(cube.data<float>(), host.data(), size_t(cube.numel()) * sizeof(float));
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 3}) {
    parallel::set_num_threads(threads, "test");
    std::vector<double> r;
    for (const Tensor& t : {kernels::cpu::sum(x), kernels::cpu::tanh(x), kernels::cpu::gelu(x),
                            kernels::cpu::add(x, x, 0.5), kernels::cpu::sum_dim(rows, Shape{1}, false, std::nullopt),
                            kernels::cpu::sum_dim(rows, Shape{0}, false, std::nullopt),
                            kernels::cpu::sum_dim(long_rows, Shape{1}, false, std::nullopt),
                            kernels::cpu::mean(rows, std::nullopt),
                            kernels::cpu::sum_dim(cube, Shape{0, 2}, false, std::nullopt)}) {
      const auto v = reference::to_double(t);
      r.insert(r.end(), v.begin(), v.end());
    }
    results.push_back(r);
  }
  parallel::set_num_threads(saved, "test");
  for (size_t k = 1; k < results.size(); ++k) {
    REQUIRE(results[k].size() == results[0].size());
    size_t differ = 0;
    for (size_t i = 0; i < results[0].size(); ++i) differ += !same_bits(results[k][i], results[0][i]);
    CHECK(differ == 0);
  }
  // The long rows' sums, against float64 sums of the same values: within f32's rounding of the result.
  const auto got = reference::to_double(kernels::cpu::sum_dim(long_rows, Shape{1}, false, std::nullopt));
  for (int64_t r = 0; r < 3; ++r) {
    double want = 0, magnitude = 0;
    for (int64_t j = 0; j < n / 3; ++j) {
      want += double(host[size_t(r * (n / 3) + j)]);
      magnitude += std::fabs(double(host[size_t(r * (n / 3) + j)]));
    }
    CHECK(std::fabs(got[size_t(r)] - want) <= 1e-6 * magnitude);
  }
}
