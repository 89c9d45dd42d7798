// The compiled path on a GPU (label gpu; skipped without a device, runtime/cuda/gpu_test_main.cpp): each
// program compiled on CUDA tensors (Note [The compiled graph on a GPU], Note [Generated kernels on the GPU])
// computes what the float64 reference and eager compute, through the path its epilogue choice names:
// relu_matmul's relu as cuBLASLt's RELU epilogue, linear_gelu's erf gelu as cuBLAS + the generated
// epilogue's PTX, gelu_tanh as one generated kernel; and a loaded PTX reports the driver's binary version
// (the device's architecture) and the PTX's. A compiled run captured into a CUDA Graph replays to the same
// result (Note [The compiled column on a GPU]); the second compile of a program reads its PTX from the cache;
// a compiled call's spans keep their names after it. Then the CLI end to end: trace's --check and JSON (a
// generated kernel's program written whole), and compare's compiled column replayed from a graph with every
// replayed kernel attributed.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstdlib>
#include <vector>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/strata/compiled_program.h"
#include "layers/frontend/frontend.h"
#include "layers/frontend/sequence.h"
#include "layers/kernels/reference/reference.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/timeline.h"
#include "tests/support/subprocess.h"

namespace strata {
namespace {

struct GpuRun {
  frontend::Sequence sequence;
  app::CompiledProgram program;
  Tensor out;
};

GpuRun compiled_on_gpu(const std::string& name, const std::string& dims, DType dtype) {
  // main() registered the CUDA kernels (gpu_test_main.cpp); the context, strata's stream and the caching
  // allocator for CUDA tensors are init_device's, as in every in-process GPU test (the CLI's session does
  // the same at device selection). Idempotent.
  runtime::cuda::init_device(0);
  GpuRun run;
  run.sequence = frontend::prepare_sequence(frontend::parse_sequence_spec(name, dims), dtype, Device{DeviceType::kCUDA, 0},
                                            11, false, size_t(1) << 30);
  run.program = app::compile_program(run.sequence);
  run.out = run.program.graph->run(run.program.inputs)[0];
  REQUIRE(run.out.device().is_cuda());
  return run;
}

// The GPU's compute capability as the driver's binary version writes it (9.0 -> 90).
int device_binary_version() {
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  return prop.major * 10 + prop.minor;
}

// Compiled on the GPU vs float64 and vs the eager forward capture ran (on the GPU too).
void check_results(const GpuRun& run, DType dtype) {
  const double vs_reference = reference::relative_error(run.out, frontend::reference_result(run.sequence));
  const double vs_eager =
      reference::relative_error(run.out, reference::to_double(run.program.captured.eager_outputs[0]));
  CAPTURE(vs_reference);
  CAPTURE(vs_eager);
  CHECK(vs_reference < reference::tolerance(dtype));
  CHECK(vs_eager < reference::tolerance(dtype));
}

// The CLI with its PTX cache in `dir`: a run compiles its kernels afresh and never reads another test's.
test::RunOptions cache_in(const test::TempDir& dir) {
  test::RunOptions options;
  options.env.push_back("STRATA_CACHE_DIR=" + dir.file("kernels"));
  return options;
}

const compiler::DeviceKernelInfo& only_kernel(const GpuRun& run) {
  REQUIRE(run.program.graph->builds().size() == 1);
  REQUIRE(run.program.graph->builds()[0].device.has_value());
  return *run.program.graph->builds()[0].device;
}

}  // namespace

TEST_CASE("relu_matmul on the GPU: one cublasLtMatmul with the RELU epilogue, f32 and f64") {
  const test::TempDir dir;
  ::setenv("STRATA_CACHE_DIR", dir.file("kernels").c_str(), 1);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    CAPTURE(dtype_name(dtype));
    const GpuRun run = compiled_on_gpu("relu_matmul", "257x129x63", dtype);
    check_results(run, dtype);
    const compiler::DeviceKernelInfo& info = only_kernel(run);
    MESSAGE(dtype_name(dtype) << ": " << info.path << " (" << info.epilogue_why << ")");
    if (info.epilogue == "CUBLASLT_EPILOGUE_RELU") {
      CHECK(info.path == "cublasLtMatmul + CUBLASLT_EPILOGUE_RELU");
      CHECK(!info.ptx_loaded);
    } else {  // cuBLASLt's heuristic had no RELU kernel here: the fallback, said so
      CHECK(dtype == DType::kF64);  // f32 RELU is the case issue 34 asks for: it must be the epilogue
      CHECK(info.ptx_loaded);
      CHECK(info.epilogue_why.find("; but cuBLASLt") != std::string::npos);  // no kernel, or refused: said
    }
  }
}

