// raw_graph_bench: the floor for `strata compare` on a GPU. The same library call launched eagerly in a
// loop vs captured K times into a CUDA Graph and replayed, with no strata layer in between. Per op: host
// enqueue time and round wall (issue K ops + one synchronisation) / K, medians over R rounds.
// Self-contained (no strata headers), like raw_cuda_bench.cpp, so nothing of strata's hides in the floor.
//
//   raw_graph_bench [--rounds R] [--markdown]
//
// Cases match scripts/gpu-validate: cublasSgemm-equivalent matmul at 64, 256, 1024, 4096 (f32) and relu on
// 1M f32 elements (cudnnActivationForward: a raw relu needs no strata kernel), each with K = 1 and K = 16.
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

[[noreturn]] void die(const char* what, const char* call, int line) {
  std::fprintf(stderr, "raw_graph_bench: %s failed: %s [line %d]\n", call, what, line);
  std::exit(1);
}
#define CUDA_OK(call)                                            \
  do {                                                           \
    cudaError_t e_ = (call);                                     \
    if (e_ != cudaSuccess) die(cudaGetErrorName(e_), #call, __LINE__); \
  } while (0)
#define CUBLAS_OK(call)                                                   \
  do {                                                                    \
    cublasStatus_t s_ = (call);                                           \
    if (s_ != CUBLAS_STATUS_SUCCESS) die(cublasGetStatusName(s_), #call, __LINE__); \
  } while (0)
#define CUDNN_OK(call)                                                    \
  do {                                                                    \
    cudnnStatus_t s_ = (call);                                            \
    if (s_ != CUDNN_STATUS_SUCCESS) die(cudnnGetErrorString(s_), #call, __LINE__); \
  } while (0)

double now_ns() {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Figures {
  double enqueue_per_op = 0;  // host time to issue the round, / K
  double wall_per_op = 0;     // issue + synchronise, / K
};

Figures eager(cudaStream_t s, int k, int rounds, const std::function<void()>& call) {
  for (int i = 0; i < 5; ++i) call();
  CUDA_OK(cudaStreamSynchronize(s));
  std::vector<double> enq, wall;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = now_ns();
    for (int i = 0; i < k; ++i) call();
    const double t1 = now_ns();
    CUDA_OK(cudaStreamSynchronize(s));
    wall.push_back((now_ns() - t0) / k);
    enq.push_back((t1 - t0) / k);
  }
  return {median(enq), median(wall)};
}

Figures graph(cudaStream_t s, int k, int rounds, const std::function<void()>& call) {
  call();  // first use (handles, workspaces) outside the capture
  CUDA_OK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < k; ++i) call();
  CUDA_OK(cudaStreamEndCapture(s, &g));
  CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
  for (int i = 0; i < 5; ++i) CUDA_OK(cudaGraphLaunch(exec, s));
  CUDA_OK(cudaStreamSynchronize(s));
  std::vector<double> enq, wall;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = now_ns();
    CUDA_OK(cudaGraphLaunch(exec, s));
    const double t1 = now_ns();
    CUDA_OK(cudaStreamSynchronize(s));
    wall.push_back((now_ns() - t0) / k);
    enq.push_back((t1 - t0) / k);
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(g));
  return {median(enq), median(wall)};
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 200;
  bool markdown = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::max(3, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--markdown") == 0) markdown = true;
    else {
      std::fprintf(stderr, "usage: raw_graph_bench [--rounds R] [--markdown]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "raw_graph_bench: no usable CUDA device (%s)\n", e == cudaSuccess ? "count 0" : cudaGetErrorName(e));
    return 4;
  }
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasHandle_t blas;
  CUBLAS_OK(cublasCreate(&blas));
  CUBLAS_OK(cublasSetStream(blas, s));
  // A fixed workspace, so cuBLAS allocates nothing during capture (its documented requirement for graphs).
  void* workspace = nullptr;
  const size_t workspace_bytes = size_t{32} << 20;
  CUDA_OK(cudaMalloc(&workspace, workspace_bytes));
  CUBLAS_OK(cublasSetWorkspace(blas, workspace, workspace_bytes));
  cudnnHandle_t dnn;
  CUDNN_OK(cudnnCreate(&dnn));
  CUDNN_OK(cudnnSetStream(dnn, s));

  if (markdown) {
    std::printf("| raw call | K | eager enqueue/op (us) | eager wall/op (us) | graph launch/op (us) | graph wall/op (us) | speed-up |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  }
  auto report = [&](const std::string& name, int k, const Figures& e, const Figures& g) {
    if (markdown) {
      std::printf("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2fx |\n", name.c_str(), k, e.enqueue_per_op / 1e3,
                  e.wall_per_op / 1e3, g.enqueue_per_op / 1e3, g.wall_per_op / 1e3, e.wall_per_op / g.wall_per_op);
    } else {
      std::printf("%-32s K=%-3d eager %8.2f us/op (enqueue %6.2f)  graph %8.2f us/op (launch %6.2f)  %.2fx\n", name.c_str(),
                  k, e.wall_per_op / 1e3, e.enqueue_per_op / 1e3, g.wall_per_op / 1e3, g.enqueue_per_op / 1e3,
                  e.wall_per_op / g.wall_per_op);
    }
  };

  for (int n : {64, 256, 1024, 4096}) {
    void *a, *b, *c;
    const size_t bytes = size_t(n) * n * 4;
    CUDA_OK(cudaMalloc(&a, bytes));
    CUDA_OK(cudaMalloc(&b, bytes));
    CUDA_OK(cudaMalloc(&c, bytes));
    CUDA_OK(cudaMemset(a, 0x3c, bytes));
    CUDA_OK(cudaMemset(b, 0x3c, bytes));
    const float one = 1.0f, zero = 0.0f;
    auto call = [&] {
      CUBLAS_OK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b, CUDA_R_32F, n, a, CUDA_R_32F, n, &zero, c,
                             CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    const int r = n >= 4096 ? std::max(3, rounds / 10) : rounds;
    for (int k : {1, 16}) report("cublasGemmEx matmul " + std::to_string(n) + " f32", k, eager(s, k, r, call), graph(s, k, r, call));
    CUDA_OK(cudaFree(a));
    CUDA_OK(cudaFree(b));
    CUDA_OK(cudaFree(c));
  }
  {
    const int n = 1 << 20;
    void *x, *y;
    CUDA_OK(cudaMalloc(&x, n * 4));
    CUDA_OK(cudaMalloc(&y, n * 4));
    CUDA_OK(cudaMemset(x, 0x3c, n * 4));
    cudnnTensorDescriptor_t d;
    CUDNN_OK(cudnnCreateTensorDescriptor(&d));
    CUDNN_OK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, n));
    cudnnActivationDescriptor_t act;
    CUDNN_OK(cudnnCreateActivationDescriptor(&act));
    CUDNN_OK(cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    const float one = 1.0f, zero = 0.0f;
    auto call = [&] { CUDNN_OK(cudnnActivationForward(dnn, act, &one, d, x, &zero, d, y)); };
    for (int k : {1, 16}) report("cudnnActivationForward relu 1M f32", k, eager(s, k, rounds, call), graph(s, k, rounds, call));
  }
  return 0;
}
