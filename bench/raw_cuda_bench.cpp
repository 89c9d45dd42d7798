// raw_cuda_bench: the same GPU work strata traces, called directly on cuBLAS / cuBLASLt / cuDNN with no
// strata layer in between: the baseline that says what strata's binding, dispatch and bookkeeping add, and
// whether strata's kernels run as fast as the library's own.
//
// A standalone baseline program, not a strata layer: it includes cupti.h itself and no strata header at
// all. strata's own code keeps cupti.h inside layers/device/cupti (so that the rest is testable without a
// GPU); a baseline must not go through strata's code, or it would measure strata too.
//
//   raw_cuda_bench [--iterations N] [--markdown] [--json FILE] [--seed S]
//
// Three phases per case, each after 20 warm-up calls:
//  1. host (CUPTI off): the library call alone ("enqueue") and call + cudaStreamSynchronize ("wall");
//  2. kernels (CUPTI CONCURRENT_KERNEL activity records, as strata measures its gpu row): each call runs
//     alone between two cuptiGetTimestamp() marks and a synchronisation; the call's GPU time is the union of
//     the kernel intervals inside its window ("kernel"), beside their sum ("kernel_sum"); medians over the
//     N calls;
//  3. the same with CUPTI's RUNTIME and DRIVER API records on as well ("kernel_api_traced"), the kinds
//     strata's session collects: recording every API call slows the library's host side, and a call that
//     spreads its kernels over several streams (cuDNN's FFT_TILING) overlaps them less when its host is
//     slower, so this is the figure strata's gpu row is held against.
// Inputs are uniform in [-1, 1) (seeded), like strata's. Shapes match scripts/gpu-validate: matmul 1024
// (f32, tf32, bf16; cublasGemmEx), linear 32x768x3072 (cuBLASLt bias epilogue), conv 32x64x56x56 -> 64, 3x3,
// pad 1, exact f32 (cudnnConvolutionForward alone with the algorithm cudnnFindConvolutionForwardAlgorithmEx
// ranks fastest among FMA-math results, as strata; strata adds its bias with a kernel of its own, which
// gpu-validate leaves out of the comparison, so no bias here).
#define RAW_BENCH_NAME "raw_cuda_bench"
#include <cublasLt.h>
#include <cupti.h>
#include <cxxabi.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "raw_bench_common.h"

using namespace rawbench;

namespace {

// ---- CUPTI activity collection --------------------------------------------------------------------------------

struct KernelRecord {
  uint64_t start = 0, end = 0;
  std::string name;
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint16_t registers = 0;
  uint32_t stream = 0;
};

std::mutex g_records_mutex;
std::vector<KernelRecord> g_kernels;
size_t g_dropped = 0;

// As strata's CUPTI layer: only "_Z" names are demangled (a plain name such as cuBLAS's sm90_xmma_... could
// otherwise be read as a mangled type), so both sides print the same kernel names.
std::string demangle(const char* name) {
  if (name == nullptr) return "(unnamed kernel)";
  if (std::strncmp(name, "_Z", 2) != 0) return name;
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(name);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = size_t{8} << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = *buffer != nullptr ? kBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid) {
  std::vector<KernelRecord> got;
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    KernelRecord r;
    r.start = k->start;
    r.end = k->end;
    r.name = demangle(k->name);
    r.grid[0] = uint32_t(k->gridX), r.grid[1] = uint32_t(k->gridY), r.grid[2] = uint32_t(k->gridZ);
    r.block[0] = uint32_t(k->blockX), r.block[1] = uint32_t(k->blockY), r.block[2] = uint32_t(k->blockZ);
    r.registers = k->registersPerThread;
    r.stream = k->streamId;
    got.push_back(std::move(r));
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) != CUPTI_SUCCESS) dropped = 0;
  std::free(buffer);
  std::lock_guard lock(g_records_mutex);
  g_dropped += dropped;
  for (KernelRecord& r : got) g_kernels.push_back(std::move(r));
}

