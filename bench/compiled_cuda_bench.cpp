// compiled_cuda_bench: the compiled path on a GPU (docs/compiled.md, Note [Generated kernels on the GPU])
// against what the hardware and the library reach on the same work, side by side in one run:
//  1. a generated pointwise kernel (gelu_tanh's eight calls fused into one: reads x once, writes y once)
//     against a device-to-device cudaMemcpyAsync of the same bytes on the same stream: bandwidth, read
//     plus write counted on both sides, and the kernel's as a fraction of the copy's (target >= 80%), and
//     strata's own eager relu, tanh and add kernels on the same input against the same copy;
//  2. relu_matmul N compiled (one cublasLtMatmul with the RELU epilogue, when cuBLASLt has that kernel)
//     against cuBLAS's GEMM alone on the same operands (strata's CUDA matmul: cublasGemmEx; target at most
//     1.02x) and against eager's two kernels (the GEMM, then strata's relu kernel, through the dispatcher).
//
//   compiled_cuda_bench [--elements N] [--gemm N] [--batches B] [--calls C] [--json FILE]
//
// Everything strata runs here goes through strata's own code, reused: the programs of layers/frontend
// (prepare_sequence), the compiled path (app::compile_program, the CUDA module's compiled kernels and the
// PTX module's NVRTC), strata's CUDA matmul. Time: CUDA events on strata's stream around C calls issued
// back to back (the GPU stays busy while the host issues the next), B such batches, the median batch's
// time per call: GPU time per call with the host's issue cost hidden, as a pipelined program sees it.
// Without a usable GPU it prints "no GPU: skipped" and why, and exits 4, as the raw GPU baselines do.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/strata/compiled_program.h"
#include "layers/frontend/sequence.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"
#include "lib/output_file.h"
#include "measure/device_session.h"
#include "measure/devices/cuda_module.h"
#include "reports/formats/json_text.h"

namespace {

using namespace strata;
namespace rt = runtime::cuda;

constexpr const char* kName = "compiled_cuda_bench";
constexpr Device kGpu{DeviceType::kCUDA, 0};

struct Options {
  int64_t elements = int64_t{1} << 26;  // 256 MiB per f32 tensor: far past any cache
  int64_t gemm = 4096;
  int batches = 7;
  int calls = 20;
  std::string json_path;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--elements" && has_value) o.elements = std::atoll(argv[++i]);
    else if (a == "--gemm" && has_value) o.gemm = std::atoll(argv[++i]);
    else if (a == "--batches" && has_value) o.batches = std::atoi(argv[++i]);
    else if (a == "--calls" && has_value) o.calls = std::atoi(argv[++i]);
    else if (a == "--json" && has_value) o.json_path = argv[++i];
    else {
      std::fprintf(stderr, "%s: unknown argument '%s'\nusage: %s [--elements N] [--gemm N] [--batches B] [--calls C] "
                   "[--json FILE]\n", kName, a.c_str(), kName);
      std::exit(2);
    }
  }
  if (o.elements < 1 || o.gemm < 1 || o.batches < 1 || o.calls < 1) {
    std::fprintf(stderr, "%s: --elements, --gemm, --batches and --calls must be at least 1\n", kName);
    std::exit(2);
  }
  return o;
}

void cuda_ok(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw Error(std::string(call) + " failed: " + cudaGetErrorName(e));
}

