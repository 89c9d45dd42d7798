// matmul and linear on cuBLAS, the compiled path's GEMM with a cuBLASLt epilogue, and cuBLASLt's candidates
// for --algos / --algo (one file: they share the handles, the workspace and the cuBLASLt plan machinery,
// which is why it passes 500 lines; what needs no GPU of the candidates is in gemm_candidates.cpp).
//
// Note [Row-major GEMM on column-major cuBLAS]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// strata's tensors are row-major; cuBLAS is column-major. A row-major [R, C] matrix read column-major is
// its transpose [C, R] with leading dimension C. So instead of C = A B (row-major) strata asks cuBLAS for
// C^T = B^T A^T (column-major), which is the same memory, by passing B first: no copies, no transposes.
//  - matmul: C[M,N] = A[M,K] B[K,N]  ->  gemm(N, N, m=N, n=M, k=K, B ld=N, A ld=K, C ld=N).
//  - linear: Y[B,OUT] = X[B,IN] W[OUT,IN]^T + b  ->  Y^T[OUT,B] = W X^T: W read column-major is W^T
//    [IN,OUT] ld=IN, so op(A) = T; X read column-major is X^T [IN,B] ld=IN, op(B) = N; m=OUT, n=B, k=IN.
//    The bias is per OUT, i.e. per row of the column-major result: exactly cuBLASLt's BIAS epilogue,
//    which adds it inside the GEMM kernel instead of in a second kernel.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "layers/kernels/cuda/cuda_common.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/kernels/cuda/pointwise_launch.h"
#include "lib/op_shapes.h"
#include "lib/zone.h"

namespace strata::kernels::cuda {
namespace {

std::atomic<bool> g_tf32{false};
// --algos / --algo / --time (Note [Which cuBLASLt algorithm]); set by the CUDA module's session.
std::mutex g_request_mutex;
GemmAlgoRequest g_request;

GemmAlgoRequest algo_request() {
  std::lock_guard lock(g_request_mutex);
  return g_request;
}

// What cuBLAS documents for Hopper and newer; also enough for cuBLASLt's heuristics on these shapes.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

struct CublasHandles {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  std::shared_ptr<Storage> workspace;  // shared by both handles: they only ever run on strata's one stream
};
runtime::cuda::PerDevice<CublasHandles> g_handles("cuBLAS");

// Created on first use, so handle creation is part of the first (cold) call, in its own zone.
CublasHandles& handles_for(const Tensor& t, cudaStream_t stream) {
  return g_handles.get(t.device().index, [&](CublasHandles& h) {
    {
      STRATA_ZONE_KIND(zone, Layer::kLibrary, "cublasCreate", ZoneKind::kHandleCreation);
      STRATA_CUBLAS_CHECK(cublasCreate(&h.blas));
    }
    STRATA_CUBLAS_CHECK(cublasSetStream(h.blas, stream));
    {
      STRATA_ZONE_KIND(zone, Layer::kLibrary, "cublasLtCreate", ZoneKind::kHandleCreation);
      STRATA_CUBLAS_CHECK(cublasLtCreate(&h.lt));
    }
    // cuBLAS would otherwise cudaMalloc a workspace of its own per stream; this one comes from the cache.
    h.workspace = runtime::cuda::caching_allocator().allocate(kWorkspaceBytes, t.device());
    STRATA_CUBLAS_CHECK(cublasSetWorkspace(h.blas, h.workspace->data(), kWorkspaceBytes));
  });
}

struct GemmTypes {
  cudaDataType data;
  cublasComputeType_t compute;
  cudaDataType scale;
  // alpha = 1 and beta = 0 or 1 in the scale type.
  float f_one = 1.0f, f_zero = 0.0f;
  double d_one = 1.0, d_zero = 0.0;
  const void* one() const { return scale == CUDA_R_64F ? static_cast<const void*>(&d_one) : &f_one; }
  const void* zero() const { return scale == CUDA_R_64F ? static_cast<const void*>(&d_zero) : &f_zero; }
};

// f16 / bf16 inputs and outputs with f32 accumulation (tensor cores); f32 exact unless --tf32.
GemmTypes gemm_types(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return {CUDA_R_32F, g_tf32.load() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::kF64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    case DType::kF16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::kBF16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
  }
  throw Error("cuBLAS: unknown dtype");
}

// One cuBLASLt plan per linear shape: descriptors plus the algorithm the heuristic picked. Building it is
// host work worth tens of microseconds, paid once in the cold call; steady calls only set the bias pointer.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;
  bool usable = false;  // false: the heuristic found nothing; linear takes the GemmEx path instead
  // With an active GemmAlgoRequest: every candidate the heuristic returned, decoded, and the name of the
  // chosen one for the call's zone (the plan lives for the process, so the zone may keep its c_str()).
  std::vector<cublasLtMatmulAlgo_t> algos;
  std::vector<size_t> workspaces;
  std::unique_ptr<GemmCandidateList> candidates;
  std::string call_name = "cublasLtMatmul";
  bool timed = false;

  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  // Cached plans live for the process; this is for a plan whose construction threw half-way.
  ~LtPlan() {
    for (cublasLtMatrixLayout_t layout : {a, b, c})
      if (layout != nullptr) (void)cublasLtMatrixLayoutDestroy(layout);
    if (desc != nullptr) (void)cublasLtMatmulDescDestroy(desc);
  }
};
// The alignment of the pointers a plan runs on (Note [cuBLASLt operand alignment] in gemm_candidates.h), in
// cuBLASLt's roles: A and B as passed to cublasLtMatmul (the row-major product's right and left operands),
// D (= C, the output) and the epilogue's bias. Part of every plan's key.
struct LtAlignments {
  uint32_t a = 256, b = 256, d = 256, bias = 256;
  auto key() const { return std::tuple(a, b, d, bias); }
};
// device, dtype, tf32, rows, in, out, request, alignments
using LtKey = std::tuple<int, DType, bool, int, int, int, int, int, bool, std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>>;
std::mutex g_lt_mutex;
// The plans with candidates used since the session last took them (take_gemm_candidate_lists), in order.
std::vector<const LtPlan*> g_listed;
void note_listed(const LtPlan& plan) {
  if (plan.candidates && std::find(g_listed.begin(), g_listed.end(), &plan) == g_listed.end()) g_listed.push_back(&plan);
}

// Never destroyed: see Note [Plan caches outlive static destruction] in cudnn_conv.cpp.
std::map<LtKey, std::unique_ptr<LtPlan>>& lt_plans() {
  static auto* cache = new std::map<LtKey, std::unique_ptr<LtPlan>>();
  return *cache;
}

int config_attribute(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  uint32_t value = 0;  // ID, TILE_ID, STAGES_ID, SPLITK_NUM, REDUCTION_SCHEME: each int32_t or uint32_t
  size_t written = 0;
  STRATA_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof value, &written));
  return static_cast<int>(value);
}