std::string cupti_error(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s != nullptr ? s : "CUPTI error " + std::to_string(int(r));
}

// ---- cases ----------------------------------------------------------------------------------------------------

struct Case {
  std::string key;   // what gpu-validate matches strata's trace of the same shape with
  std::string name;  // the library call, for people
  double flops = 0;
  std::function<void()> call;
  std::string detail;      // e.g. the cuDNN algorithm
  std::string extra_json;  // more fields for --json, each ", \"k\": v"
  // measured
  Stats enqueue, wall, kernel;
  // The same calls' kernels with CUPTI's runtime and driver API records on as well (as strata records), and
  // per call the sum of the kernels' durations in both phases (the union is less where kernels overlap).
  Stats kernel_api_traced, kernel_sum, kernel_sum_api_traced;
  double kernels_per_call = 0;
  std::map<std::string, std::vector<double>> kernel_durations;  // name -> durations (ns)
  std::map<std::string, std::string> kernel_shape;              // name -> "grid a,b,c block x,y,z regs r"
  std::map<std::string, std::vector<uint32_t>> kernel_streams;  // name -> every stream it ran on
  std::vector<std::pair<uint64_t, uint64_t>> windows;           // CUPTI timestamps around each timed call
  std::vector<std::pair<uint64_t, uint64_t>> windows_api_traced;  // the same, with API records on
};

void measure_host(Case& c, int iterations, cudaStream_t stream) {
  for (int i = 0; i < 20; ++i) c.call();
  CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<double> enqueue, wall;
  for (int i = 0; i < iterations; ++i) {
    const double t0 = now_ns();
    c.call();
    const double t1 = now_ns();
    CUDA_OK(cudaStreamSynchronize(stream));
    const double t2 = now_ns();
    enqueue.push_back(t1 - t0);
    wall.push_back(t2 - t0);
  }
  c.enqueue = stats(enqueue);
  c.wall = stats(wall);
}

void measure_kernels(Case& c, int iterations, cudaStream_t stream, std::vector<std::pair<uint64_t, uint64_t>>& windows) {
  for (int i = 0; i < 20; ++i) c.call();
  CUDA_OK(cudaStreamSynchronize(stream));
  for (int i = 0; i < iterations; ++i) {
    uint64_t t0 = 0, t1 = 0;
    cuptiGetTimestamp(&t0);
    c.call();
    CUDA_OK(cudaStreamSynchronize(stream));
    cuptiGetTimestamp(&t1);
    windows.emplace_back(t0, t1);
  }
}

