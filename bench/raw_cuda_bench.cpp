// raw_cuda_bench: the same GPU work strata traces, called directly on cuBLAS / cuBLASLt / cuDNN with no
// strata layer in between: the baseline that says what strata's binding, dispatch and bookkeeping add.
// Self-contained on purpose (no strata headers): it must build with one compiler line on a machine where
// the CMake target is not wired in, and nothing of strata's may hide in the baseline.
//
//   raw_cuda_bench [--iterations N] [--markdown]
//
// Per case: host time of the library call alone (enqueue), host wall of call + cudaStreamSynchronize,
// and GPU time between two CUDA events around the call; medians and p90 over N calls after 20 warm-ups.
// Shapes match scripts/gpu-validate: matmul 1024 (f32, tf32, bf16), linear 32x768x3072 (bias epilogue),
// conv 32x64x56x56 -> 64, 3x3, pad 1 (cuDNN's searched algorithm, bias added with cudnnAddTensor).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const char* what, const char* call, const char* file, int line) {
  std::fprintf(stderr, "raw_cuda_bench: %s failed: %s [%s:%d]\n", call, what, file, line);
  std::exit(1);
}
#define CUDA_OK(call)                                                         \
  do {                                                                        \
    cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) die(cudaGetErrorName(e_), #call, __FILE__, __LINE__); \
  } while (0)
#define CUBLAS_OK(call)                                                          \
  do {                                                                           \
    cublasStatus_t s_ = (call);                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) die(cublasGetStatusName(s_), #call, __FILE__, __LINE__); \
  } while (0)