GemmCandidate decode_candidate(const cublasLtMatmulHeuristicResult_t& result) {
  GemmCandidate c;
  c.algo_id = config_attribute(result.algo, CUBLASLT_ALGO_CONFIG_ID);
  c.tile_id = config_attribute(result.algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
  c.stages_id = config_attribute(result.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
  c.splitk = config_attribute(result.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  c.reduction_scheme = config_attribute(result.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
  c.workspace_bytes = result.workspaceSize;
  c.waves = result.wavesCount;
  return c;
}

// With an active request: every candidate returned, decoded, and the one --algo K names (or the first) as
// the plan's algorithm; a K beyond them throws UsageError (checked_algo_index).
void keep_candidates(LtPlan& plan, const std::vector<cublasLtMatmulHeuristicResult_t>& results,
                     const GemmAlgoRequest& request, const std::string& call) {
  auto list = std::make_unique<GemmCandidateList>();
  list->call = call;
  list->request = request;
  for (const cublasLtMatmulHeuristicResult_t& r : results) {
    plan.algos.push_back(r.algo);
    plan.workspaces.push_back(r.workspaceSize);
    list->candidates.push_back(decode_candidate(r));
  }
  list->chosen = checked_algo_index(std::max(request.force, 0), results.size(), call);
  plan.algo = plan.algos[static_cast<size_t>(list->chosen)];
  plan.workspace_bytes = plan.workspaces[static_cast<size_t>(list->chosen)];
  plan.call_name = candidate_call_name(*list);
  plan.candidates = std::move(list);
}

// cuBLASLt's heuristic's candidates for a plan's descriptors within strata's workspace: its first one, or
// with an active request as many as it asks for (Note [Which cuBLASLt algorithm]). None leaves the plan
// unusable (its caller falls back, or says so when candidates were asked for); any other failure throws.
// The heuristic is told the operands' alignment (Note [cuBLASLt operand alignment]); a bias below
// kLtMinBiasAlignment, which it cannot be told, leaves the plan unusable without asking it.
void pick_algorithm(const CublasHandles& h, LtPlan& plan, const GemmAlgoRequest& request, const std::string& call,
                    const LtAlignments& align) {
  if (align.bias < kLtMinBiasAlignment) return;
  cublasLtMatmulPreference_t raw_pref = nullptr;
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  const std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, decltype(&cublasLtMatmulPreferenceDestroy)> pref(
      raw_pref, &cublasLtMatmulPreferenceDestroy);
  const uint64_t max_workspace = kWorkspaceBytes;
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &max_workspace, sizeof max_workspace));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align.a}, {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align.d}, {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align.d}};
  for (const auto& [attribute, bytes] : alignments)
    STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.get(), attribute, &bytes, sizeof bytes));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(request.active() ? request.to_ask() : 1));
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(h.lt, plan.desc, plan.a, plan.b, plan.c, plan.c, pref.get(),
                                                               int(results.size()), results.data(), &returned);
  // NOT_SUPPORTED / no result: this combination has no epilogue kernel; fall back rather than fail.
  if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED) STRATA_CUBLAS_CHECK(status);
  if (status != CUBLAS_STATUS_SUCCESS) returned = 0;
  results.resize(static_cast<size_t>(std::max(returned, 0)));
  std::erase_if(results, [](const cublasLtMatmulHeuristicResult_t& r) { return r.state != CUBLAS_STATUS_SUCCESS; });
  if (results.empty()) return;
  plan.usable = true;
  if (request.active()) {
    keep_candidates(plan, results, request, call);
  } else {
    plan.algo = results[0].algo;
    plan.workspace_bytes = results[0].workspaceSize;
  }
}

