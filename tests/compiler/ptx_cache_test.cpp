// The PTX cache (Note [The PTX cache] in layers/compiler/nvrtc.cpp) with the real NVRTC, no GPU: a second
// build is a hit with byte-identical PTX, another architecture or source is a miss, a corrupt or truncated
// file is refused and compiled over, concurrent compiles of one kernel publish one complete file, and an
// unwritable cache falls back to a private directory.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "layers/compiler/compiler_cuda.h"
#include "tests/support/error_text.h"
#include "tests/support/subprocess.h"

namespace strata {
namespace {

namespace cc = compiler::cuda;

cc::CudaKernel kernel(const std::string& name, const std::string& body) {
  return {name, DType::kF32,
          "extern \"C\" __global__ void " + name + "(const float* in0, float* out, long long n) {\n"
          "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
          "  if (i < n) out[i] = " + body + ";\n}\n"};
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

size_t temporaries(const test::TempDir& dir, const std::string& sub) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.file(sub)))
    n += e.path().filename().string().find(".tmp.") != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("a second build of the same kernel is a hit: NVRTC does not run and the PTX is byte-identical") {
  const test::TempDir dir;
  const std::string cache = dir.file("kernels");
  const cc::CudaKernel k = kernel("cached_relu", "in0[i] > 0.f ? in0[i] : 0.f");
  const cc::Ptx cold = cc::cached_ptx(k, "sm_90", cache);
  CHECK_FALSE(cold.cache_hit);
  CHECK(cold.compile_ns > 0);
  CHECK(cold.refused.empty());
  CHECK(cold.key == cc::ptx_cache_key(k, "sm_90"));
  CHECK(cold.key.size() == 16);
  CHECK(cold.path == cache + "/" + cold.key + ".ptx");
  CHECK(cold.cache_dir == cache);
  CHECK(cold.cache_note.empty());
  CHECK(test::read_file(cache + "/" + cold.key + ".cu") == k.source);  // the source kept beside it
  CHECK(test::contains(cold.ptx, ".entry cached_relu("));
  CHECK(cold.ptx == cc::compile_ptx(k, "sm_90").ptx);  // the cache stores NVRTC's output, unchanged

  const cc::Ptx warm = cc::cached_ptx(k, "sm_90", cache);
  CHECK(warm.cache_hit);
  CHECK(warm.compile_ns == 0);
  CHECK(warm.read_ns > 0);
  CHECK(warm.ptx == cold.ptx);
  CHECK(warm.log == cold.log);
  CHECK(warm.key == cold.key);
  CHECK(temporaries(dir, "kernels") == 0);
}

TEST_CASE("another architecture or another source is another key: a miss, compiled for what was asked") {
  const test::TempDir dir;
  const std::string cache = dir.file("kernels");
  const cc::CudaKernel k = kernel("cached_neg", "-in0[i]");
  const cc::Ptx sm90 = cc::cached_ptx(k, "sm_90", cache);
  const cc::Ptx sm80 = cc::cached_ptx(k, "sm_80", cache);
  CHECK_FALSE(sm80.cache_hit);
  CHECK(sm80.key != sm90.key);
  CHECK(test::contains(sm80.ptx, ".target sm_80"));
  CHECK(test::contains(sm90.ptx, ".target sm_90"));
  const cc::Ptx other = cc::cached_ptx(kernel("cached_neg", "-2.f * in0[i]"), "sm_90", cache);
  CHECK_FALSE(other.cache_hit);
  CHECK(other.key != sm90.key);
  CHECK(other.ptx != sm90.ptx);
  CHECK(cc::cached_ptx(k, "sm_80", cache).cache_hit);  // both architectures stay cached
  CHECK(cc::cached_ptx(k, "sm_90", cache).cache_hit);
}

TEST_CASE("a truncated, edited, foreign or empty cached file is refused, said why, and compiled over") {
  const test::TempDir dir;
  const std::string cache = dir.file("kernels");
  const cc::CudaKernel k = kernel("cached_sq", "in0[i] * in0[i]");
  const cc::Ptx good = cc::cached_ptx(k, "sm_90", cache);
  const std::string file = test::read_file(good.path);
  REQUIRE(file.rfind("// strata-ptx-cache v1 key=" + good.key + " ", 0) == 0);
  std::string edited = file;
  edited[edited.size() - 20] = edited[edited.size() - 20] == 'x' ? 'y' : 'x';
  std::string other_key = file;
  other_key.replace(other_key.find(good.key), 16, "0123456789abcdef");
  struct Case {
    const char* what;
    std::string contents;
    const char* why;
  };
  for (const Case& c : {Case{"truncated", file.substr(0, file.size() / 2), "truncated"},
                        Case{"one byte edited", edited, "do not match the hash"},
                        Case{"another key's header", other_key, "names key 0123456789abcdef"},
                        Case{"a bare PTX file", good.ptx, "not a strata-ptx-cache v1 header"},
                        Case{"empty", "", "no header line"}}) {
    CAPTURE(std::string(c.what));
    write(good.path, c.contents);
    const cc::Ptx again = cc::cached_ptx(k, "sm_90", cache);
    CHECK_FALSE(again.cache_hit);
    CHECK(test::contains(again.refused, c.why));
    CHECK(again.ptx == good.ptx);                          // NVRTC's, not the file's
    CHECK(test::read_file(good.path) == file);             // the file compiled over
    CHECK(cc::cached_ptx(k, "sm_90", cache).cache_hit);    // and a hit again
  }
}

TEST_CASE("concurrent compiles of one kernel into one cache publish one complete file") {
  const test::TempDir dir;
  const std::string cache = dir.file("kernels");
  const cc::CudaKernel k = kernel("cached_many", "in0[i] + 1.f");
  const std::string expected = cc::compile_ptx(k, "sm_90").ptx;
  constexpr int kThreads = 6;
  std::vector<cc::Ptx> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { results[size_t(t)] = cc::cached_ptx(k, "sm_90", cache); });
  for (std::thread& t : threads) t.join();
  for (const cc::Ptx& r : results) {
    CHECK(r.ptx == expected);
    CHECK(r.refused.empty());  // no reader saw half of a file
  }
  CHECK(temporaries(dir, "kernels") == 0);
  const cc::Ptx after = cc::cached_ptx(k, "sm_90", cache);
  CHECK(after.cache_hit);
  CHECK(after.ptx == expected);
}

TEST_CASE("an unwritable cache directory: the PTX goes to a private temporary directory, with a note") {
  const test::TempDir dir;
  write(dir.file("a_file"), "not a directory");
  const cc::Ptx r = cc::cached_ptx(kernel("cached_abs", "fabsf(in0[i])"), "sm_80", dir.file("a_file/kernels"));
  CHECK_FALSE(r.cache_hit);
  CHECK(r.cache_dir != dir.file("a_file/kernels"));
  CHECK(test::contains(r.cache_note, "is not writable"));
  CHECK(test::exists(r.path));
  std::error_code ec;
  std::filesystem::remove_all(r.cache_dir, ec);
}

}  // namespace strata
