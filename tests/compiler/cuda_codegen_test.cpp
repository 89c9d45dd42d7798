// The fused kernels as CUDA C on a machine with the toolkit, GPU or not: every generated kernel of the
// named programs compiles with the real NVRTC for sm_80 and sm_90 and the real ptxas accepts its PTX;
// NVRTC's and ptxas's refusals, and an unknown architecture.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include "apps/strata/compiled_program.h"
#include "layers/compiler/compiler_cuda.h"
#include "layers/frontend/sequence.h"
#include "tests/support/error_text.h"
#include "tests/support/scoped_env.h"
#include "tests/support/subprocess.h"

namespace strata {
namespace {

namespace cc = compiler::cuda;

using test::ScopedEnv;

// The named program compiled for the CPU, as `strata trace PROGRAM --mode compiled` compiles it; its
// kernels then as CUDA C.
std::vector<cc::CudaKernel> program_kernels(const std::string& name, const std::string& dims, DType dtype) {
  const frontend::SequenceSpec spec = frontend::parse_sequence_spec(name, dims);
  frontend::Sequence seq = frontend::prepare_sequence(spec, dtype, kCPU, 7, false, size_t(1) << 30);
  const app::CompiledProgram p = app::compile_program(seq);
  return cc::generate_cuda(*p.graph);
}

}  // namespace

TEST_CASE("every generated kernel of the named programs compiles with NVRTC and ptxas, sm_80 and sm_90") {
  const test::TempDir dir;
  const ScopedEnv cache("STRATA_CACHE_DIR", dir.file("kernels"));
  struct Case {
    const char* program;
    const char* dims;
    const char* kernel;
  };
  for (const Case c : {Case{"relu_matmul", "16", "fused_matmul_relu"},
                       Case{"linear_gelu", "4x8x16", "fused_linear_gelu"}, Case{"gelu_tanh", "64", ""}}) {
    for (const DType dtype : {DType::kF32, DType::kF64}) {
      CAPTURE(std::string(c.program));
      CAPTURE(dtype_name(dtype));
      const std::vector<cc::CudaKernel> kernels = program_kernels(c.program, c.dims, dtype);
      REQUIRE(kernels.size() == 1);  // each program fuses into one generated kernel
      if (*c.kernel != '\0') CHECK(kernels[0].name == c.kernel);
      CHECK(kernels[0].dtype == dtype);
      for (const std::string arch : {"sm_80", "sm_90"}) {
        CAPTURE(arch);
        const cc::Ptx ptx = cc::compile_ptx(kernels[0], arch);
        CHECK(test::contains(ptx.ptx, ".target " + arch));
        CHECK(test::contains(ptx.ptx, ".entry " + kernels[0].name));
        const cc::PtxasReport r = cc::run_ptxas(ptx.ptx, arch);
        REQUIRE_MESSAGE(r.ran, r.why_not);  // this build found the toolkit, so its ptxas is there
        REQUIRE(r.functions.size() == 1);
        CHECK(r.functions[0].function == kernels[0].name);
        CHECK(r.functions[0].arch == arch);
        CHECK(r.functions[0].registers > 0);
      }
    }
  }
}

TEST_CASE("the CUDA source uses CUDA's math functions of the kernel's type") {
  const test::TempDir dir;
  const ScopedEnv cache("STRATA_CACHE_DIR", dir.file("kernels"));
  const std::string f32 = program_kernels("gelu_tanh", "64", DType::kF32)[0].source;
  CHECK(test::contains(f32, "#define m_tanh tanhf"));
  CHECK(test::contains(f32, "m_tanh("));
  CHECK(test::contains(f32, "__global__"));
  const std::string f64 = program_kernels("linear_gelu", "4x8x16", DType::kF64)[0].source;
  CHECK(test::contains(f64, "#define m_erf erf\n"));
  CHECK(test::contains(f64, "typedef double T;"));
  CHECK(test::contains(f64, "i % cols"));  // the bias is read by column
}

TEST_CASE("NVRTC's refusal names the source and carries its log") {
  const cc::CudaKernel bad{"broken_kernel", DType::kF32,
                           "extern \"C\" __global__ void broken_kernel() { undeclared(); }\n"};
  try {
    (void)cc::compile_ptx(bad, "sm_90");
    FAIL("NVRTC accepted a source that calls an undeclared function");
  } catch (const compiler::KernelCompileError& e) {
    CHECK(test::contains(e.what(), "broken_kernel.cu"));
    CHECK(test::contains(e.what(), "undeclared"));
    CHECK(e.source_path() == "broken_kernel.cu");
  }
}

TEST_CASE("an unknown architecture is a usage error that lists the allowed ones") {
  const cc::CudaKernel k{"k", DType::kF32, "extern \"C\" __global__ void k() {}\n"};
  CHECK_THROWS_AS((void)cc::compile_ptx(k, "sm_75"), UsageError);
  CHECK_THROWS_AS(cc::check_arch("compute_90"), UsageError);
  try {
    cc::check_arch("sm_75");
  } catch (const UsageError& e) {
    CHECK(test::contains(e.what(), "sm_75"));
    CHECK(test::contains(e.what(), "sm_80, sm_86, sm_89, sm_90, sm_100, sm_120"));
  }
  for (const std::string& a : cc::known_archs()) CHECK_NOTHROW(cc::check_arch(a));
}

TEST_CASE(
    "ptxas: rejected PTX is an error with its output - a ptxas that cannot run is reported, not thrown") {
  try {
    (void)cc::run_ptxas("this is not PTX\n", "sm_90");
    FAIL("ptxas accepted text that is not PTX");
  } catch (const compiler::KernelCompileError& e) {
    CHECK(test::contains(e.what(), "ptxas rejected the PTX for sm_90"));
    CHECK(test::read_file(e.source_path()) == "this is not PTX\n");  // kept for a look
    std::remove(e.source_path().c_str());
  }
  const ScopedEnv missing("STRATA_PTXAS", "/nonexistent/ptxas");
  const cc::PtxasReport r = cc::run_ptxas(".version 9.0\n.target sm_90\n.address_size 64\n", "sm_90");
  CHECK_FALSE(r.ran);
  CHECK(test::contains(r.why_not, "/nonexistent/ptxas"));
}

}  // namespace strata