// Gives each kernel record to the timed call whose window holds its start; per call, the union of its
// kernels' intervals (overlapping kernels count once), as strata's gpu row, and their sum. `api_traced`:
// the phase with API records on, whose figures go to kernel_api_traced and kernel_sum_api_traced; the
// per-kernel listing is the first phase's.
void attribute_kernels(std::vector<Case>& cases, bool api_traced) {
  auto windows_of = [api_traced](Case& c) -> std::vector<std::pair<uint64_t, uint64_t>>& {
    return api_traced ? c.windows_api_traced : c.windows;
  };
  struct Window {
    uint64_t begin, end;
    Case* c;
    size_t index;
  };
  std::vector<Window> windows;
  for (Case& c : cases)
    for (size_t i = 0; i < windows_of(c).size(); ++i)
      windows.push_back({windows_of(c)[i].first, windows_of(c)[i].second, &c, i});
  std::sort(windows.begin(), windows.end(), [](const Window& a, const Window& b) { return a.begin < b.begin; });
  std::map<std::pair<Case*, size_t>, std::vector<std::pair<uint64_t, uint64_t>>> per_call;
  for (const KernelRecord& k : g_kernels) {
    auto it = std::upper_bound(windows.begin(), windows.end(), k.start,
                               [](uint64_t t, const Window& w) { return t < w.begin; });
    if (it == windows.begin()) continue;
    --it;
    if (k.start > it->end) continue;  // a warm-up call's kernel
    per_call[{it->c, it->index}].emplace_back(k.start, k.end);
    if (api_traced) continue;
    it->c->kernel_durations[k.name].push_back(double(k.end - k.start));
    std::vector<uint32_t>& streams = it->c->kernel_streams[k.name];
    if (std::find(streams.begin(), streams.end(), k.stream) == streams.end()) streams.push_back(k.stream);
    char shape[160];
    std::snprintf(shape, sizeof shape, "grid %u,%u,%u block %u,%u,%u regs %u", k.grid[0], k.grid[1], k.grid[2],
                  k.block[0], k.block[1], k.block[2], unsigned(k.registers));
    it->c->kernel_shape[k.name] = shape;
  }
  for (Case& c : cases) {
    std::vector<double> union_ns, sum_ns;
    size_t kernels = 0;
    for (size_t i = 0; i < windows_of(c).size(); ++i) {
      auto found = per_call.find({&c, i});
      if (found == per_call.end()) continue;
      auto& iv = found->second;
      kernels += iv.size();
      std::sort(iv.begin(), iv.end());
      uint64_t sum = 0;
      for (const auto& [b, e] : iv) sum += e - b;
      sum_ns.push_back(double(sum));
      uint64_t total = 0, cur_b = iv[0].first, cur_e = iv[0].second;
      for (size_t j = 1; j < iv.size(); ++j) {
        if (iv[j].first <= cur_e) {
          cur_e = std::max(cur_e, iv[j].second);
        } else {
          total += cur_e - cur_b;
          cur_b = iv[j].first;
          cur_e = iv[j].second;
        }
      }
      total += cur_e - cur_b;
      union_ns.push_back(double(total));
    }
    if (api_traced) {
      c.kernel_api_traced = stats(union_ns);
      c.kernel_sum_api_traced = stats(sum_ns);
      continue;
    }
    c.kernel = stats(union_ns);
    c.kernel_sum = stats(sum_ns);
    c.kernels_per_call = c.windows.empty() ? 0 : double(kernels) / double(c.windows.size());
  }
}

std::string cases_json(const std::string& device, const std::string& header, int iterations,
                       const std::string& cupti_problem, const std::vector<Case>& cases) {
  std::string j = "{\n  \"device\": " + json_string(device) + ",\n  \"header\": " + json_string(header) +
                  ",\n  \"iterations\": " + std::to_string(iterations) + ",\n  \"cupti_dropped_records\": " +
                  std::to_string(g_dropped) + ",\n  \"cupti_problem\": " + json_string(cupti_problem) +
                  ",\n  \"cases\": [";
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    j += std::string(i ? "," : "") + "\n    {\"key\": " + json_string(c.key) + ", \"name\": " + json_string(c.name) +
         ", \"flops\": " + json_number(c.flops) + ", \"kernels_per_call\": " + json_number(c.kernels_per_call) +
         ",\n     \"kernel\": " + json_stats(c.kernel) + ",\n     \"kernel_sum\": " + json_stats(c.kernel_sum) +
         ",\n     \"kernel_api_traced\": " + json_stats(c.kernel_api_traced) +
         ",\n     \"kernel_sum_api_traced\": " + json_stats(c.kernel_sum_api_traced) +
         ",\n     \"enqueue\": " + json_stats(c.enqueue) +
         ",\n     \"wall\": " + json_stats(c.wall) + ",\n     \"detail\": " + json_string(c.detail) + c.extra_json +
         ",\n     \"kernels\": [";
    size_t m = 0;
    for (const auto& [name, d] : c.kernel_durations) {
      std::string streams;
      for (uint32_t id : c.kernel_streams.at(name)) streams += (streams.empty() ? "" : ", ") + std::to_string(id);
      j += std::string(m++ ? ", " : "") + "{\"name\": " + json_string(name) + ", \"shape\": " +
           json_string(c.kernel_shape.at(name)) + ", \"streams\": [" + streams + "], \"launches\": " +
           std::to_string(d.size()) +
           ", \"time\": " + json_stats(stats(d)) + "}";
    }
    j += "]}";
  }
  return j + "\n  ]\n}\n";
}

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}

