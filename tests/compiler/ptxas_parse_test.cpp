// The ptxas -v parser on real ptxas outputs committed under tests/compiler/data/ptxas (each file says in
// its name what it exercises), so that the figures strata prints are held to what ptxas wrote.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "layers/compiler/compiler_cuda.h"

namespace strata {
namespace {

std::string sample(const std::string& name) {
  std::ifstream f(std::string(STRATA_SOURCE_DIR) + "/tests/compiler/data/ptxas/" + name);
  REQUIRE(f.good());
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("ptxas -v for sm_80 under --maxrregcount: shared memory, a stack frame, spills, barriers") {
  // CUDA 13.0's ptxas on two kernels: one spilling a dynamically indexed local array, one plain.
  const auto f = compiler::cuda::parse_ptxas_verbose(sample("sm80_smem_stack_maxrreg16.txt"));
  REQUIRE(f.size() == 2);
  CHECK(f[0].function == "plain");
  CHECK(f[0].arch == "sm_80");
  CHECK(f[0].registers == 16);
  CHECK(f[0].shared_bytes == 0);
  CHECK(f[0].stack_frame_bytes == 0);
  CHECK(f[0].spill_store_bytes == 0);
  CHECK(f[0].barriers == 0);
  CHECK(f[1].function == "tile_sum");
  CHECK(f[1].registers == 24);
  CHECK(f[1].shared_bytes == 1024);
  CHECK(f[1].stack_frame_bytes == 248);
  CHECK(f[1].spill_store_bytes == 244);
  CHECK(f[1].spill_load_bytes == 424);
  CHECK(f[1].barriers == 1);
}

TEST_CASE("ptxas -v for sm_90 on strata's generated GELU epilogue") {
  // linear_gelu's f32 epilogue as generate_cuda writes it, through nvcc -ptx for compute_90 and ptxas 13.0:
  // CUDA 13's usage line, which has no cmem item.
  const auto f = compiler::cuda::parse_ptxas_verbose(sample("sm90_fused_linear_gelu.txt"));
  REQUIRE(f.size() == 1);
  CHECK(f[0].function == "fused_linear_gelu");
  CHECK(f[0].arch == "sm_90");
  CHECK(f[0].registers == 24);
  CHECK(f[0].shared_bytes == 0);
  CHECK(f[0].stack_frame_bytes == 0);
  CHECK(f[0].spill_store_bytes == 0);
  CHECK(f[0].spill_load_bytes == 0);
}

TEST_CASE("ptxas output without an entry function, or empty, parses to nothing") {
  CHECK(compiler::cuda::parse_ptxas_verbose("").empty());
  CHECK(compiler::cuda::parse_ptxas_verbose("ptxas info    : 0 bytes gmem\n").empty());
}

}  // namespace strata
