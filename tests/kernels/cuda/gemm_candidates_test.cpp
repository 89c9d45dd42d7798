// cuBLASLt's candidates without a GPU (layers/kernels/cuda/gemm_candidates.h, Note [Which cuBLASLt
// algorithm]): the names generated from this toolkit's cublasLt.h, the check of --algo K against what the
// heuristic returned, the table printed from a hand-built list, and the figures the JSON carries
// (apps/cuda_module/cuda_report.h). The cuBLASLt calls themselves run in tests/apps/gemm_algo_gpu_test.cpp.
#include <cublasLt.h>
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "apps/cuda_module/cuda_report.h"
#include "layers/kernels/cuda/gemm_candidates.h"
#include "lib/error.h"

using namespace strata;
using namespace strata::kernels::cuda;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// Three candidates, the second forced; times when `timed`.
GemmCandidateList sample_list(bool timed) {
  GemmCandidateList list;
  list.call = "matmul 4096x4096x4096 f32";
  list.request = {3, 1, timed};
  list.chosen = 1;
  list.candidates = {
      {21, CUBLASLT_MATMUL_TILE_128x256, CUBLASLT_MATMUL_STAGES_64x4, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 1.5f,
       timed ? 2000e3 : -1},
      {6, CUBLASLT_MATMUL_TILE_256x128, CUBLASLT_MATMUL_STAGES_32x6, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 1 << 20, 1.25f,
       timed ? 2500e3 : -1},
      {6, CUBLASLT_MATMUL_TILE_64x64, CUBLASLT_MATMUL_STAGES_16xAUTO, 4, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
       32 << 20, 3.0f, timed ? 1000e3 : -1},
  };
  return list;
}

}  // namespace

TEST_CASE("tile and stage names come from the header: every enumerator named, unknown ids said as such") {
  CHECK(tile_name(CUBLASLT_MATMUL_TILE_128x256) == "128x256");
  CHECK(tile_name(CUBLASLT_MATMUL_TILE_8x8) == "8x8");
  CHECK(tile_name(CUBLASLT_MATMUL_TILE_UNDEFINED) == "undefined");
  CHECK(tile_name(CUBLASLT_MATMUL_TILE_END + 7) == "tile " + std::to_string(CUBLASLT_MATMUL_TILE_END + 7));
  for (int id = 1; id < CUBLASLT_MATMUL_TILE_END; ++id) {
    CAPTURE(id);
    CHECK(!starts_with(tile_name(id), "tile "));  // the generated table misses none of this header's tiles
  }
  CHECK(stages_name(CUBLASLT_MATMUL_STAGES_64x4) == "64x4");
  CHECK(stages_name(CUBLASLT_MATMUL_STAGES_8xAUTO) == "8xAUTO");
  CHECK(stages_name(CUBLASLT_MATMUL_STAGES_UNDEFINED) == "undefined");
  CHECK(stages_name(29) == "stages 29");  // a gap in cublasLt.h's numbering (28 -> 31)
  CHECK(reduction_scheme_name(CUBLASLT_REDUCTION_SCHEME_NONE) == "none");
  CHECK(reduction_scheme_name(CUBLASLT_REDUCTION_SCHEME_INPLACE) == "in place");
  CHECK(reduction_scheme_name(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE) == "output type");
  CHECK(reduction_scheme_name(3) == "scheme 3");
}

TEST_CASE("--algo K against the heuristic's count: within it, past it (exit 2), or nothing returned (exit 4)") {
  CHECK(checked_algo_index(0, 1, "matmul 8x8x8 f32") == 0);
  CHECK(checked_algo_index(7, 8, "matmul 8x8x8 f32") == 7);
  try {
    checked_algo_index(8, 8, "matmul 4096x4096x4096 f32");
    FAIL("K = 8 of 8 accepted");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()) == "--algo 8: cuBLASLt's heuristic returned 8 candidates for matmul 4096x4096x4096 "
                                   "f32, so K must be 0 to 7 (--algos N lists them)");
  }
  CHECK_THROWS_WITH_AS(checked_algo_index(1, 1, "linear 2x3x4 f16"),
                       "--algo 1: cuBLASLt's heuristic returned 1 candidate for linear 2x3x4 f16, so K must be 0 to 0 "
                       "(--algos N lists them)",
                       UsageError);
  CHECK_THROWS_AS(checked_algo_index(0, 0, "matmul 1x1x1 f64"), UnavailableError);
}

TEST_CASE("the request: how many candidates to ask for") {
  CHECK(!GemmAlgoRequest{}.active());
  CHECK(GemmAlgoRequest{8, -1, false}.to_ask() == 8);
  CHECK(GemmAlgoRequest{0, 5, false}.to_ask() == 6);  // --algo 5 alone needs six
  CHECK(GemmAlgoRequest{4, 9, false}.to_ask() == 10);
  CHECK(GemmAlgoRequest{0, 0, false}.active());
}

