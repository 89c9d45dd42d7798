// --emit sass below the command line: every generated kernel of the named programs assembled by ptxas into
// a cubin and disassembled by the disassembler find_cuda_tool finds (cuobjdump, else nvdisasm), for sm_80
// and sm_90; where both are there, the two tools' listings give the same opcodes. Host only: a cubin is a
// file, no GPU runs it. Without a disassembler each test says so (MESSAGE) and checks nothing more.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "apps/strata/compiled_program.h"
#include "layers/compiler/compiler_cuda.h"
#include "layers/compiler/sass.h"
#include "layers/frontend/sequence.h"
#include "lib/error.h"
#include "tests/support/error_text.h"
#include "tests/support/subprocess.h"

namespace strata {
namespace {

namespace cc = compiler::cuda;

// The named program compiled for the CPU (as `strata trace PROGRAM --mode compiled` does), then each of
// its generated kernels through NVRTC and ptxas for `arch`, the cubins kept.
std::vector<cc::PtxKernel> program_cubins(const std::string& name, const std::string& dims,
                                          const std::string& arch) {
  const frontend::SequenceSpec spec = frontend::parse_sequence_spec(name, dims);
  frontend::Sequence seq = frontend::prepare_sequence(spec, DType::kF32, kCPU, 7, false, size_t(1) << 30);
  const app::CompiledProgram p = app::compile_program(seq);
  return cc::emit_ptx(*p.graph, arch, true);
}

// "" when a disassembler is there, else the reason (both tools' whys).
std::string no_disassembler() {
  std::string why_cuobjdump, why_nvdisasm;
  if (!compiler::find_cuda_tool("cuobjdump", why_cuobjdump).empty()) return "";
  if (!compiler::find_cuda_tool("nvdisasm", why_nvdisasm).empty()) return "";
  return why_cuobjdump + "; " + why_nvdisasm;
}

}  // namespace

TEST_CASE("every generated kernel of the named programs disassembles for sm_80 and sm_90: loads, stores, fp32") {
  if (const std::string why = no_disassembler(); !why.empty()) {
    MESSAGE("skipped: no cuobjdump or nvdisasm (scripts/install-python-deps installs them): " << why);
    return;
  }
  const test::TempDir dir;
  ::setenv("STRATA_CACHE_DIR", dir.file("kernels").c_str(), 1);
  struct Case {
    const char* program;
    const char* dims;
  };
  for (const Case c : {Case{"relu_matmul", "16"}, Case{"linear_gelu", "4x8x16"}, Case{"gelu_tanh", "64"},
                       Case{"mlp", "4x8x16x4"}}) {
    for (const std::string arch : {"sm_80", "sm_90"}) {
      CAPTURE(std::string(c.program));
      CAPTURE(arch);
      const std::vector<cc::PtxKernel> kernels = program_cubins(c.program, c.dims, arch);
      REQUIRE(!kernels.empty());
      for (const cc::PtxKernel& k : kernels) {
        const std::string name = k.kernel.name;
        CAPTURE(name);
        REQUIRE_MESSAGE(k.ptxas.ran, k.ptxas.why_not);
        REQUIRE(!k.ptxas.cubin.empty());
        const std::string cubin = dir.file(name + "." + arch + ".cubin");
        std::ofstream(cubin, std::ios::binary) << k.ptxas.cubin;
        const compiler::Disassembly d = compiler::disassemble_cubin(cubin);
        REQUIRE(d.functions.size() == 1);
        CHECK(d.functions[0].name == name);
        CHECK(d.functions[0].arch == arch);
        const compiler::SassMix mix = compiler::instruction_mix(d.functions[0]);
        CHECK(mix[compiler::SassClass::kGlobalLoad] > 0);
        CHECK(mix[compiler::SassClass::kGlobalStore] > 0);
        CHECK(mix[compiler::SassClass::kFp32] > 0);
        CHECK(mix[compiler::SassClass::kFp64] == 0);  // f32 kernels
      }
    }
  }
  ::unsetenv("STRATA_CACHE_DIR");
}

TEST_CASE("cuobjdump -sass and nvdisasm -c list the same opcodes for the same cubin") {
  std::string why;
  const std::string cuobjdump = compiler::find_cuda_tool("cuobjdump", why);
  const std::string nvdisasm = compiler::find_cuda_tool("nvdisasm", why);
  if (cuobjdump.empty() || nvdisasm.empty()) {
    MESSAGE("skipped: this needs both cuobjdump and nvdisasm (scripts/install-python-deps installs them): " << why);
    return;
  }
  const test::TempDir dir;
  ::setenv("STRATA_CACHE_DIR", dir.file("kernels").c_str(), 1);
  for (const std::string arch : {"sm_80", "sm_90"}) {
    CAPTURE(arch);
    const std::vector<cc::PtxKernel> kernels = program_cubins("gelu_tanh", "64", arch);
    REQUIRE(kernels.size() == 1);
    const std::string cubin = dir.file("k." + arch + ".cubin");
    std::ofstream(cubin, std::ios::binary) << kernels[0].ptxas.cubin;
    const std::vector<compiler::SassFunction> a =
        compiler::parse_sass(compiler::run_tool({cuobjdump, "-sass", cubin}));
    const std::vector<compiler::SassFunction> b =
        compiler::parse_nvdisasm(compiler::run_tool({nvdisasm, "-c", cubin}));
    REQUIRE(a.size() == 1);
    REQUIRE(b.size() == 1);
    CHECK(a[0].name == b[0].name);
    CHECK(a[0].arch == b[0].arch);
    CHECK(a[0].opcodes == b[0].opcodes);
  }
  ::unsetenv("STRATA_CACHE_DIR");
}

TEST_CASE("no disassembler anywhere: UnavailableError naming both tools and how to get them") {
  const test::TempDir dir;
  ::setenv("CUOBJDUMP", dir.file("none/cuobjdump").c_str(), 1);
  ::setenv("NVDISASM", dir.file("none/nvdisasm").c_str(), 1);
  try {
    (void)compiler::disassemble_cubin(dir.file("k.cubin"));
    FAIL("disassemble_cubin did not throw");
  } catch (const UnavailableError& e) {
    const std::string what = e.what();
    CHECK(test::contains(what, "CUOBJDUMP is " + dir.file("none/cuobjdump")));
    CHECK(test::contains(what, "NVDISASM is " + dir.file("none/nvdisasm")));
    CHECK(test::contains(what, "nvidia-cuda-cuobjdump"));
    CHECK(test::contains(what, "scripts/install-python-deps"));
  }
  // $CUOBJDUMP alone, naming nothing: reported as such, not passed over for an nvdisasm found elsewhere.
  ::unsetenv("NVDISASM");
  try {
    (void)compiler::disassemble_cubin(dir.file("k.cubin"));
    FAIL("disassemble_cubin did not throw");
  } catch (const UnavailableError& e) {
    CHECK(test::contains(e.what(), "CUOBJDUMP is " + dir.file("none/cuobjdump")));
    CHECK(!test::contains(e.what(), "no nvdisasm"));  // nvdisasm was not looked for
  }
  ::unsetenv("CUOBJDUMP");
}

}  // namespace strata
