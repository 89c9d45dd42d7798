// What strata makes of cuBLASLt's candidates without a GPU (gemm_candidates.h, Note [Which cuBLASLt
// algorithm]). cublasLt.h is included for its enumerators only: no cuBLASLt function is called here.
#include "layers/kernels/cuda/gemm_candidates.h"

#include <cublasLt.h>

#include <cstdio>
#include <utility>

#include "lib/error.h"

namespace strata::kernels::cuda {
namespace {

struct EnumName {
  int value;
  const char* name;
};

// Every CUBLASLT_MATMUL_TILE_RxC and CUBLASLT_MATMUL_STAGES_RxC enumerator of this toolkit's cublasLt.h as
// {enumerator, "RxC"}, generated from the header at configure time (CMakeLists.txt beside this file): CUDA
// 13 names over 600 tiles, and a table written by hand would drift from the toolkit strata is built with.
#include "cublaslt_names.inc"

constexpr EnumName kTiles[] = {STRATA_CUBLASLT_TILE_NAMES};
constexpr EnumName kStages[] = {STRATA_CUBLASLT_STAGES_NAMES};

template <size_t N>
std::string enum_name(const EnumName (&table)[N], int value, const char* undefined_word, const char* kind) {
  if (value == 0) return undefined_word;
  for (const EnumName& e : table)
    if (e.value == value) return e.name;
  return std::string(kind) + " " + std::to_string(value);
}

std::string format_us(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  return buf;
}

std::string candidate_row(const GemmCandidateList& list, size_t index) {
  const GemmCandidate& c = list.candidates[index];
  const double chosen_ns = list.candidates[static_cast<size_t>(list.chosen)].time_ns;
  std::string time = "-", ratio = "-";
  if (c.time_ns >= 0) time = format_us(c.time_ns);
  if (c.time_ns >= 0 && chosen_ns > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", c.time_ns / chosen_ns);
    ratio = buf;
  }
  char row[256];
  std::snprintf(row, sizeof row, "%s %2zu %6d  %-9s %-8s %7d  %-13s %10s %6.2f %12s %9s",
                int(index) == list.chosen ? "*" : " ", index, c.algo_id, tile_name(c.tile_id).c_str(),
                stages_name(c.stages_id).c_str(), c.splitk, reduction_scheme_name(c.reduction_scheme).c_str(),
                format_bytes(double(c.workspace_bytes)).c_str(), double(c.waves), time.c_str(), ratio.c_str());
  return row;
}

// "fastest: candidate 3 (812.4 us, 0.94x the chosen one's time)", or "" when nothing was timed.
std::string fastest_line(const GemmCandidateList& list) {
  int fastest = -1;
  for (size_t i = 0; i < list.candidates.size(); ++i) {
    const double t = list.candidates[i].time_ns;
    if (t >= 0 && (fastest < 0 || t < list.candidates[static_cast<size_t>(fastest)].time_ns)) fastest = int(i);
  }
  if (fastest < 0) return "";
  const double fastest_ns = list.candidates[static_cast<size_t>(fastest)].time_ns;
  const double chosen_ns = list.candidates[static_cast<size_t>(list.chosen)].time_ns;
  if (fastest == list.chosen) return "fastest: candidate " + std::to_string(fastest) + ", the one that ran";
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2fx", chosen_ns > 0 ? fastest_ns / chosen_ns : 0.0);
  return "fastest: candidate " + std::to_string(fastest) + " (" + format_us(fastest_ns) + ", " + ratio +
         " the time of the one that ran; --algo " + std::to_string(fastest) + " runs it)";
}

}  // namespace

uint32_t lt_alignment(uintptr_t address) {
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

std::string tile_name(int tile_id) { return enum_name(kTiles, tile_id, "undefined", "tile"); }
std::string stages_name(int stages_id) { return enum_name(kStages, stages_id, "undefined", "stages"); }

std::string reduction_scheme_name(int scheme) {
  switch (scheme) {
    case CUBLASLT_REDUCTION_SCHEME_NONE: return "none";
    case CUBLASLT_REDUCTION_SCHEME_INPLACE: return "in place";
    case CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE: return "compute type";
    case CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE: return "output type";
    default: return "scheme " + std::to_string(scheme);
  }
}

int checked_algo_index(int k, size_t count, const std::string& call) {
  if (k >= 0 && size_t(k) < count) return k;
  if (count == 0) throw UnavailableError("cuBLASLt's heuristic returned no candidate for " + call);
  throw UsageError("--algo " + std::to_string(k) + ": cuBLASLt's heuristic returned " + std::to_string(count) +
                   " candidate" + (count == 1 ? "" : "s") + " for " + call + ", so K must be 0 to " +
                   std::to_string(count - 1) + " (--algos N lists them)");
}

std::string candidate_call_name(const GemmCandidateList& list) {
  const GemmCandidate& c = list.candidates.at(static_cast<size_t>(list.chosen));
  return "cublasLtMatmul, candidate " + std::to_string(list.chosen) + " (algo " + std::to_string(c.algo_id) +
         ", tile " + tile_name(c.tile_id) + ", stages " + stages_name(c.stages_id) +
         (c.splitk > 1 ? ", split-K " + std::to_string(c.splitk) : "") + ")";
}

std::vector<std::string> format_candidate_table(const GemmCandidateList& list) {
  std::vector<std::string> lines;
  const size_t n = list.candidates.size();
  lines.push_back("cuBLASLt's candidates for " + list.call + ": the heuristic's first " + std::to_string(n) +
                  (int(n) < list.request.to_ask() ? " (of " + std::to_string(list.request.to_ask()) + " asked)" : "") +
                  "; * ran" + (list.request.force >= 0 ? " (--algo " + std::to_string(list.request.force) + ")" : ""));
  char header[256];
  std::snprintf(header, sizeof header, "  %2s %6s  %-9s %-8s %7s  %-13s %10s %6s %12s %9s", "#", "algo", "tile",
                "stages", "split-K", "reduction", "workspace", "waves", "time", "vs ran");
  lines.emplace_back(header);
  for (size_t i = 0; i < n; ++i) lines.push_back(candidate_row(list, i));
  if (std::string fastest = fastest_line(list); !fastest.empty()) lines.push_back(std::move(fastest));
  if (!list.timing_note.empty()) lines.push_back(list.timing_note);
  return lines;
}

}  // namespace strata::kernels::cuda