// --time: each candidate run on the call's operands (`run` issues one cublasLtMatmul with the algorithm and
// workspace it is given) between CUDA events on strata's stream, once to warm up and kTimedRuns times
// measured; the median is the candidate's time. Once per plan, in the cold call's algorithm-search zone.
// Not inside a stream capture (a CUDA Graph's recording), where nothing runs and events cannot be waited on.
void time_candidates(LtPlan& plan, cudaStream_t stream,
                     const std::function<void(const cublasLtMatmulAlgo_t&, size_t)>& run) {
  if (!plan.candidates || !plan.candidates->request.time || plan.timed) return;
  plan.timed = true;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  STRATA_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) {
    plan.candidates->timing_note = "--time: not measured: the first call of this shape was captured into a CUDA Graph";
    return;
  }
  STRATA_ZONE_KIND(zone, Layer::kLibrary, "cuBLASLt candidates timed (--time)", ZoneKind::kAlgorithmSearch);
  std::array<cudaEvent_t, kTimedRuns + 1> events{};
  for (cudaEvent_t& e : events) STRATA_CUDA_CHECK(cudaEventCreate(&e));
  const auto destroy = [&] { for (cudaEvent_t e : events) (void)cudaEventDestroy(e); };
  try {
    for (size_t i = 0; i < plan.algos.size(); ++i) {
      run(plan.algos[i], plan.workspaces[i]);
      STRATA_CUDA_CHECK(cudaEventRecord(events[0], stream));
      for (int r = 1; r <= kTimedRuns; ++r) {
        run(plan.algos[i], plan.workspaces[i]);
        STRATA_CUDA_CHECK(cudaEventRecord(events[static_cast<size_t>(r)], stream));
      }
      STRATA_CUDA_CHECK(cudaEventSynchronize(events[kTimedRuns]));
      std::array<double, kTimedRuns> ns{};
      for (size_t r = 0; r < ns.size(); ++r) {
        float ms = 0;
        STRATA_CUDA_CHECK(cudaEventElapsedTime(&ms, events[r], events[r + 1]));
        ns[r] = double(ms) * 1e6;
      }
      std::sort(ns.begin(), ns.end());
      plan.candidates->candidates[i].time_ns = ns[ns.size() / 2];
    }
  } catch (...) {
    destroy();
    throw;
  }
  destroy();
}

// out = plan's GEMM of the two operands (cuBLASLt's column-major A and B: the row-major product's right
// and left operands), with the plan's epilogue: --time's candidates first (once per plan, nothing without
// --time), then the chosen algorithm inside a library zone named `zone`.
void run_lt_plan(const CublasHandles& h, LtPlan& plan, const GemmTypes& t, const void* lt_a, const void* lt_b,
                 Tensor& out, cudaStream_t stream, const char* zone) {
  const auto run = [&](const cublasLtMatmulAlgo_t& algo, size_t workspace) {
    STRATA_CUBLAS_CHECK(cublasLtMatmul(h.lt, plan.desc, t.one(), lt_a, plan.a, lt_b, plan.b, t.zero(), out.data_ptr(),
                                       plan.c, out.data_ptr(), plan.c, &algo, h.workspace->data(), workspace, stream));
  };
  time_candidates(plan, stream, run);
  STRATA_ZONE(call, Layer::kLibrary, zone);
  run(plan.algo, plan.workspace_bytes);
}

std::string gemm_call(const char* op, int m, int k, int n, DType dtype) {
  return std::string(op) + " " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) + " " +
         std::string(dtype_name(dtype)) + (g_tf32.load() ? " (tf32)" : "");
}

// " (bias at 4-byte alignment)" when the bias alone kept cuBLASLt's epilogue out, else "".
std::string bias_alignment_reason(const LtAlignments& align) {
  return align.bias < kLtMinBiasAlignment
             ? " (its bias lies at " + std::to_string(align.bias) + "-byte alignment; cuBLASLt's bias epilogue wants " +
                   std::to_string(kLtMinBiasAlignment) + ")"
             : "";
}

