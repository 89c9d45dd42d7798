// cuBLASLt's algorithm candidates for one GEMM shape as plain structs, and what strata makes of them without
// a GPU: the request (--algos N, --algo K, --time), the names of tiles, stages and reduction schemes, the
// check of K against what the heuristic returned, and the table printed under the report. Part of the
// public interface of layers/kernels/cuda through cuda_kernels.h; no CUDA type appears here, so the CUDA
// module's session and the host tests use it as it is. The cuBLASLt calls are in cublas_gemm.cpp.
//
// Note [Which cuBLASLt algorithm]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// cuBLAS runs one of many precompiled kernels for a GEMM shape, and cublasGemmEx does not say which. With
// --algos N strata asks cuBLASLt's heuristic (cublasLtMatmulAlgoGetHeuristic) for its first N candidates for
// the call's descriptors, decodes each (cublasLtMatmulAlgoConfigGetAttribute: algorithm id, tile, stages,
// split-K, reduction scheme; the heuristic's workspace and waves count), and with --time runs each on the
// call's own operands (one warm-up, then kTimedRuns runs between CUDA events on strata's stream; the
// median), inside the cold call's algorithm-search zone. The call then runs candidate 0, the heuristic's
// first (what linear runs by default), or --algo K's, and the library zone is named after it. matmul, whose
// default is cublasGemmEx, runs as cublasLtMatmul whenever --algo or --algos is given: the candidates are
// then the kernels it chooses among. The request reaches the kernels as --tf32 does, through the session
// options and the CUDA module's session (set_gemm_algo_request), never through the dispatcher. Plans are
// cached per shape and request, so the heuristic and the timing run once, in the cold call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::kernels::cuda {

struct GemmAlgoRequest {
  int list = 0;       // --algos N: how many of the heuristic's candidates to ask for and list (0: none)
  int force = -1;     // --algo K: run candidate K (-1: the heuristic's first)
  bool time = false;  // --time: measure every candidate listed
  bool active() const { return list > 0 || force >= 0; }
  // Candidates to ask the heuristic for: --algos N, and at least K + 1 for --algo K.
  int to_ask() const { return list > force + 1 ? list : force + 1; }
  bool operator==(const GemmAlgoRequest&) const = default;
};

// Runs per candidate when --time measures it (after one warm-up run); the median is reported.
inline constexpr int kTimedRuns = 5;

struct GemmCandidate {
  int algo_id = 0;  // CUBLASLT_ALGO_CONFIG_ID
  int tile_id = 0;  // cublasLtMatmulTile_t
  int stages_id = 0;  // cublasLtMatmulStages_t
  int splitk = 1;   // CUBLASLT_ALGO_CONFIG_SPLITK_NUM (1: no split)
  int reduction_scheme = 0;  // cublasLtReductionScheme_t, for split-K
  size_t workspace_bytes = 0;
  float waves = 0;       // the heuristic's waves count: 1.0 fills the GPU once
  double time_ns = -1;   // --time's median; < 0 when not measured
};

struct GemmCandidateList {
  std::string call;  // "matmul 4096x4096x4096 f32"
  GemmAlgoRequest request;
  int chosen = 0;                          // the candidate that runs
  std::vector<GemmCandidate> candidates;   // what the heuristic returned, in its order
  std::string timing_note;                 // why --time measured nothing ("" when it did or was not asked)
};

// Note [cuBLASLt operand alignment]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// cuBLASLt's heuristic assumes every matrix pointer is 256-byte aligned unless told otherwise
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES, default 256), and may pick a kernel that loads 16
// bytes at a time on that promise. A tensor that is a view at an offset (x[1:] from Python: a contiguous
// slice whose first element lies 4 * in_features bytes into its block) breaks it: cublasLtMatmul then
// refuses the algorithm or the kernel faults with a misaligned address, which ends the CUDA context. So
// each plan is built for the alignment of the pointers it will run on (lt_alignment of each, told to the
// heuristic) and cached under it, and a pointer of another alignment gets a plan of its own. The
// epilogue's bias vector has no such preference, and its kernels may read it 16 bytes at a time: a bias
// below kLtMinBiasAlignment takes the path without a cuBLASLt epilogue.

// The largest power of two that divides `address`, at most 256 (the heuristic's default promise): what
// CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES is set to for an operand there. 256 for a null pointer.
uint32_t lt_alignment(uintptr_t address);
inline uint32_t lt_alignment(const void* pointer) { return lt_alignment(reinterpret_cast<uintptr_t>(pointer)); }

// The bias alignment below which a plan with a bias epilogue is not built (Note [cuBLASLt operand alignment]).
inline constexpr uint32_t kLtMinBiasAlignment = 16;

// "128x256"; "undefined" for 0; "tile <id>" for an id this toolkit's header does not name.
std::string tile_name(int tile_id);
// "64x4" (stage size x count, as cublasLt.h names it); "undefined"; "stages <id>".
std::string stages_name(int stages_id);
// "none", "in place", "compute type", "output type"; "scheme <id>" otherwise.
std::string reduction_scheme_name(int scheme);

// K checked against the candidates the heuristic returned for `call`: K itself, or UsageError naming K, how
// many there are and which values are allowed.
int checked_algo_index(int k, size_t count, const std::string& call);

// What the library zone of the call is named: "cublasLtMatmul, candidate 2 (algo 21, tile 128x256, stages 64x4)".
std::string candidate_call_name(const GemmCandidateList& list);

// The candidate table, one line each: a title, a header and one row per candidate (index, algorithm id,
// tile, stages, split-K, reduction scheme, workspace, waves and, when measured, time and ratio to the
// chosen one's), the chosen row marked with '*', then a line naming the fastest when they were timed.
std::vector<std::string> format_candidate_table(const GemmCandidateList& list);

}  // namespace strata::kernels::cuda