const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH: return "TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH: return "FMA_MATH";
    default: return "?";
  }
}

// One phase of kernel records: every case's timed calls, then a forced flush, then the records given to the
// calls. `api_kinds`: CUPTI's runtime and driver API records are on too, as strata's session has them.
// Returns "" or what failed.
std::string kernel_phase(std::vector<Case>& cases, int iterations, cudaStream_t stream, bool api_kinds) {
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME,
                                      CUPTI_ACTIVITY_KIND_DRIVER};
  const size_t enabled_kinds = api_kinds ? 3 : 1;
  for (size_t i = 0; i < enabled_kinds; ++i) {
    if (CUptiResult r = cuptiActivityEnable(kinds[i]); r != CUPTI_SUCCESS) {
      for (size_t j = 0; j < i; ++j) cuptiActivityDisable(kinds[j]);
      return "cuptiActivityEnable(" + std::to_string(int(kinds[i])) + "): " + cupti_error(r);
    }
  }
  for (Case& c : cases) measure_kernels(c, iterations, stream, api_kinds ? c.windows_api_traced : c.windows);
  CUDA_OK(cudaDeviceSynchronize());
  std::string problem;
  if (CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); r != CUPTI_SUCCESS)
    problem = "cuptiActivityFlushAll: " + cupti_error(r);
  for (size_t i = 0; i < enabled_kinds; ++i) cuptiActivityDisable(kinds[i]);
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
  std::lock_guard lock(g_records_mutex);
  attribute_kernels(cases, api_kinds);
  g_kernels.clear();
  return problem;
}