LtPlan& lt_plan(const CublasHandles& h, const Tensor& input, const Tensor& weight, const Tensor& bias,
                const Tensor& output, int rows, int in, int out, const GemmTypes& t, const GemmAlgoRequest& request) {
  // cuBLASLt's A is the weight, its B the input (Note [Row-major GEMM on column-major cuBLAS]).
  const LtAlignments align{lt_alignment(weight.data_ptr()), lt_alignment(input.data_ptr()),
                           lt_alignment(output.data_ptr()), lt_alignment(bias.data_ptr())};
  const LtKey key{input.device().index, input.dtype(), g_tf32.load(), rows, in, out, request.list, request.force,
                  request.time, align.key()};
  std::lock_guard lock(g_lt_mutex);
  // Inserted only once built: a cuBLASLt failure below throws, and an empty entry left behind would be
  // dereferenced by the next call of this shape.
  if (auto it = lt_plans().find(key); it != lt_plans().end()) {
    note_listed(*it->second);
    return *it->second;
  }
  STRATA_ZONE_KIND(zone, Layer::kLibrary, "cublasLtMatmulAlgoGetHeuristic", ZoneKind::kAlgorithmSearch);
  auto plan = std::make_unique<LtPlan>();
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, t.compute, t.scale));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  const void* bias_ptr = bias.data_ptr();
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  // Set again by every call (the plan is shared by every call of this shape and alignment).
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr));
  // Layouts as stored (before op): see Note [Row-major GEMM on column-major cuBLAS].
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, t.data, static_cast<uint64_t>(in), static_cast<uint64_t>(out), in));
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, t.data, static_cast<uint64_t>(in), static_cast<uint64_t>(rows), in));
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, t.data, static_cast<uint64_t>(out), static_cast<uint64_t>(rows), out));
  const std::string call = gemm_call("linear", rows, in, out, input.dtype());
  pick_algorithm(h, *plan, request, call, align);
  if (request.active() && !plan->usable) {
    throw UnavailableError("--algo/--algos: cuBLASLt's heuristic has no bias-epilogue kernel for " + call +
                           bias_alignment_reason(align) +
                           ", so linear runs cublasGemmEx, which lists no candidates; leave out --algo/--algos");
  }
  tracing::annotate(
      AnnotationKind::kPlan,
      plan->usable ? call + ": cuBLASLt's heuristic gave a bias-epilogue kernel (workspace " +
                         format_bytes(double(plan->workspace_bytes)) + ")" +
                         (plan->candidates ? "; ran " + plan->call_name : "")
                   : call + ": cuBLASLt has no bias-epilogue kernel for this shape" + bias_alignment_reason(align) +
                            "; cublasGemmEx + strata's bias kernel instead");
  LtPlan& kept = *lt_plans().emplace(key, std::move(plan)).first->second;
  note_listed(kept);
  return kept;
}

}  // namespace

void set_tf32(bool enabled) { g_tf32.store(enabled); }
bool tf32_enabled() { return g_tf32.load(); }

void set_gemm_algo_request(const GemmAlgoRequest& request) {
  std::lock_guard lock(g_request_mutex);
  g_request = request;
}

std::vector<GemmCandidateList> take_gemm_candidate_lists() {
  std::lock_guard lock(g_lt_mutex);
  std::vector<GemmCandidateList> lists;
  for (const LtPlan* plan : g_listed) lists.push_back(*plan->candidates);
  g_listed.clear();
  return lists;
}