TEST_CASE("the candidate table from a plain list: one row each, the one that ran marked, the fastest named") {
  const GemmCandidateList list = sample_list(true);
  const std::vector<std::string> lines = format_candidate_table(list);
  REQUIRE(lines.size() == 6);  // title, header, 3 rows, fastest
  CHECK(lines[0] == "cuBLASLt's candidates for matmul 4096x4096x4096 f32: the heuristic's first 3; * ran (--algo 1)");
  CHECK(starts_with(lines[1], "   # "));
  CHECK(starts_with(lines[2], "   0     21  128x256   64x4"));
  CHECK(starts_with(lines[3], "*  1      6  256x128   32x6"));
  CHECK(lines[3].find("1.00 MiB") != std::string::npos);
  CHECK(lines[3].find("2500.0 us") != std::string::npos);
  CHECK(lines[3].find("1.00x") != std::string::npos);
  CHECK(lines[2].find("0.80x") != std::string::npos);  // 2000 / 2500
  CHECK(lines[4].find("16xAUTO") != std::string::npos);
  CHECK(lines[4].find("compute type") != std::string::npos);
  CHECK(lines[4].find("32.00 MiB") != std::string::npos);
  CHECK(lines[5] == "fastest: candidate 2 (1000.0 us, 0.40x the time of the one that ran; --algo 2 runs it)");
  // Untimed: '-' in the time columns and no fastest line; fewer returned than asked is said.
  GemmCandidateList untimed = sample_list(false);
  untimed.request = {8, -1, false};
  untimed.chosen = 0;
  const std::vector<std::string> plain = format_candidate_table(untimed);
  REQUIRE(plain.size() == 5);
  CHECK(plain[0] == "cuBLASLt's candidates for matmul 4096x4096x4096 f32: the heuristic's first 3 (of 8 asked); * ran");
  CHECK(starts_with(plain[2], "*  0 "));
  CHECK(plain[2].find(" - ") != std::string::npos);
}

TEST_CASE("the library zone's name names the candidate that ran") {
  GemmCandidateList list = sample_list(false);
  CHECK(candidate_call_name(list) == "cublasLtMatmul, candidate 1 (algo 6, tile 256x128, stages 32x6)");
  list.chosen = 2;
  CHECK(candidate_call_name(list) == "cublasLtMatmul, candidate 2 (algo 6, tile 64x64, stages 16xAUTO, split-K 4)");
}

TEST_CASE("the candidates as figures: counts, each candidate's configuration, times only where measured") {
  reports::Figures figures;
  cuda_module::add_gemm_candidate_figures(figures, {sample_list(true), sample_list(false)});
  CHECK(figures.value_or("gemm_algos.0.candidates", -1) == 3);
  CHECK(figures.value_or("gemm_algos.0.chosen", -1) == 1);
  CHECK(figures.value_or("gemm_algos.0.0.algo_id", -1) == 21);
  CHECK(figures.value_or("gemm_algos.0.1.tile_id", -1) == CUBLASLT_MATMUL_TILE_256x128);
  CHECK(figures.value_or("gemm_algos.0.2.splitk", -1) == 4);
  CHECK(figures.value_or("gemm_algos.0.2.reduction_scheme", -1) == CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
  CHECK(figures.value_or("gemm_algos.0.2.workspace_bytes", -1) == 32 << 20);
  CHECK(figures.value_or("gemm_algos.0.1.waves", -1) == doctest::Approx(1.25));
  CHECK(figures.value_or("gemm_algos.0.2.time_ns", -1) == 1000e3);
  CHECK(figures.find("gemm_algos.1.0.time_ns") == nullptr);  // not measured: no figure, never a 0
  CHECK(figures.find("gemm_algos.1.0.algo_id") != nullptr);
}

TEST_CASE("the alignment cuBLASLt's heuristic is told: the largest power of two dividing the address, up to 256") {
  // Note [cuBLASLt operand alignment]: the caching allocator's blocks (512-byte granules) and a null pointer
  // (no bias) keep cuBLASLt's default promise; views at an offset get what their address allows.
  CHECK(lt_alignment(uintptr_t{0}) == 256);
  CHECK(lt_alignment(uintptr_t{0x7f0000000200}) == 256);
  CHECK(lt_alignment(uintptr_t{0x7f0000000100}) == 256);
  CHECK(lt_alignment(uintptr_t{0x7f0000000080}) == 128);
  // x[1:] of an f32 [33, 5] block: 20 bytes in, only 4-byte aligned; of an f32 [.., 768]: 3072 bytes in.
  CHECK(lt_alignment(uintptr_t{0x7f0000000200 + 20}) == 4);
  CHECK(lt_alignment(uintptr_t{0x7f0000000200 + 3072}) == 256);
  CHECK(lt_alignment(uintptr_t{0x7f0000000200 + 48}) == 16);
  CHECK(lt_alignment(uintptr_t{0x7f0000000202}) == 2);  // a bf16 element one in
  CHECK(lt_alignment(uintptr_t{0x7f0000000201}) == 1);
  int storage[4] = {};
  CHECK(lt_alignment(&storage[1]) == lt_alignment(reinterpret_cast<uintptr_t>(&storage[1])));
  // A bias one f32 element into its block is below what the bias epilogue is given.
  CHECK(lt_alignment(uintptr_t{0x7f0000000204}) < kLtMinBiasAlignment);
  CHECK(lt_alignment(uintptr_t{0x7f0000000210}) >= kLtMinBiasAlignment);
}
