// Shared by the raw GPU baselines (raw_cuda_bench.cpp, raw_graph_bench.cpp): error checks, the host clock,
// order statistics, seeded random inputs and a minimal JSON writer. No strata header is included on
// purpose: nothing of strata's may hide in a baseline.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace rawbench {

[[noreturn]] inline void die(const char* program, const char* what, const char* call, int line) {
  std::fprintf(stderr, "%s: %s failed: %s [line %d]\n", program, call, what, line);
  std::exit(1);
}

}  // namespace rawbench

#ifndef RAW_BENCH_NAME
#define RAW_BENCH_NAME "raw_bench"
#endif
#define CUDA_OK(call)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) rawbench::die(RAW_BENCH_NAME, cudaGetErrorName(e_), #call, __LINE__); \
  } while (0)
#define CUBLAS_OK(call)                                                                                 \
  do {                                                                                                  \
    cublasStatus_t s_ = (call);                                                                         \
    if (s_ != CUBLAS_STATUS_SUCCESS) rawbench::die(RAW_BENCH_NAME, cublasGetStatusName(s_), #call, __LINE__); \
  } while (0)
#define CUDNN_OK(call)                                                                                 \
  do {                                                                                                 \
    cudnnStatus_t s_ = (call);                                                                         \
    if (s_ != CUDNN_STATUS_SUCCESS) rawbench::die(RAW_BENCH_NAME, cudnnGetErrorString(s_), #call, __LINE__); \
  } while (0)

namespace rawbench {

inline double now_ns() {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
                    .count());
}

// Whether CUDA sees a device; if not, says why on stderr as `program: no usable CUDA device (...)`.
inline bool usable_device(const char* program) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e == cudaSuccess && devices > 0) return true;
  std::fprintf(stderr, "%s: no usable CUDA device (%s)\n", program, e == cudaSuccess ? "count 0" : cudaGetErrorName(e));
  return false;
}

struct Stats {
  double median = 0, p90 = 0, min = 0;
  size_t count = 0;
};
// The same nearest-rank percentiles as strata's reports::Distribution, so medians compare like with like.
inline Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    const size_t i = static_cast<size_t>(std::ceil(q * double(v.size())));
    return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
  };
  s.median = rank(0.5);
  s.p90 = rank(0.9);
  s.min = v.front();
  s.count = v.size();
  return s;
}

enum class Elem { kF32, kBF16 };

inline uint16_t to_bf16(float f) {  // round to nearest even, as __float2bfloat16_rn (inputs are finite)
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// Uniform values in [-1, 1), seeded, like strata's random tensors: tensor-core and FMA throughput depend on
// the data (a constant byte pattern makes multipliers toggle less and runs measurably faster).
inline void fill_uniform(void* device_ptr, size_t count, Elem elem, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  if (elem == Elem::kF32) {
    std::vector<float> host(count);
    for (float& v : host) v = dist(rng);
    CUDA_OK(cudaMemcpy(device_ptr, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  } else {
    std::vector<uint16_t> host(count);
    for (uint16_t& v : host) v = to_bf16(dist(rng));
    CUDA_OK(cudaMemcpy(device_ptr, host.data(), count * sizeof(uint16_t), cudaMemcpyHostToDevice));
  }
}

struct Buffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit Buffer(size_t n) : bytes(std::max<size_t>(n, 256)) { CUDA_OK(cudaMalloc(&ptr, bytes)); }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

inline std::string json_number(double v) {
  if (!(v == v) || v > 1e300 || v < -1e300) return "null";  // no NaN / Infinity in JSON
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

inline std::string json_stats(const Stats& s) {
  return "{\"median_ns\": " + json_number(s.median) + ", \"p90_ns\": " + json_number(s.p90) +
         ", \"min_ns\": " + json_number(s.min) + ", \"count\": " + std::to_string(s.count) + "}";
}

inline bool write_text(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return false;
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace rawbench