namespace {

// Note [Transposed GEMM operands] (layers/kernels/cpu/gemm.cpp) on cuBLAS: a 2-D operand with unit stride
// along either dim is read as it lies. Row-major storage read column-major is the transpose (Note
// [Row-major GEMM on column-major cuBLAS]), so an operand stored as is takes OP_N and one stored
// transposed OP_T, each with the view's own leading dimension: the same flags the CPU passes to BLAS.
struct Operand {
  bool transposed;  // the memory holds op(t)'s transpose, row-major
  int ld;
};
// The operand's matrices are its last two dims (a batch of them for more dims).
Operand operand(const char* op, const Tensor& t, bool transpose) {
  const int r = t.dim() - 2, c = t.dim() - 1;
  const int64_t rows = t.size(r), cols = t.size(c);
  Operand o{false, checked_int(op, std::max<int64_t>(1, cols))};
  if (!t.is_contiguous()) {
    if (t.stride(c) == 1 && t.stride(r) >= std::max<int64_t>(1, cols)) o = Operand{false, checked_int(op, t.stride(r))};
    else if (t.stride(r) == 1 && t.stride(c) >= std::max<int64_t>(1, rows)) o = Operand{true, checked_int(op, t.stride(c))};
  }
  o.transposed = o.transposed != transpose;
  return o;
}
cublasOperation_t op_of(const Operand& o) { return o.transposed ? CUBLAS_OP_T : CUBLAS_OP_N; }

// Only contiguous tensors and 2-D views with a unit stride reach matmul and gemm (the registration copies
// the rest with contiguous(): kCudaGemmOperands in layers/ops/operators.h).
void check_gemm_input(const char* op, const Tensor& t) {
  if (!t.device().is_cuda()) throw UsageError(std::string(op) + ": CUDA kernel got " + t.str());
  if (!t.is_contiguous() && t.dim() < 2)
    throw UsageError(std::string(op) + ": CUDA kernel needs contiguous tensors or views with a unit stride in their last two dims");
}

// The call's zone: the flags (self first, as the user wrote the product) when an operand came as a view.
const char* gemm_zone_name(bool views, const Operand& self, const Operand& other) {
  static constexpr const char* kNames[] = {"cublasGemmEx NN", "cublasGemmEx NT", "cublasGemmEx TN", "cublasGemmEx TT"};
  return views ? kNames[(self.transposed ? 2 : 0) + (other.transposed ? 1 : 0)] : "cublasGemmEx";
}

// C = op(A) @ op(B) for matmul and gemm, once the shapes are checked (each op opened its own zone).
Tensor run_gemm(const char* op, const Tensor& self, const Tensor& other, bool transpose_self, bool transpose_other,
                const Shape& out_shape) {
  const int m = checked_int(op, out_shape[0]), n = checked_int(op, out_shape[1]);
  const int k = checked_int(op, transpose_self ? self.size(0) : self.size(1));
  const cudaStream_t stream = device_stream(self);
  CublasHandles& h = handles_for(self, stream);
  Tensor out = Tensor::empty(out_shape, self.dtype(), self.device());
  if (out.numel() == 0) return out;
  if (k == 0) {  // Note [Empty reductions] in cuda_common.h
    fill_zeros(out, stream);
    return out;
  }
  const GemmTypes t = gemm_types(self.dtype());
  // Note [Row-major GEMM on column-major cuBLAS], with operands that may be stored transposed: C^T =
  // op(B)^T op(A)^T. A row-major B [K,N] read column-major is already op(B)^T (OP_N, ld N); stored [N,K]
  // (transpose_other, or a transposed view) it reads as op(B), so cuBLAS transposes it (OP_T, ld K, or the
  // view's stride). Likewise for A.
  const Operand a = operand(op, self, transpose_self), b = operand(op, other, transpose_other);
  STRATA_ZONE(call, Layer::kLibrary, gemm_zone_name(!self.is_contiguous() || !other.is_contiguous(), a, b));
  STRATA_CUBLAS_CHECK(cublasGemmEx(h.blas, op_of(b), op_of(a), n, m, k, t.one(), other.data_ptr(), t.data, b.ld,
                                   self.data_ptr(), t.data, a.ld, t.zero(), out.data_ptr(), t.data, n, t.compute,
                                   CUBLAS_GEMM_DEFAULT));
  return out;
}

}  // namespace

namespace {

// Where each matrix of the broadcast batch starts in an operand, and whether that is `i * stride` (one
// cublasGemmStridedBatchedEx call can read it): a broadcast or absent batch is stride 0.
struct BatchOffsets {
  std::vector<int64_t> at;
  bool strided = true;
  int64_t stride = 0;
};
BatchOffsets batch_offsets(const op_shapes::MatmulGeometry& g, const Tensor& t) {
  BatchOffsets o;
  o.at.resize(static_cast<size_t>(g.batch_count), 0);
  if (t.dim() > 2)
    for (int64_t i = 0; i < g.batch_count; ++i) o.at[static_cast<size_t>(i)] = op_shapes::batch_offset(g.batch, i, t.sizes(), t.strides());
  if (g.batch_count > 1) o.stride = o.at[1] - o.at[0];
  for (int64_t i = 0; i < g.batch_count; ++i) o.strided = o.strided && o.at[static_cast<size_t>(i)] == i * o.stride;
  return o;
}

// Note [Batched matmul on the CPU] (layers/kernels/cpu/gemm.cpp) on cuBLAS: 1-D operands as a row [1,K]
// and a column [K,1]; a batch whose matrices lie at a fixed stride in both operands (a broadcast operand
// at stride 0) is one cublasGemmStridedBatchedEx, any other batch (a broadcast dim in the middle) one
// cublasGemmEx per matrix. Compiled; not yet run on a GPU.
Tensor run_batched_matmul(const Tensor& self, const Tensor& other, const op_shapes::MatmulGeometry& g) {
  const char* op = "matmul";
  const int m = checked_int(op, g.m), n = checked_int(op, g.n), k = checked_int(op, g.k);
  const cudaStream_t stream = device_stream(self);
  CublasHandles& h = handles_for(self, stream);
  Tensor out = Tensor::empty(g.out, self.dtype(), self.device());
  if (out.numel() == 0) return out;
  if (k == 0) {  // Note [Empty reductions] in cuda_common.h
    fill_zeros(out, stream);
    return out;
  }
  const GemmTypes t = gemm_types(self.dtype());
  const Operand a = self.dim() == 1 ? Operand{false, k} : operand(op, self, false);
  const Operand b = other.dim() == 1 ? Operand{false, 1} : operand(op, other, false);
  const BatchOffsets ao = batch_offsets(g, self), bo = batch_offsets(g, other);
  const auto esize = static_cast<int64_t>(element_size(self.dtype()));
  const auto* pa = static_cast<const char*>(self.data_ptr());
  const auto* pb = static_cast<const char*>(other.data_ptr());
  auto* pc = static_cast<char*>(out.data_ptr());
  if (g.batch_count == 1 || (ao.strided && bo.strided)) {
    STRATA_ZONE(call, Layer::kLibrary, "cublasGemmStridedBatchedEx");
    STRATA_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        h.blas, op_of(b), op_of(a), n, m, k, t.one(), pb, t.data, b.ld, bo.stride, pa, t.data, a.ld, ao.stride,
        t.zero(), pc, t.data, n, static_cast<long long>(g.m) * g.n, checked_int(op, g.batch_count), t.compute,
        CUBLAS_GEMM_DEFAULT));
    return out;
  }
  STRATA_ZONE(call, Layer::kLibrary, "cublasGemmEx, loop over the batch");
  for (int64_t i = 0; i < g.batch_count; ++i) {
    STRATA_CUBLAS_CHECK(cublasGemmEx(h.blas, op_of(b), op_of(a), n, m, k, t.one(), pb + bo.at[static_cast<size_t>(i)] * esize,
                                     t.data, b.ld, pa + ao.at[static_cast<size_t>(i)] * esize, t.data, a.ld, t.zero(),
                                     pc + i * g.m * g.n * esize, t.data, n, t.compute, CUBLAS_GEMM_DEFAULT));
  }
  return out;
}

}  // namespace

