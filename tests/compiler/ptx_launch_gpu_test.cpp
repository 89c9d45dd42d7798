// GPU only (ctest label gpu; skipped without a device, see runtime/cuda/gpu_test_main.cpp): the PTX that
// --emit ptx prints, loaded by the driver (cuModuleLoadData) and launched on the device, computes what the
// CPU plan's generated kernel computes. The driver's functions come through cudart's entry-point query,
// so the program does not link libcuda and starts (to skip) where there is no driver.
#include <cuda.h>
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "apps/strata/compiled_program.h"
#include "layers/compiler/compiler_cuda.h"
#include "layers/frontend/frontend.h"
#include "layers/frontend/sequence.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "tests/support/subprocess.h"

namespace strata {
namespace {

namespace cc = compiler::cuda;

template <typename Fn>
Fn driver(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  REQUIRE(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) == cudaSuccess);
  REQUIRE(found == cudaDriverEntryPointSuccess);
  return reinterpret_cast<Fn>(fn);
}

// The device's architecture if strata generates for it, else the newest one below it: PTX is forward
// compatible, the driver compiles it for the device at load.
std::string device_arch() {
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  const int cc_value = prop.major * 10 + prop.minor;
  std::string best = "sm_80";
  for (const std::string& a : cc::known_archs())
    if (std::stoi(a.substr(3)) <= cc_value) best = a;
  return best;
}

// Runs the graph's one generated kernel on the device over `rows` x `cols`, out starting as `out_init`
// (a GEMM's result for an epilogue, unused by a pointwise kernel), and returns out.
std::vector<float> run_on_gpu(const compiler::CompiledGraph& g, const std::vector<Tensor>& inputs,
                              const Tensor& out_init, long long rows, long long cols) {
  const std::vector<cc::CudaKernel> kernels = cc::generate_cuda(g);
  REQUIRE(kernels.size() == 1);
  const cc::Ptx ptx = cc::compile_ptx(kernels[0], device_arch());
  auto load = driver<CUresult (*)(CUmodule*, const void*)>("cuModuleLoadData");
  auto get = driver<CUresult (*)(CUfunction*, CUmodule, const char*)>("cuModuleGetFunction");
  auto launch = driver<decltype(&cuLaunchKernel)>("cuLaunchKernel");
  REQUIRE(cudaFree(nullptr) == cudaSuccess);  // the primary context, current, for the driver calls
  CUmodule module = nullptr;
  REQUIRE(load(&module, ptx.ptx.c_str()) == CUDA_SUCCESS);
  CUfunction fn = nullptr;
  REQUIRE(get(&fn, module, kernels[0].name.c_str()) == CUDA_SUCCESS);
  std::vector<void*> device;  // each kernel input, then out
  for (const Tensor& t : inputs) {
    void* d = nullptr;
    REQUIRE(cudaMalloc(&d, t.nbytes()) == cudaSuccess);
    REQUIRE(cudaMemcpy(d, t.data_ptr(), t.nbytes(), cudaMemcpyHostToDevice) == cudaSuccess);
    device.push_back(d);
  }
  void* out = nullptr;
  REQUIRE(cudaMalloc(&out, out_init.nbytes()) == cudaSuccess);
  REQUIRE(cudaMemcpy(out, out_init.data_ptr(), out_init.nbytes(), cudaMemcpyHostToDevice) == cudaSuccess);
  std::vector<void*> args;
  for (void*& d : device) args.push_back(&d);
  args.push_back(&out);
  args.push_back(&rows);
  args.push_back(&cols);
  // Fewer blocks than elements / 256: the grid-stride loop must cover the rest.
  REQUIRE(launch(fn, 8, 1, 1, 256, 1, 1, 0, nullptr, args.data(), nullptr) == CUDA_SUCCESS);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<float> host(size_t(out_init.numel()));
  REQUIRE(cudaMemcpy(host.data(), out, out_init.nbytes(), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (void* d : device) cudaFree(d);
  cudaFree(out);
  return host;
}

std::vector<double> widened(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<double>(p, p + t.numel());
}

double relative_error(const std::vector<float>& got, const Tensor& want) {
  const Tensor g = frontend::random_tensor(want.sizes(), DType::kF32, kCPU, 1);
  std::copy(got.begin(), got.end(), g.data<float>());
  return reference::relative_error(g, widened(want));
}

// The tensors the graph's one generated kernel reads, in its parameter order: inputs and constants.
std::vector<Tensor> kernel_inputs(const compiler::CompiledGraph& g, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (const compiler::FusedKernel& k : g.plan().kernels) {
    if (k.kind == compiler::KernelKind::kExtern) continue;
    for (size_t id : k.inputs) {
      const compiler::Node& n = g.graph().nodes[id];
      REQUIRE(n.kind != compiler::NodeKind::kCall);  // these programs fuse into one kernel
      out.push_back(n.kind == compiler::NodeKind::kInput ? inputs[n.input_index] : n.constant);
    }
  }
  return out;
}

app::CompiledProgram compiled(const std::string& program, const std::string& dims, frontend::Sequence& seq) {
  seq = frontend::prepare_sequence(frontend::parse_sequence_spec(program, dims), DType::kF32, kCPU, 9, false,
                                   size_t(1) << 30);
  return app::compile_program(seq);
}

}  // namespace

TEST_CASE("gelu_tanh's fused chain: its PTX on the device against the CPU plan's kernel") {
  const test::TempDir dir;
  ::setenv("STRATA_CACHE_DIR", dir.file("kernels").c_str(), 1);
  frontend::Sequence seq;
  const app::CompiledProgram p = compiled("gelu_tanh", "64x1000", seq);
  const Tensor cpu = p.graph->run(p.inputs)[0];
  const std::vector<float> gpu = run_on_gpu(*p.graph, kernel_inputs(*p.graph, p.inputs), cpu, 1, cpu.numel());
  CHECK(relative_error(gpu, cpu) < reference::tolerance(DType::kF32));
}

TEST_CASE("relu_matmul's epilogue: in place on the GEMM's result, on the device against the CPU plan") {
  const test::TempDir dir;
  ::setenv("STRATA_CACHE_DIR", dir.file("kernels").c_str(), 1);
  frontend::Sequence seq;
  const app::CompiledProgram p = compiled("relu_matmul", "96x64x80", seq);
  const Tensor cpu = p.graph->run(p.inputs)[0];
  const std::vector<Tensor> in = kernel_inputs(*p.graph, p.inputs);
  REQUIRE(in.size() == 2);
  const Tensor gemm = ops::matmul(in[0], in[1]);  // what cuBLAS would have left in out
  const std::vector<float> gpu = run_on_gpu(*p.graph, in, gemm, 96, 80);
  CHECK(relative_error(gpu, cpu) < reference::tolerance(DType::kF32));
}

}  // namespace strata
