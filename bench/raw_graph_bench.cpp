// raw_graph_bench: the floor for `strata compare` on a GPU. The same library call launched eagerly in a
// loop vs captured K times into a CUDA Graph and replayed, with no strata layer in between. Per op: host
// enqueue time and round wall (issue K ops + one synchronisation) / K, medians over R rounds.
// Self-contained (no strata headers), like raw_cuda_bench.cpp, so nothing of strata's hides in the floor.
//
//   raw_graph_bench [--rounds R] [--markdown] [--json FILE] [--seed S]
//
// Cases match scripts/gpu-validate: cublasGemmEx matmul at 64, 256, 1024, 4096 (f32, as strata calls it)
// and relu on 1M f32 elements with a copy of strata's own relu kernel and launch geometry
// (raw_relu_kernel.cu), each with K = 1 and K = 16. Inputs are uniform in [-1, 1), seeded, like strata's.
#define RAW_BENCH_NAME "raw_graph_bench"
#include "raw_bench_common.h"
#include "raw_relu_kernel.h"

#include <functional>

using namespace rawbench;

namespace {

double median(std::vector<double> v) { return stats(std::move(v)).median; }

struct Figures {
  double enqueue_per_op = 0;  // host time to issue the round, / K
  double wall_per_op = 0;     // issue + synchronise, / K
};

// Both modes time the same way: issue one round of K ops, then synchronise, per round. A template, so
// the graph mode's round stays one direct cudaGraphLaunch with no call through a std::function.
template <typename IssueRound>
Figures timed_rounds(cudaStream_t s, int k, int rounds, IssueRound issue_round) {
  std::vector<double> enq, wall;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = now_ns();
    issue_round();
    const double t1 = now_ns();
    CUDA_OK(cudaStreamSynchronize(s));
    wall.push_back((now_ns() - t0) / k);
    enq.push_back((t1 - t0) / k);
  }
  return {median(enq), median(wall)};
}

Figures eager(cudaStream_t s, int k, int rounds, const std::function<void()>& call) {
  for (int i = 0; i < 5; ++i) call();
  CUDA_OK(cudaStreamSynchronize(s));
  return timed_rounds(s, k, rounds, [&] {
    for (int i = 0; i < k; ++i) call();
  });
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
  const Figures figures = timed_rounds(s, k, rounds, [&] { CUDA_OK(cudaGraphLaunch(exec, s)); });
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(g));
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 200;
  bool markdown = false;
  std::string json_path;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::max(3, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--markdown") == 0) markdown = true;
    else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) json_path = argv[++i];
    else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: raw_graph_bench [--rounds R] [--markdown] [--json FILE] [--seed S]\n");
      return 2;
    }
  }
  if (!usable_device("raw_graph_bench")) return 4;
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

  if (markdown) {
    std::printf("| raw call | K | eager enqueue/op (us) | eager wall/op (us) | graph launch/op (us) | graph wall/op (us) | speed-up |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  }
  std::string json_cases;
  auto report = [&](const std::string& key, const std::string& name, int k, const Figures& e, const Figures& g) {
    json_cases += std::string(json_cases.empty() ? "" : ",") + "\n    {\"key\": " + json_string(key) +
                  ", \"name\": " + json_string(name) + ", \"k\": " + std::to_string(k) +
                  ", \"eager_enqueue_per_op_ns\": " + json_number(e.enqueue_per_op) +
                  ", \"eager_wall_per_op_ns\": " + json_number(e.wall_per_op) +
                  ", \"graph_launch_per_op_ns\": " + json_number(g.enqueue_per_op) +
                  ", \"graph_wall_per_op_ns\": " + json_number(g.wall_per_op) + "}";
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
    fill_uniform(a, size_t(n) * n, Elem::kF32, seed++);
    fill_uniform(b, size_t(n) * n, Elem::kF32, seed++);
    const float one = 1.0f, zero = 0.0f;
    auto call = [&] {
      CUBLAS_OK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b, CUDA_R_32F, n, a, CUDA_R_32F, n, &zero, c,
                             CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    const int r = n >= 4096 ? std::max(3, rounds / 10) : rounds;
    for (int k : {1, 16})
      report("matmul_" + std::to_string(n), "cublasGemmEx matmul " + std::to_string(n) + " f32", k, eager(s, k, r, call),
             graph(s, k, r, call));
    CUDA_OK(cudaFree(a));
    CUDA_OK(cudaFree(b));
    CUDA_OK(cudaFree(c));
  }
  {
    const int64_t n = int64_t{1} << 20;
    void *x, *y;
    CUDA_OK(cudaMalloc(&x, size_t(n) * 4));
    CUDA_OK(cudaMalloc(&y, size_t(n) * 4));
    fill_uniform(x, size_t(n), Elem::kF32, seed++);
    // strata's relu: its own kernel, then cudaGetLastError through its checking macro.
    auto call = [&] {
      launch_relu_f32(static_cast<const float*>(x), static_cast<float*>(y), n, s);
      CUDA_OK(cudaGetLastError());
    };
    for (int k : {1, 16})
      report("relu_1048576", "relu 1M f32 (strata's kernel, 4096x256)", k, eager(s, k, rounds, call),
             graph(s, k, rounds, call));
    CUDA_OK(cudaFree(x));
    CUDA_OK(cudaFree(y));
  }
  if (!json_path.empty()) {
    cudaDeviceProp prop{};
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    const std::string j = "{\n  \"device\": " + json_string(prop.name) + ",\n  \"rounds\": " + std::to_string(rounds) +
                          ",\n  \"cases\": [" + json_cases + "\n  ]\n}\n";
    if (!write_text(json_path, j)) {
      std::fprintf(stderr, "raw_graph_bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