namespace {
Tensor run_lt_matmul(const Tensor& self, const Tensor& other, const op_shapes::MatmulGeometry& g,
                     const GemmAlgoRequest& request);  // below, beside the other cuBLASLt plans
}  // namespace

Tensor matmul(const Tensor& self, const Tensor& other) {
  STRATA_ZONE(zone, Layer::kLibrary, "matmul (cuda)");
  op_shapes::check_operands("matmul", check_gemm_input, self, other);
  const op_shapes::MatmulGeometry g = op_shapes::matmul_geometry(self.sizes(), other.sizes());
  if (const GemmAlgoRequest request = algo_request(); request.active()) return run_lt_matmul(self, other, g, request);
  if (self.dim() == 2 && other.dim() == 2) return run_gemm("matmul", self, other, false, false, g.out);
  return run_batched_matmul(self, other, g);
}

Tensor gemm(const Tensor& self, const Tensor& other, int64_t transpose_self, int64_t transpose_other) {
  STRATA_ZONE(zone, Layer::kLibrary, "gemm (cuda)");
  op_shapes::check_operands("gemm", check_gemm_input, self, other);
  return run_gemm("gemm", self, other, transpose_self != 0, transpose_other != 0,
                  op_shapes::gemm(self.sizes(), other.sizes(), transpose_self, transpose_other));
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  STRATA_ZONE(zone, Layer::kLibrary, "linear (cuda)");
  op_shapes::check_operands("linear", check_cuda_input, input, weight, bias);
  const Shape out_shape = op_shapes::linear(input.sizes(), weight.sizes(), bias.defined() ? &bias.sizes() : nullptr);
  // input [..., IN], contiguous: its leading dims are the GEMM's rows.
  const int rows = checked_int("linear", op_shapes::linear_rows(input.sizes()));
  const int out_features = checked_int("linear", out_shape[out_shape.ndim - 1]);
  const int in_features = checked_int("linear", input.size(input.dim() - 1));
  const cudaStream_t stream = device_stream(input);
  CublasHandles& h = handles_for(input, stream);
  Tensor out = Tensor::empty(out_shape, input.dtype(), input.device());
  if (out.numel() == 0) return out;
  if (in_features == 0) {  // Note [Empty reductions] in cuda_common.h: the bias alone, or zeros
    if (bias.defined()) launch_bias_rows(input.dtype(), bias.data_ptr(), out.data_ptr(), rows, out_features, stream);
    else fill_zeros(out, stream);
    return out;
  }
  const GemmTypes t = gemm_types(input.dtype());
  const GemmAlgoRequest request = algo_request();
  if (request.active() && (!bias.defined() || input.dtype() == DType::kF64)) {
    throw UsageError("--algo/--algos: linear " + std::string(bias.defined() ? "in f64" : "without a bias") +
                     " runs cublasGemmEx, which lists no candidates; they apply to linear with a bias in f32, f16 "
                     "or bf16 (cuBLASLt's bias epilogue) and to 2-D matmul");
  }

  // cuBLASLt's f64 GEMMs have no bias epilogue; those take the GemmEx path below.
  if (bias.defined() && input.dtype() != DType::kF64) {
    LtPlan& plan = lt_plan(h, input, weight, bias, out, rows, in_features, out_features, t, request);
    if (plan.usable) {
      const void* bias_ptr = bias.data_ptr();
      STRATA_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr));
      run_lt_plan(h, plan, t, weight.data_ptr(), input.data_ptr(), out, stream, plan.call_name.c_str());
      return out;
    }
  }
  // addmm: seed every output row with the bias, then let the GEMM accumulate onto it (beta = 1).
  if (bias.defined()) {
    STRATA_ZONE(seed, Layer::kLibrary, "bias_rows_kernel<<<>>>");
    launch_bias_rows(input.dtype(), bias.data_ptr(), out.data_ptr(), rows, out_features, stream);
  }
  STRATA_ZONE(call, Layer::kLibrary, "cublasGemmEx");
  STRATA_CUBLAS_CHECK(cublasGemmEx(h.blas, CUBLAS_OP_T, CUBLAS_OP_N, out_features, rows, in_features, t.one(),
                                   weight.data_ptr(), t.data, in_features, input.data_ptr(), t.data, in_features,
                                   bias.defined() ? t.one() : t.zero(), out.data_ptr(), t.data, out_features, t.compute,
                                   CUBLAS_GEMM_DEFAULT));
  return out;
}