// The median over `batches` of one batch's time per call: events around `calls` back-to-back calls.
double median_call_ns(const Options& o, const std::function<void()>& call) {
  const cudaStream_t stream = rt::stream(kGpu.index);
  for (int i = 0; i < 3; ++i) call();  // warm: plans, the caching allocator's blocks, the driver's JIT
  cudaEvent_t begin = nullptr, end = nullptr;
  cuda_ok(cudaEventCreate(&begin), "cudaEventCreate");
  cuda_ok(cudaEventCreate(&end), "cudaEventCreate");
  std::vector<double> per_call;
  for (int b = 0; b < o.batches; ++b) {
    cuda_ok(cudaEventRecord(begin, stream), "cudaEventRecord");
    for (int c = 0; c < o.calls; ++c) call();
    cuda_ok(cudaEventRecord(end, stream), "cudaEventRecord");
    cuda_ok(cudaEventSynchronize(end), "cudaEventSynchronize");
    float ms = 0;
    cuda_ok(cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
    per_call.push_back(double(ms) * 1e6 / o.calls);
  }
  (void)cudaEventDestroy(begin);
  (void)cudaEventDestroy(end);
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

frontend::Sequence gpu_program(const std::string& name, const std::string& dims) {
  return frontend::prepare_sequence(frontend::parse_sequence_spec(name, dims), DType::kF32, kGpu, 7, false,
                                    measure::available_bytes(kGpu));
}

// What the compiled graph's one kernel ran as ("generated kernel (PTX)", "cublasLtMatmul + ...").
std::string kernel_path(const app::CompiledProgram& program) {
  const auto& builds = program.graph->builds();
  if (builds.size() != 1 || !builds[0].device) return std::to_string(builds.size()) + " kernels";
  return builds[0].device->path + (builds[0].device->epilogue_why.empty() ? "" : " (" + builds[0].device->epilogue_why + ")");
}

double gb_per_s(double bytes, double ns) { return ns > 0 ? bytes / ns : 0; }  // bytes per ns = GB/s

nlohmann::json pointwise(const Options& o) {
  frontend::Sequence sequence = gpu_program("gelu_tanh", std::to_string(o.elements));
  app::CompiledProgram program = app::compile_program(sequence);
  const double kernel_ns = median_call_ns(o, [&] { (void)program.graph->run(program.inputs); });
  const size_t bytes = size_t(o.elements) * element_size(DType::kF32);
  Tensor copy = Tensor::empty(sequence.input.sizes(), DType::kF32, kGpu);
  const double copy_ns = median_call_ns(o, [&] {
    cuda_ok(cudaMemcpyAsync(copy.data_ptr(), sequence.input.data_ptr(), bytes, cudaMemcpyDeviceToDevice,
                            rt::stream(kGpu.index)), "cudaMemcpyAsync");
  });
  const double fraction = kernel_ns > 0 ? copy_ns / kernel_ns : 0;  // same bytes: the ratio of bandwidths
  std::printf("\n## Generated pointwise kernel: gelu_tanh %lld f32 (8 ops fused; %s)\n", (long long)o.elements,
              kernel_path(program).c_str());
  std::printf("%-44s %12s %14s\n", "", "per call", "read + write");
  std::printf("%-44s %9.1f us %9.1f GB/s\n", "cudaMemcpyAsync device to device", copy_ns / 1e3,
              gb_per_s(2.0 * double(bytes), copy_ns));
  std::printf("%-44s %9.1f us %9.1f GB/s\n", "compiled: the generated kernel", kernel_ns / 1e3,
              gb_per_s(2.0 * double(bytes), kernel_ns));
  std::printf("the generated kernel reaches %.1f%% of the copy's bandwidth (target >= 80%%: %s)\n", 100 * fraction,
              fraction >= 0.8 ? "met" : "NOT met");
  // strata's own eager CUDA pointwise kernels on the same input, through their kernel entry points (a
  // unary op reads and writes the bytes once, add reads twice): bandwidth against the same copy's.
  struct Eager {
    const char* name;
    double bytes_moved;
    std::function<void()> call;
  };
  const Tensor& x = sequence.input;
  const Eager eager[] = {
      {"eager: strata's relu kernel", 2.0 * double(bytes), [&] { (void)kernels::cuda::relu(x); }},
      {"eager: strata's tanh kernel", 2.0 * double(bytes), [&] { (void)kernels::cuda::tanh(x); }},
      {"eager: strata's add kernel", 3.0 * double(bytes), [&] { (void)kernels::cuda::add(x, x, 1.0); }},
  };
  const double copy_gbs = gb_per_s(2.0 * double(bytes), copy_ns);
  nlohmann::json eager_json = nlohmann::json::array();
  for (const Eager& e : eager) {
    const double ns = median_call_ns(o, e.call);
    const double gbs = gb_per_s(e.bytes_moved, ns), f = copy_gbs > 0 ? gbs / copy_gbs : 0;
    std::printf("%-44s %9.1f us %9.1f GB/s  %.1f%% of the copy's (target >= 80%%: %s)\n", e.name, ns / 1e3, gbs,
                100 * f, f >= 0.8 ? "met" : "NOT met");
    eager_json.push_back({{"kernel", e.name}, {"ns", ns}, {"bytes_read_and_written", e.bytes_moved},
                          {"fraction_of_memcpy_bandwidth", f}, {"target_met", f >= 0.8}});
  }
  return {{"program", "gelu_tanh " + std::to_string(o.elements)}, {"kernel_path", kernel_path(program)},
          {"bytes_read_and_written", 2.0 * double(bytes)}, {"memcpy_ns", copy_ns}, {"kernel_ns", kernel_ns},
          {"fraction_of_memcpy_bandwidth", fraction}, {"target_met", fraction >= 0.8},
          {"eager_kernels", eager_json}};
}

nlohmann::json relu_matmul(const Options& o) {
  frontend::Sequence sequence = gpu_program("relu_matmul", std::to_string(o.gemm));
  app::CompiledProgram program = app::compile_program(sequence);
  const Tensor a = sequence.input, b = sequence.parameters.at(0);
  const double gemm_ns = median_call_ns(o, [&] { (void)kernels::cuda::matmul(a, b); });
  const double compiled_ns = median_call_ns(o, [&] { (void)program.graph->run(program.inputs); });
  const double eager_ns = median_call_ns(o, [&] { (void)sequence.forward(); });
  const double vs_gemm = gemm_ns > 0 ? compiled_ns / gemm_ns : 0, vs_eager = eager_ns > 0 ? compiled_ns / eager_ns : 0;
  const double flops = 2.0 * double(o.gemm) * double(o.gemm) * double(o.gemm);
  std::printf("\n## relu_matmul %lld f32: %s\n", (long long)o.gemm, kernel_path(program).c_str());
  std::printf("%-52s %12s %12s %10s\n", "", "per call", "TFLOP/s", "vs GEMM");
  const auto row = [&](const char* what, double ns) {
    std::printf("%-52s %9.1f us %12.1f %9.3fx\n", what, ns / 1e3, flops / ns / 1e3, ns / gemm_ns);
  };
  row("cuBLAS's GEMM alone (cublasGemmEx, no relu)", gemm_ns);
  row("compiled: one cublasLtMatmul, RELU epilogue", compiled_ns);
  row("eager: the GEMM + strata's relu kernel (dispatcher)", eager_ns);
  std::printf("compiled / GEMM alone %.3fx (target <= 1.02x: %s); compiled / eager %.3fx\n", vs_gemm,
              vs_gemm <= 1.02 ? "met" : "NOT met", vs_eager);
  return {{"program", "relu_matmul " + std::to_string(o.gemm)}, {"kernel_path", kernel_path(program)},
          {"gemm_alone_ns", gemm_ns}, {"compiled_ns", compiled_ns}, {"eager_ns", eager_ns},
          {"compiled_vs_gemm", vs_gemm}, {"compiled_vs_eager", vs_eager}, {"target_met", vs_gemm <= 1.02}};
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const rt::Probe probe = rt::probe();
  std::string why = probe.usable ? rt::unsupported_reason(0) : probe.reason;
  if (!why.empty()) {
    std::printf("%s: no GPU: skipped (%s)\n", kName, why.c_str());
    return 4;
  }
  try {
    measure::require_cuda_backend();  // the CUDA kernels registered with the dispatcher, as strata's loader does
    rt::init_device(0);
    const rt::DeviceInfo info = rt::device_info(0);
    std::printf("# %s on %s (sm_%d%d): medians of %d batches of %d back-to-back calls, CUDA events on strata's "
                "stream\n", kName, info.name.c_str(), info.cc_major, info.cc_minor, options.batches, options.calls);
    nlohmann::json doc{{"device", info.name}, {"batches", options.batches}, {"calls_per_batch", options.calls}};
    doc["pointwise"] = pointwise(options);
    doc["relu_matmul"] = relu_matmul(options);
    if (!options.json_path.empty()) write_file_atomically(options.json_path, reports::json_text(doc));
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", kName, e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