#define CUDNN_OK(call)                                                           \
  do {                                                                           \
    cudnnStatus_t s_ = (call);                                                   \
    if (s_ != CUDNN_STATUS_SUCCESS) die(cudnnGetErrorString(s_), #call, __FILE__, __LINE__); \
  } while (0)

double now_ns() {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

struct Stats {
  double median = 0, p90 = 0;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) { return v[std::min(v.size() - 1, size_t(q * double(v.size())))]; };
  return {rank(0.5), rank(0.9)};
}

struct Buffer {
  void* ptr = nullptr;
  explicit Buffer(size_t bytes) {
    CUDA_OK(cudaMalloc(&ptr, bytes));
    // Non-zero, finite contents (0x3c = small positive values in f32, f16 and bf16 alike).
    CUDA_OK(cudaMemset(ptr, 0x3c, bytes));
  }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

struct Result {
  std::string name;
  double flops;
  Stats enqueue, wall, gpu;
};

Result measure(const std::string& name, double flops, int iterations, cudaStream_t stream,
               const std::function<void()>& call) {
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  for (int i = 0; i < 20; ++i) call();
  CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<double> enqueue, wall, gpu;
  for (int i = 0; i < iterations; ++i) {
    CUDA_OK(cudaEventRecord(start, stream));
    const double t0 = now_ns();
    call();
    const double t1 = now_ns();
    CUDA_OK(cudaEventRecord(stop, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    const double t2 = now_ns();
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    enqueue.push_back(t1 - t0);
    wall.push_back(t2 - t0);
    gpu.push_back(double(ms) * 1e6);
  }
  CUDA_OK(cudaEventDestroy(start));
  CUDA_OK(cudaEventDestroy(stop));
  return {name, flops, stats(enqueue), stats(wall), stats(gpu)};
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 200;
  bool markdown = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) iterations = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--markdown") == 0) markdown = true;
    else {
      std::fprintf(stderr, "usage: raw_cuda_bench [--iterations N] [--markdown]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "raw_cuda_bench: no usable CUDA device (%s)\n", e == cudaSuccess ? "count 0" : cudaGetErrorName(e));
    return 4;
  }
  CUDA_OK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t blas;
  CUBLAS_OK(cublasCreate(&blas));
  CUBLAS_OK(cublasSetStream(blas, stream));
  const size_t workspace_bytes = size_t{32} << 20;
  Buffer workspace(workspace_bytes);
  CUBLAS_OK(cublasSetWorkspace(blas, workspace.ptr, workspace_bytes));
  cublasLtHandle_t lt;
  CUBLAS_OK(cublasLtCreate(&lt));
  cudnnHandle_t dnn;
  CUDNN_OK(cudnnCreate(&dnn));
  CUDNN_OK(cudnnSetStream(dnn, stream));

  std::vector<Result> results;

  // matmul 1024: C = A B row-major, as C^T = B^T A^T column-major (what strata does).
  {
    const int n = 1024;
    const double flops = 2.0 * n * n * n;
    struct Mode {
      const char* name;
      cudaDataType type;
      cublasComputeType_t compute;
      size_t elem;
    };
    for (const Mode m : {Mode{"cublasGemmEx matmul 1024 f32", CUDA_R_32F, CUBLAS_COMPUTE_32F, 4},
                         Mode{"cublasGemmEx matmul 1024 tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4},
                         Mode{"cublasGemmEx matmul 1024 bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2}}) {
      Buffer a(size_t(n) * n * m.elem), b(size_t(n) * n * m.elem), c(size_t(n) * n * m.elem);
      const float one = 1.0f, zero = 0.0f;
      results.push_back(measure(m.name, flops, iterations, stream, [&] {
        CUBLAS_OK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b.ptr, m.type, n, a.ptr, m.type, n, &zero,
                               c.ptr, m.type, n, m.compute, CUBLAS_GEMM_DEFAULT));
      }));
    }
  }

  // linear 32x768x3072 f32: Y^T[OUT,B] = W X^T + bias per row, cuBLASLt BIAS epilogue (what strata does).
  {
    const int batch = 32, in = 768, out = 3072;
    const double flops = 2.0 * batch * in * out + double(batch) * out;
    Buffer x(size_t(batch) * in * 4), w(size_t(out) * in * 4), bias(size_t(out) * 4), y(size_t(batch) * out * 4);
    cublasLtMatmulDesc_t desc;
    CUBLAS_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    CUBLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias.ptr, sizeof bias.ptr));
    cublasLtMatrixLayout_t la, lb, lc;
    CUBLAS_OK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, in, out, in));
    CUBLAS_OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, in, batch, in));
    CUBLAS_OK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, out, batch, out));
    cublasLtMatmulPreference_t pref;
    CUBLAS_OK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t max_ws = workspace_bytes;
    CUBLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws));
    cublasLtMatmulHeuristicResult_t heuristic{};
    int returned = 0;
    CUBLAS_OK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &heuristic, &returned));
    if (returned == 0) {
      std::fprintf(stderr, "raw_cuda_bench: cuBLASLt has no bias-epilogue algorithm for linear\n");
      return 1;
    }
    const float one = 1.0f, zero = 0.0f;
    results.push_back(measure("cublasLtMatmul linear 32x768x3072 f32 +bias", flops, iterations, stream, [&] {
      CUBLAS_OK(cublasLtMatmul(lt, desc, &one, w.ptr, la, x.ptr, lb, &zero, y.ptr, lc, y.ptr, lc, &heuristic.algo,
                               workspace.ptr, heuristic.workspaceSize, stream));
    }));
  }

  // conv 32x64x56x56 -> 64 channels, 3x3, stride 1, pad 1, f32 exact (FMA math), fastest algorithm by search.
  {
    const int n = 32, c = 64, h = 56, wd = 56, k = 64, r = 3;
    const double flops = 2.0 * n * k * h * wd * c * r * r + double(n) * k * h * wd;
    Buffer x(size_t(n) * c * h * wd * 4), w(size_t(k) * c * r * r * 4), bias(size_t(k) * 4), y(size_t(n) * k * h * wd * 4);
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wdsc;
    cudnnConvolutionDescriptor_t cd;
    CUDNN_OK(cudnnCreateTensorDescriptor(&xd));
    CUDNN_OK(cudnnCreateTensorDescriptor(&yd));
    CUDNN_OK(cudnnCreateTensorDescriptor(&bd));
    CUDNN_OK(cudnnCreateFilterDescriptor(&wdsc));
    CUDNN_OK(cudnnCreateConvolutionDescriptor(&cd));
    CUDNN_OK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, wd));
    CUDNN_OK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, h, wd));
    CUDNN_OK(cudnnSetTensor4dDescriptor(bd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, k, 1, 1));
    CUDNN_OK(cudnnSetFilter4dDescriptor(wdsc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, r));
    CUDNN_OK(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_OK(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
    size_t search_bytes = 0;
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
      size_t bytes = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(dnn, xd, wdsc, cd, yd, cudnnConvolutionFwdAlgo_t(a), &bytes) ==
              CUDNN_STATUS_SUCCESS && bytes <= (size_t{1} << 30))
        search_bytes = std::max(search_bytes, bytes);
    }
    Buffer search_ws(std::max<size_t>(search_bytes, 256));
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    CUDNN_OK(cudnnFindConvolutionForwardAlgorithmEx(dnn, xd, x.ptr, wdsc, w.ptr, cd, yd, y.ptr,
                                                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, search_ws.ptr,
                                                    search_bytes));
    const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
    for (int i = 0; i < returned && best == nullptr; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH) best = &perf[i];
    if (best == nullptr) {
      std::fprintf(stderr, "raw_cuda_bench: cuDNN found no f32 algorithm for the conv\n");
      return 1;
    }
    CUDNN_OK(cudnnSetConvolutionMathType(cd, best->mathType));
    Buffer ws(std::max<size_t>(best->memory, 256));
    const float one = 1.0f, zero = 0.0f;
    const cudnnConvolutionFwdAlgo_t algo = best->algo;
    const size_t ws_bytes = best->memory;
    results.push_back(measure("cudnnConvolutionForward conv 32x64x56x56 k3 p1 f32 (algo " + std::to_string(int(algo)) + ")",
                              flops, iterations, stream, [&] {
      CUDNN_OK(cudnnConvolutionForward(dnn, &one, xd, x.ptr, wdsc, w.ptr, cd, algo, ws.ptr, ws_bytes, &zero, yd, y.ptr));
      CUDNN_OK(cudnnAddTensor(dnn, &one, bd, bias.ptr, &one, yd, y.ptr));
    }));
  }

  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  int bmaj = 0, bmin = 0, bpatch = 0;
  cublasGetProperty(MAJOR_VERSION, &bmaj);
  cublasGetProperty(MINOR_VERSION, &bmin);
  cublasGetProperty(PATCH_LEVEL, &bpatch);
  std::printf("%s%s, CUDA runtime %d, driver %d, cuBLAS %d.%d.%d, cuDNN %zu, %d iterations after 20 warm-ups\n",
              markdown ? "" : "# ", prop.name, runtime, driver, bmaj, bmin, bpatch, cudnnGetVersion(), iterations);
  if (markdown) {
    std::printf("\n| raw library call | enqueue median (us) | call+sync wall median (us) | wall p90 (us) | GPU median (us) | TFLOP/s (GPU) |\n");
    std::printf("|---|---:|---:|---:|---:|---:|\n");
  }
  for (const Result& r : results) {
    const double tflops = r.flops / (r.gpu.median * 1e-9) / 1e12;
    if (markdown) {
      std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.1f |\n", r.name.c_str(), r.enqueue.median / 1e3, r.wall.median / 1e3,
                  r.wall.p90 / 1e3, r.gpu.median / 1e3, tflops);
    } else {
      std::printf("%-64s enqueue %9.2f us  wall %9.2f us (p90 %9.2f)  gpu %9.2f us  %7.1f TFLOP/s\n", r.name.c_str(),
                  r.enqueue.median / 1e3, r.wall.median / 1e3, r.wall.p90 / 1e3, r.gpu.median / 1e3, tflops);
    }
  }
  return 0;
}