// ---- A GEMM with a cuBLASLt epilogue, for the compiled path's GEMM-epilogue kernels (cuda_kernels.h) ----

namespace {

struct EpilogueGemm {
  int m, k, n;
};
EpilogueGemm epilogue_dims(const Tensor& a, const Tensor& b, bool b_transposed) {
  if (a.dim() != 2 || b.dim() != 2) throw UsageError("cublasLt epilogue GEMM: operands must be 2-D");
  return {checked_int("gemm epilogue", a.size(0)), checked_int("gemm epilogue", a.size(1)),
          checked_int("gemm epilogue", b_transposed ? b.size(0) : b.size(1))};
}

// + transposed, epilogue, bias, request, alignments
using LtEpilogueKey = std::tuple<int, DType, bool, int, int, int, bool, int, bool, int, int, bool,
                                 std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>>;

// Never destroyed, as lt_plans().
std::map<LtEpilogueKey, std::unique_ptr<LtPlan>>& lt_epilogue_plans() {
  static auto* cache = new std::map<LtEpilogueKey, std::unique_ptr<LtPlan>>();
  return *cache;
}

// D = epilogue(A @ op(B) + bias) with strata's row-major tensors read column-major (Note [Row-major GEMM
// on column-major cuBLAS]): cuBLASLt's A is strata's b ([K, N], or linear's weight [N, K] taken with
// OP_T), its B strata's a ([M, K]), D [N, M] column-major is the row-major [M, N] result, and the bias
// vector runs along D's rows: one value per output column, linear's bias.
// With an active request (matmul under --algo / --algos: the DEFAULT epilogue, no bias) the plan keeps the
// heuristic's candidates (Note [Which cuBLASLt algorithm]).
// `out` is where D will be written: its alignment is part of the plan (Note [cuBLASLt operand alignment]).
LtPlan& lt_epilogue_plan(const CublasHandles& h, const Tensor& a, const Tensor& b, bool b_transposed,
                         const Tensor& bias, cublasLtEpilogue_t epilogue, const GemmTypes& t, const void* out,
                         const GemmAlgoRequest& request = {}) {
  const EpilogueGemm d = epilogue_dims(a, b, b_transposed);
  // cuBLASLt's A is strata's b, its B strata's a (below).
  const LtAlignments align{lt_alignment(b.data_ptr()), lt_alignment(a.data_ptr()), lt_alignment(out),
                           lt_alignment(bias.data_ptr())};
  const LtEpilogueKey key{a.device().index, a.dtype(), g_tf32.load(), d.m, d.k, d.n, b_transposed, int(epilogue),
                          bias.defined(), request.list, request.force, request.time, align.key()};
  std::lock_guard lock(g_lt_mutex);
  if (auto it = lt_epilogue_plans().find(key); it != lt_epilogue_plans().end()) {
    note_listed(*it->second);
    return *it->second;
  }
  STRATA_ZONE_KIND(zone, Layer::kLibrary, "cublasLtMatmulAlgoGetHeuristic", ZoneKind::kAlgorithmSearch);
  auto plan = std::make_unique<LtPlan>();
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, t.compute, t.scale));
  const cublasOperation_t transa = b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, transb = CUBLAS_OP_N;
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  if (bias.defined()) {  // set again by every call: the plan is shared by every call of this shape
    const void* bias_ptr = bias.data_ptr();
    STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr));
  }
  // Layouts as stored, before op: b is column-major N x K (ld N), or K x N (ld K) when transposed.
  const auto u = [](int v) { return static_cast<uint64_t>(v); };
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, t.data, u(b_transposed ? d.k : d.n), u(b_transposed ? d.n : d.k),
                                                 b_transposed ? d.k : d.n));
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, t.data, u(d.k), u(d.m), d.k));
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, t.data, u(d.n), u(d.m), d.n));
  const std::string call = request.active() ? gemm_call("matmul", d.m, d.k, d.n, a.dtype())
                                             : "gemm epilogue " + std::to_string(d.m) + "x" + std::to_string(d.k) + "x" +
                                                   std::to_string(d.n) + " " + std::string(dtype_name(a.dtype()));
  pick_algorithm(h, *plan, request, call, align);
  tracing::annotate(AnnotationKind::kPlan,
                    call + ": cuBLASLt's heuristic " +
                        (plan->usable ? "gave a kernel (workspace " + format_bytes(double(plan->workspace_bytes)) + ")" +
                                            (plan->candidates ? "; ran " + plan->call_name : "")
                                      : "has no kernel for this epilogue" + bias_alignment_reason(align)));
  LtPlan& kept = *lt_epilogue_plans().emplace(key, std::move(plan)).first->second;
  note_listed(kept);
  return kept;
}