// Phase 2 (kernel records alone) and phase 3 (with the API records strata's session also collects: tracing
// every API call slows the library's host side, which changes how much a multi-stream call's kernels
// overlap). Returns "" or why kernel times are unavailable; a phase 3 failure only costs its figures.
std::string measure_kernel_phases(std::vector<Case>& cases, int iterations, cudaStream_t stream) {
  if (CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS)
    return "cuptiActivityRegisterCallbacks: " + cupti_error(r);
  if (std::string problem = kernel_phase(cases, iterations, stream, false); !problem.empty()) return problem;
  if (std::string problem = kernel_phase(cases, iterations, stream, true); !problem.empty())
    std::fprintf(stderr, "raw_cuda_bench: no kernel times with API records on: %s\n", problem.c_str());
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 200;
  bool markdown = false;
  std::string json_path;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) iterations = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--markdown") == 0) markdown = true;
    else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) json_path = argv[++i];
    else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: raw_cuda_bench [--iterations N] [--markdown] [--json FILE] [--seed S]\n");
      return 2;
    }
  }
  if (!usable_device("raw_cuda_bench")) return 4;
  CUDA_OK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t blas;
  CUBLAS_OK(cublasCreate(&blas));
  CUBLAS_OK(cublasSetStream(blas, stream));
  const size_t workspace_bytes = size_t{32} << 20;  // strata's cuBLAS workspace, shared with cuBLASLt
  Buffer workspace(workspace_bytes);
  CUBLAS_OK(cublasSetWorkspace(blas, workspace.ptr, workspace_bytes));
  cublasLtHandle_t lt;
  CUBLAS_OK(cublasLtCreate(&lt));
  cudnnHandle_t dnn;
  CUDNN_OK(cudnnCreate(&dnn));
  CUDNN_OK(cudnnSetStream(dnn, stream));

  std::vector<Case> cases;
  std::vector<std::unique_ptr<Buffer>> keep;  // buffers live until the end
  auto buffer = [&](size_t bytes, Elem elem, size_t count) {
    keep.push_back(std::make_unique<Buffer>(bytes));
    if (count > 0) fill_uniform(keep.back()->ptr, count, elem, seed++);
    return keep.back()->ptr;
  };
  static const float kOne = 1.0f, kZero = 0.0f;

  // matmul 1024: C = A B row-major, as C^T = B^T A^T column-major (what strata does).
  {
    const int n = 1024;
    struct Mode {
      const char* key;
      const char* name;
      cudaDataType type;
      cublasComputeType_t compute;
      Elem elem;
      size_t size;
    };
    for (const Mode m : {Mode{"matmul_1024_f32", "cublasGemmEx matmul 1024 f32", CUDA_R_32F, CUBLAS_COMPUTE_32F, Elem::kF32, 4},
                         Mode{"matmul_1024_tf32", "cublasGemmEx matmul 1024 tf32", CUDA_R_32F,
                              CUBLAS_COMPUTE_32F_FAST_TF32, Elem::kF32, 4},
                         Mode{"matmul_1024_bf16", "cublasGemmEx matmul 1024 bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F,
                              Elem::kBF16, 2}}) {
      const size_t count = size_t(n) * n;
      void* a = buffer(count * m.size, m.elem, count);
      void* b = buffer(count * m.size, m.elem, count);
      void* c = buffer(count * m.size, m.elem, 0);
      Case k;
      k.key = m.key;
      k.name = m.name;
      k.flops = 2.0 * n * n * n;
      const cudaDataType type = m.type;
      const cublasComputeType_t compute = m.compute;
      k.call = [=] {
        CUBLAS_OK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &kOne, b, type, n, a, type, n, &kZero, c, type, n,
                               compute, CUBLAS_GEMM_DEFAULT));
      };
      cases.push_back(std::move(k));
    }
  }

  // linear 32x768x3072 f32: Y^T[OUT,B] = W X^T + bias per row, cuBLASLt BIAS epilogue (what strata does).
  {
    const int batch = 32, in = 768, out = 3072;
    void* x = buffer(size_t(batch) * in * 4, Elem::kF32, size_t(batch) * in);
    void* w = buffer(size_t(out) * in * 4, Elem::kF32, size_t(out) * in);
    void* bias = buffer(size_t(out) * 4, Elem::kF32, size_t(out));
    void* y = buffer(size_t(batch) * out * 4, Elem::kF32, 0);
    cublasLtMatmulDesc_t desc;
    CUBLAS_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    cublasLtMatrixLayout_t la, lb, lc;
    CUBLAS_OK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, in, out, in));
    CUBLAS_OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, in, batch, in));
    CUBLAS_OK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, out, batch, out));
    cublasLtMatmulPreference_t pref;
    CUBLAS_OK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t max_ws = workspace_bytes;
    CUBLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws));
    auto heuristic = std::make_shared<cublasLtMatmulHeuristicResult_t>();
    int returned = 0;
    CUBLAS_OK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, heuristic.get(), &returned));
    if (returned == 0) {
      std::fprintf(stderr, "raw_cuda_bench: cuBLASLt has no bias-epilogue algorithm for linear\n");
      return 1;
    }
    Case k;
    k.key = "linear_32x768x3072_f32";
    k.name = "cublasLtMatmul linear 32x768x3072 f32 +bias epilogue";
    k.flops = 2.0 * batch * in * out + double(batch) * out;
    void* ws = workspace.ptr;
    k.call = [=] {
      CUBLAS_OK(cublasLtMatmul(lt, desc, &kOne, w, la, x, lb, &kZero, y, lc, y, lc, &heuristic->algo, ws,
                               heuristic->workspaceSize, stream));
    };
    k.detail = "heuristic workspace " + std::to_string(heuristic->workspaceSize) + " B";
    cases.push_back(std::move(k));
  }

  // conv 32x64x56x56 -> 64 channels, 3x3, stride 1, pad 1, exact f32 (FMA math), fastest algorithm by search.
  {
    const int n = 32, c = 64, h = 56, wd = 56, k_out = 64, r = 3;
    void* x = buffer(size_t(n) * c * h * wd * 4, Elem::kF32, size_t(n) * c * h * wd);
    void* w = buffer(size_t(k_out) * c * r * r * 4, Elem::kF32, size_t(k_out) * c * r * r);
    void* y = buffer(size_t(n) * k_out * h * wd * 4, Elem::kF32, 0);
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wdsc;
    cudnnConvolutionDescriptor_t cd;
    CUDNN_OK(cudnnCreateTensorDescriptor(&xd));
    CUDNN_OK(cudnnCreateTensorDescriptor(&yd));
    CUDNN_OK(cudnnCreateFilterDescriptor(&wdsc));
    CUDNN_OK(cudnnCreateConvolutionDescriptor(&cd));
    CUDNN_OK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, wd));
    CUDNN_OK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k_out, h, wd));
    CUDNN_OK(cudnnSetFilter4dDescriptor(wdsc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k_out, c, r, r));
    CUDNN_OK(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_OK(cudnnSetConvolutionGroupCount(cd, 1));  // as strata's descriptors say it, though 1 is the default
    CUDNN_OK(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
    // strata's search budget: the largest workspace any algorithm asks for, capped at 1 GiB and half the
    // free memory.
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_OK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const size_t budget = std::min(size_t{1} << 30, free_bytes / 2);
    size_t search_bytes = 0;
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
      size_t bytes = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(dnn, xd, wdsc, cd, yd, cudnnConvolutionFwdAlgo_t(a), &bytes) ==
              CUDNN_STATUS_SUCCESS && bytes <= budget)
        search_bytes = std::max(search_bytes, bytes);
    }
    Buffer search_ws(search_bytes);
    int max_results = 0;
    CUDNN_OK(cudnnGetConvolutionForwardAlgorithmMaxCount(dnn, &max_results));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(size_t(std::max(max_results, 1)));
    int returned = 0;
    // Twice, as strata searches: the first search's times include lazy loading of each algorithm's kernels.
    for (int search = 0; search < 2; ++search) {
      CUDNN_OK(cudnnFindConvolutionForwardAlgorithmEx(dnn, xd, x, wdsc, w, cd, yd, y, int(perf.size()), &returned,
                                                      perf.data(), search_ws.ptr, search_bytes));
    }
    const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
    std::string ranking = "[";
    for (int i = 0; i < returned; ++i) {
      const cudnnConvolutionFwdAlgoPerf_t& p = perf[size_t(i)];
      if (best == nullptr && p.status == CUDNN_STATUS_SUCCESS && p.memory <= search_bytes && p.mathType == CUDNN_FMA_MATH)
        best = &p;
      if (p.status != CUDNN_STATUS_SUCCESS) continue;
      ranking += std::string(ranking.size() > 1 ? ", " : "") + "{\"algo\": " + json_string(algo_name(p.algo)) +
                 ", \"math\": " + json_string(math_name(p.mathType)) + ", \"time_ms\": " + json_number(p.time) +
                 ", \"memory_bytes\": " + std::to_string(p.memory) + "}";
    }
    ranking += "]";
    if (best == nullptr) {
      std::fprintf(stderr, "raw_cuda_bench: cuDNN found no exact-f32 (FMA math) algorithm for the conv\n");
      return 1;
    }
    CUDNN_OK(cudnnSetConvolutionMathType(cd, best->mathType));
    void* ws = buffer(best->memory, Elem::kF32, 0);
    const cudnnConvolutionFwdAlgo_t algo = best->algo;
    const size_t ws_bytes = best->memory;
    Case k;
    k.key = "conv_32x64x56x56_k3p1_f32";
    k.name = std::string("cudnnConvolutionForward conv 32x64x56x56 k3 p1 f32 (") + algo_name(algo) + ")";
    k.flops = 2.0 * n * k_out * h * wd * c * r * r;
    k.call = [=] {
      CUDNN_OK(cudnnConvolutionForward(dnn, &kOne, xd, x, wdsc, w, cd, algo, ws, ws_bytes, &kZero, yd, y));
    };
    k.detail = std::string("algo ") + algo_name(algo) + ", " + math_name(best->mathType) + ", workspace " +
               std::to_string(ws_bytes) + " B";
    k.extra_json = ", \"algo\": " + json_string(algo_name(algo)) + ", \"math\": " + json_string(math_name(best->mathType)) +
                   ", \"workspace_bytes\": " + std::to_string(ws_bytes) + ", \"find_ranking\": " + ranking;
    cases.push_back(std::move(k));
  }

  // Phase 1: host figures with no CUPTI in the process yet.
  for (Case& c : cases) measure_host(c, iterations, stream);

  // Phases 2 and 3: kernel time from CUPTI activity records.
  const std::string cupti_problem = measure_kernel_phases(cases, iterations, stream);
  if (!cupti_problem.empty()) std::fprintf(stderr, "raw_cuda_bench: kernel times unavailable: %s\n", cupti_problem.c_str());

  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  int bmaj = 0, bmin = 0, bpatch = 0;
  cublasGetProperty(MAJOR_VERSION, &bmaj);
  cublasGetProperty(MINOR_VERSION, &bmin);
  cublasGetProperty(PATCH_LEVEL, &bpatch);
  uint32_t cupti_version = 0;
  cuptiGetVersion(&cupti_version);
  char header[512];
  std::snprintf(header, sizeof header,
                "%s, CUDA runtime %d, driver %d, cuBLAS %d.%d.%d, cuDNN %zu, CUPTI API %u; %d calls per phase after 20 "
                "warm-ups; CUPTI dropped %zu records",
                prop.name, runtime, driver, bmaj, bmin, bpatch, cudnnGetVersion(), cupti_version, iterations, g_dropped);
  std::printf("%s%s\n", markdown ? "" : "# ", header);
  if (markdown) {
    std::printf("\n| raw library call | kernels/call | GPU kernel median (us) | p90 (us) | TFLOP/s (kernel) | enqueue median (us) "
                "| call+sync wall median (us) | detail |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---|\n");
  }
  for (const Case& c : cases) {
    const double tflops = c.kernel.median > 0 ? c.flops / (c.kernel.median * 1e-9) / 1e12 : 0;
    char traced[160];
    std::snprintf(traced, sizeof traced, "kernels summed %.2f us; with CUPTI API records %.2f us (summed %.2f us)",
                  c.kernel_sum.median / 1e3, c.kernel_api_traced.median / 1e3, c.kernel_sum_api_traced.median / 1e3);
    if (markdown) {
      std::printf("| %s | %.2f | %.2f | %.2f | %.1f | %.2f | %.2f | %s%s%s |\n", c.name.c_str(), c.kernels_per_call,
                  c.kernel.median / 1e3, c.kernel.p90 / 1e3, tflops, c.enqueue.median / 1e3, c.wall.median / 1e3,
                  c.detail.c_str(), c.detail.empty() ? "" : "; ", traced);
    } else {
      std::printf("%-60s kernel %9.2f us (p90 %9.2f, %.2f/call)  enqueue %8.2f us  wall %9.2f us  %7.1f TFLOP/s  %s; %s\n",
                  c.name.c_str(), c.kernel.median / 1e3, c.kernel.p90 / 1e3, c.kernels_per_call, c.enqueue.median / 1e3,
                  c.wall.median / 1e3, tflops, c.detail.c_str(), traced);
    }
  }
  if (markdown) {
    std::printf("\nKernels per case (CUPTI, demangled; duration median per launch):\n\n");
    for (const Case& c : cases)
      for (const auto& [name, d] : c.kernel_durations)
        std::printf("- %s: `%s` %s, %.2f us\n", c.key.c_str(), name.c_str(), c.kernel_shape.at(name).c_str(),
                    stats(d).median / 1e3);
  }

  if (!json_path.empty() && !write_text(json_path, cases_json(prop.name, header, iterations, cupti_problem, cases))) {
    std::fprintf(stderr, "raw_cuda_bench: cannot write %s\n", json_path.c_str());
    return 1;
  }
  return cupti_problem.empty() ? 0 : 3;
}