TEST_CASE("linear_gelu on the GPU: cuBLAS's GEMM + the generated epilogue's PTX, JIT-compiled by the driver") {
  const test::TempDir dir;
  ::setenv("STRATA_CACHE_DIR", dir.file("kernels").c_str(), 1);
  const GpuRun run = compiled_on_gpu("linear_gelu", "32x768x3072", DType::kF32);
  check_results(run, DType::kF32);
  const compiler::DeviceKernelInfo& info = only_kernel(run);
  CHECK(info.epilogue == "none");
  CHECK(info.epilogue_why.find("erf") != std::string::npos);
  CHECK(info.ptx_loaded);
  CHECK(info.binary_version == device_binary_version());
  CHECK(info.ptx_version == std::atoi(info.arch.c_str() + 3));  // the PTX's virtual architecture, as NVRTC made it
  CHECK(info.jit_ns > 0);
  MESSAGE("driver JIT info log: " << info.jit_log);
}

TEST_CASE("gelu_tanh on the GPU: eight calls, one generated kernel, f32 and f64, a size no block divides") {
  const test::TempDir dir;
  ::setenv("STRATA_CACHE_DIR", dir.file("kernels").c_str(), 1);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    CAPTURE(dtype_name(dtype));
    const GpuRun run = compiled_on_gpu("gelu_tanh", "1048577", dtype);
    check_results(run, dtype);
    const compiler::DeviceKernelInfo& info = only_kernel(run);
    CHECK(info.path == "generated kernel (PTX)");
    CHECK(info.binary_version == device_binary_version());
  }
}

// Note [A zone's name outlives the zone] (apps/cuda_module/compiled_kernels_cuda.cpp): the library spans
// of a generated kernel's call are read after the call, its launch's name included; a name pointing into a
// dead temporary once reached the JSON as bytes that are not UTF-8.
TEST_CASE("gelu_tanh on the GPU: the spans of a compiled call keep their names after the call") {
  const test::TempDir dir;
  ::setenv("STRATA_CACHE_DIR", dir.file("kernels").c_str(), 1);
  const GpuRun run = compiled_on_gpu("gelu_tanh", "4099", DType::kF32);
  Timeline timeline;
  {
    tracing::ActiveScope scope(&timeline);
    timeline.set_op(1);
    (void)run.program.graph->run(run.program.inputs);
    timeline.set_op(0);
  }
  check_results(run, DType::kF32);  // more calls, over the stack the launch used
  std::vector<std::string> library;
  for (const Span& span : timeline.spans()) {
    if (span.layer == Layer::kLibrary) library.emplace_back(span.name);
  }
  const std::string fused = run.program.graph->plan().kernels.at(0).name;
  CHECK(library == std::vector<std::string>{fused + "<<<>>> (generated, PTX)", "cuLaunchKernel"});
}

TEST_CASE("strata trace gelu_tanh --mode compiled --device cuda --json: the file is written, every name whole") {
  test::TempDir dir;
  const std::string report = dir.file("g.json");
  const test::RunOptions options = cache_in(dir);
  const test::RunResult r =
      test::run_strata({"trace", "gelu_tanh", "65537", "--mode", "compiled", "--device", "cuda", "--check", "--repeat",
                        "5", "--warmup", "1", "--json", report},
                       options);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("not UTF-8") == std::string::npos);
  const nlohmann::json doc = nlohmann::json::parse(test::read_file(report));
  CHECK_FALSE(doc.contains("invalid_utf8_replaced"));  // Note [JSON text is valid UTF-8]: nothing replaced
  CHECK(doc["sequence"]["op_log"][0]["backend"] ==
        "fused_pow_mul_add_mul_tanh_add_mul_mul<<<>>> (generated, PTX) > cuLaunchKernel");
  CHECK(doc["compiled"]["by_fused_kernel"]["unattributed_kernels"] == 0);
}

TEST_CASE("strata trace PROGRAM --mode compiled --device cuda: --check passes, the JSON names each kernel's path") {
  test::TempDir dir;
  const std::string report = dir.file("c.json");
  const test::RunOptions options = cache_in(dir);
  const test::RunResult r =
      test::run_strata({"trace", "linear_gelu", "32x256x512", "--mode", "compiled", "--device", "cuda", "--check",
                        "--repeat", "10", "--warmup", "1", "--json", report},
                       options);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("gpu fused_linear_gelu: cuBLAS GEMM + generated epilogue (PTX)") != std::string::npos);
  CHECK(r.out.find("JIT-compiled by the driver: binary version") != std::string::npos);
  const nlohmann::json doc = nlohmann::json::parse(test::read_file(report));
  CHECK(doc["check"]["passed"] == true);
  CHECK(doc["mode"] == "compiled");
  const nlohmann::json& gpu = doc["compiled"]["kernels"][0]["gpu"];
  CHECK(gpu["ptx_loaded"] == true);
  CHECK(gpu["binary_version"].get<int>() == device_binary_version());
  // Each timed call's kernels (cuBLAS's GEMM, the generated epilogue) to the one fused kernel that launched
  // them (Note [Compiled kernels attributed to their group]).
  const nlohmann::json& by = doc["compiled"]["by_fused_kernel"];
  REQUIRE(by.is_object());
  CHECK(by["kernels"].get<int>() >= 20);
  CHECK(by["unattributed_kernels"] == 0);
  CHECK(by["groups"][0]["name"] == "fused_linear_gelu");
  CHECK(by["groups"][0]["device_kernels"] == by["kernels"]);
  CHECK(r.out.find("k0  fused_linear_gelu <- linear gelu: ") != std::string::npos);
}