// matmul under --algo / --algos: one cublasLtMatmul with the candidate the request names, after --time has
// measured every candidate on these operands (Note [Which cuBLASLt algorithm]).
Tensor run_lt_matmul(const Tensor& self, const Tensor& other, const op_shapes::MatmulGeometry& g,
                     const GemmAlgoRequest& request) {
  if (self.dim() != 2 || other.dim() != 2) {
    throw UsageError("--algo/--algos: matmul [" + self.sizes().str() + "] @ [" + other.sizes().str() +
                     "] is not a 2-D product (cuBLAS runs it batched, which lists no candidates); they apply to 2-D "
                     "matmul and to linear");
  }
  if (!self.is_contiguous() || !other.is_contiguous())
    throw UsageError("--algo/--algos: matmul's operands must be contiguous for cuBLASLt's layouts here; leave out --view");
  const cudaStream_t stream = device_stream(self);
  CublasHandles& h = handles_for(self, stream);
  Tensor out = Tensor::empty(g.out, self.dtype(), self.device());
  if (out.numel() == 0 || g.k == 0)
    throw UsageError("--algo/--algos: matmul " + g.out.str() + " over k = " + std::to_string(g.k) + " runs no GEMM");
  const GemmTypes t = gemm_types(self.dtype());
  LtPlan& plan =
      lt_epilogue_plan(h, self, other, false, Tensor(), CUBLASLT_EPILOGUE_DEFAULT, t, out.data_ptr(), request);
  if (!plan.usable) {
    throw UnavailableError("--algo/--algos: cuBLASLt's heuristic has no kernel for " +
                           gemm_call("matmul", int(g.m), int(g.k), int(g.n), self.dtype()));
  }
  run_lt_plan(h, plan, t, other.data_ptr(), self.data_ptr(), out, stream, plan.call_name.c_str());
  return out;
}

}  // namespace

bool lt_epilogue_available(const Tensor& a, const Tensor& b, bool b_transposed, const Tensor& bias, int epilogue) {
  const cudaStream_t stream = device_stream(a);
  const CublasHandles& h = handles_for(a, stream);
  if (a.numel() == 0 || b.numel() == 0) return false;  // Note [Empty reductions]: the caller's GEMM handles them
  // The output will be a fresh block of the caching allocator: 512-byte aligned, which lt_alignment makes 256.
  return lt_epilogue_plan(h, a, b, b_transposed, bias, static_cast<cublasLtEpilogue_t>(epilogue),
                          gemm_types(a.dtype()), nullptr).usable;
}

void lt_matmul_epilogue(const Tensor& a, const Tensor& b, bool b_transposed, const Tensor& bias, int epilogue,
                        Tensor& out) {
  const cudaStream_t stream = device_stream(a);
  const CublasHandles& h = handles_for(a, stream);
  const GemmTypes t = gemm_types(a.dtype());
  LtPlan& plan =
      lt_epilogue_plan(h, a, b, b_transposed, bias, static_cast<cublasLtEpilogue_t>(epilogue), t, out.data_ptr());
  // lt_epilogue_available said yes for operands at the allocator's alignment; these lie elsewhere (views at
  // an offset), and cuBLASLt has nothing for them, or the bias is too loosely aligned for its epilogue.
  if (!plan.usable) {
    throw UnavailableError("cublasLt epilogue GEMM: no algorithm for operands at alignments A " +
                           std::to_string(lt_alignment(b.data_ptr())) + ", B " + std::to_string(lt_alignment(a.data_ptr())) +
                           ", D " + std::to_string(lt_alignment(out.data_ptr())) + ", bias " +
                           std::to_string(lt_alignment(bias.data_ptr())) + " bytes (Note [cuBLASLt operand alignment])");
  }
  if (bias.defined()) {  // the plan is shared by every call of this shape: its bias pointer is this call's
    const void* bias_ptr = bias.data_ptr();
    STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr));
  }
  run_lt_plan(h, plan, t, b.data_ptr(), a.data_ptr(), out, stream, "cublasLtMatmul");
}

}  // namespace strata::kernels::cuda