TEST_CASE("a compiled run captured into a CUDA Graph replays to what the run computed, each program's path") {
  const test::TempDir dir;
  ::setenv("STRATA_CACHE_DIR", dir.file("kernels").c_str(), 1);
  struct Case {
    const char* name;
    const char* dims;
  };
  for (const Case c : {Case{"relu_matmul", "256"}, Case{"linear_gelu", "32x256x512"}, Case{"gelu_tanh", "1048577"}}) {
    CAPTURE(std::string(c.name));
    const GpuRun run = compiled_on_gpu(c.name, c.dims, DType::kF32);
    Tensor replayed;
    runtime::cuda::CapturedGraph graph(0, [&] { replayed = run.program.graph->run(run.program.inputs)[0]; });
    // Every fused kernel became at least one node: nothing ran outside the capture.
    CHECK(graph.nodes() >= run.program.graph->plan().kernels.size());
    graph.launch();
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    // The generated kernel is the same code on the same inputs: bit for bit. cuBLAS may pick another GEMM
    // kernel under capture, so a GEMM's program is held to the dtype's tolerance.
    const double error = reference::relative_error(replayed, reference::to_double(run.out));
    CAPTURE(error);
    CHECK(error <= (std::string(c.name) == "gelu_tanh" ? 0.0 : reference::tolerance(DType::kF32)));
  }
}

TEST_CASE("the second compile of a program on the GPU reads its PTX from the cache: the same PTX, NVRTC skipped") {
  const test::TempDir dir;
  ::setenv("STRATA_CACHE_DIR", dir.file("kernels").c_str(), 1);
  const GpuRun cold = compiled_on_gpu("gelu_tanh", "4099", DType::kF32);
  const GpuRun warm = compiled_on_gpu("gelu_tanh", "4099", DType::kF32);
  const compiler::DeviceKernelInfo& first = only_kernel(cold);
  const compiler::DeviceKernelInfo& second = only_kernel(warm);
  CHECK_FALSE(first.ptx_cache_hit);
  CHECK(second.ptx_cache_hit);
  CHECK(second.ptx_path == first.ptx_path);
  CHECK(warm.program.graph->timings().cache_hits == 1);
  CHECK(warm.program.graph->timings().cache_misses == 0);
  CHECK(second.binary_version == device_binary_version());
  CHECK(reference::relative_error(warm.out, reference::to_double(cold.out)) == 0.0);
}

TEST_CASE("strata compare PROGRAM --device cuda: the compiled column, replayed from a CUDA Graph, every kernel attributed") {
  test::TempDir dir;
  const test::RunOptions options = cache_in(dir);
  for (const char* program : {"gelu_tanh", "relu_matmul"}) {
    CAPTURE(std::string(program));
    const std::string report = dir.file(std::string(program) + ".json");
    const test::RunResult r = test::run_strata({"compare", program, program == std::string("gelu_tanh") ? "65536" : "256",
                                                "--device", "cuda", "--check", "--repeat", "5", "--warmup", "1",
                                                "--json", report},
                                               options);
    INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("compiled replay: CUDA Graph of ") != std::string::npos);
    const nlohmann::json doc = nlohmann::json::parse(test::read_file(report));
    CHECK(doc["check"]["passed"] == true);
    const nlohmann::json& three = doc["three_way"];
    REQUIRE(three["compiled"].is_object());
    CHECK(three["compiled"]["label"] == "compiled+graph");
    CHECK(three["compiled"]["wall_ns"].get<double>() > 0);
    const nlohmann::json& replay = three["compiled_replay"];
    CHECK(replay["kind"] == "CUDA Graph");
    CHECK(replay["replayed_kernels"].get<int>() > 0);
    CHECK(replay["attributed_kernels"] == replay["replayed_kernels"]);
    const nlohmann::json& by = replay["by_fused_kernel"];
    REQUIRE(by.is_object());
    CHECK(by["kernels"] == replay["replayed_kernels"]);
    CHECK(by["unattributed_kernels"] == 0);
    for (const nlohmann::json& group : by["groups"]) CHECK(group["device_kernels"].get<int>() > 0);
  }
}

}  // namespace strata
