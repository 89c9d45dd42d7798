// The cuobjdump readers on real cuobjdump 13.0 listings of strata's own CUDA kernels (H200, sm_90),
// committed under tests/compiler/data/sass (README.md there): the figures are held to the raw text,
// counted here apart from the parser with a regex and by hand.
#include "layers/compiler/sass.h"

#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "lib/error.h"

namespace strata {
namespace {

using compiler::SassClass;

std::string sample(const std::string& name) {
  std::ifstream f(std::string(STRATA_SOURCE_DIR) + "/tests/compiler/data/sass/" + name);
  REQUIRE(f.good());
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const char* const kAddHalf =
    "_ZN6strata7kernels4cuda45_GLOBAL__N__10aa3e11_12_pointwise_cu_52cfc27e10add_kernelI6__halfEEvPKT_S7_"
    "NS2_4MathIS5_E3AccEPS5_l";

// The raw text of one function's listing, from its "Function :" line to its closing line.
std::string function_text(const std::string& listing, const std::string& name) {
  const size_t begin = listing.find("Function : " + name);
  REQUIRE(begin != std::string::npos);
  const size_t end = listing.find("..........", begin);
  REQUIRE(end != std::string::npos);
  return listing.substr(begin, end - begin);
}

// Instruction lines whose mnemonic (after an optional guard predicate) is `mnemonic`, with any modifiers.
int64_t count_in_text(const std::string& text, const std::string& mnemonic) {
  const std::regex re(R"(/\*[0-9a-f]{4,}\*/\s+(@!?U?P[T0-9]+\s+)?)" + mnemonic + R"([ .;])");
  return std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator());
}

const compiler::SassFunction& find(const std::vector<compiler::SassFunction>& fs, const std::string& name) {
  for (const auto& f : fs) {
    if (f.name == name) return f;
  }
  FAIL("no function " << name);
  return fs.front();
}

}  // namespace

TEST_CASE("cuobjdump -sass on libstrata_cuda.so (trimmed to 3 functions): names, architecture, opcodes") {
  const auto fs = compiler::parse_sass(sample("sass_trimmed.txt"));
  REQUIRE(fs.size() == 3);
  for (const auto& f : fs) {
    CHECK(f.arch == "sm_90");
    CHECK(!f.opcodes.empty());
    for (const auto& op : f.opcodes) CHECK(op.front() != '@');  // guard predicates are stripped
  }
  CHECK(fs[0].name == kAddHalf);
  CHECK(fs[0].demangled ==
        "void strata::kernels::cuda::(anonymous namespace)::add_kernel<__half>(__half const*, __half const*, "
        "strata::kernels::cuda::(anonymous namespace)::Math<__half>::Acc, __half*, long)");
  CHECK(fs[1].demangled ==
        "void strata::kernels::cuda::(anonymous namespace)::tanh_kernel<__nv_bfloat16>(__nv_bfloat16 const*, "
        "__nv_bfloat16*, long)");
  CHECK(fs[2].demangled ==
        "void strata::kernels::cuda::(anonymous namespace)::channel_partials_kernel<float>(double const*, "
        "float*, long)");
  // The first instructions of add_kernel<__half>, read off the listing; the 10th is "@P0 EXIT".
  const std::vector<std::string> head = {"LDC",
                                         "S2R",
                                         "S2UR",
                                         "IMAD.MOV.U32",
                                         "ULDC.64",
                                         "LDC",
                                         "IMAD.WIDE.U32",
                                         "ISETP.GE.U32.AND",
                                         "ISETP.GE.AND.EX",
                                         "EXIT"};
  REQUIRE(fs[0].opcodes.size() >= head.size());
  CHECK(std::vector<std::string>(fs[0].opcodes.begin(), fs[0].opcodes.begin() + 10) == head);
}

TEST_CASE("the instruction mix of add_kernel<__half>, counted by hand from the listing") {
  const auto fs = compiler::parse_sass(sample("sass_trimmed.txt"));
  const auto mix = compiler::instruction_mix(find(fs, kAddHalf));
  // 115 lines = "Function :", ".headerflags", the closing line and two lines per instruction.
  CHECK(mix.total == 56);
  CHECK(mix[SassClass::kFp32] == 1);         // FFMA
  CHECK(mix[SassClass::kHalf] == 2);         // HADD2.F32 x2 (the halves widened to f32)
  CHECK(mix[SassClass::kGlobalLoad] == 2);   // LDG.E.U16.CONSTANT x2
  CHECK(mix[SassClass::kGlobalStore] == 1);  // STG.E.U16
  CHECK(mix[SassClass::kConstant] == 9);     // ULDC.64 x5, ULDC x2, LDC x2
  CHECK(mix[SassClass::kBranch] == 4);       // EXIT x2, BRA x2
  CHECK(mix[SassClass::kConversion] == 1);   // F2FP.F16.F32.PACK_AB
  CHECK(mix[SassClass::kInteger] == 20);     // IADD3(.X), IMAD.*, ISETP.*, VIADD, SHF
  CHECK(mix[SassClass::kNop] == 13);
  CHECK(mix[SassClass::kOther] == 3);  // S2R, S2UR, UMOV
  CHECK(mix[SassClass::kFp64] == 0);
  CHECK(mix[SassClass::kTensor] == 0);
  CHECK(mix[SassClass::kShared] == 0);
  CHECK(mix[SassClass::kSpecial] == 0);
}

TEST_CASE("opcode counts agree with a regex over each function's raw text") {
  const std::string listing = sample("sass_trimmed.txt");
  const auto fs = compiler::parse_sass(listing);
  for (const auto& f : fs) {
    const std::string text = function_text(listing, f.name);
    const auto mix = compiler::instruction_mix(f);
    CHECK(mix.total == count_in_text(text, "[A-Z0-9_]+"));
    for (const char* m : {"FFMA", "FMUL", "FADD", "DADD", "HADD2", "HFMA2", "LDG", "STG", "LDS", "STS",
                          "MUFU", "BRA", "EXIT", "BAR", "NOP"}) {
      int64_t parsed = 0;
      for (const auto& op : f.opcodes) parsed += op.substr(0, op.find('.')) == m ? 1 : 0;
      CHECK(parsed == count_in_text(text, m));
    }
  }
  // The shared-memory reduction: LDS.64 x17, STS.64 x9 (by grep), its double accumulator DADD x37.
  const auto mix = compiler::instruction_mix(fs[2]);
  CHECK(mix[SassClass::kShared] == 26);
  CHECK(mix[SassClass::kFp64] == 37);
  CHECK(mix[SassClass::kGlobalLoad] == 29);
  // bf16 tanh through f32: MUFU.EX2 and MUFU.RCP, FFMA x6.
  const auto tanh = compiler::instruction_mix(fs[1]);
  CHECK(tanh[SassClass::kSpecial] == 2);
  CHECK(count_in_text(function_text(listing, fs[1].name), "FFMA") == 6);
}

TEST_CASE("cuobjdump --list-elf --list-ptx: sm_90 SASS, no PTX") {
  const auto code = compiler::parse_cuobjdump_list(sample("list.txt"));
  CHECK(code.sass_archs == std::vector<std::string>{"sm_90"});
  CHECK(code.ptx_archs.empty());
  // The form of a binary that embeds PTX too (no such build of strata's: it is built for 90-real).
  const auto both = compiler::parse_cuobjdump_list(
      "ELF file    1: a.1.sm_80.cubin\nELF file    2: a.2.sm_90.cubin\nPTX file    1: a.1.sm_90.ptx\n");
  CHECK(both.sass_archs == std::vector<std::string>{"sm_80", "sm_90"});
  CHECK(both.ptx_archs == std::vector<std::string>{"sm_90"});
  CHECK(compiler::parse_cuobjdump_list("").sass_archs.empty());
  CHECK(compiler::parse_cuobjdump_list("ELF file 1:\nPTX file\n").ptx_archs.empty());
}

TEST_CASE("opcode classes") {
  CHECK(compiler::classify_opcode("LDG.E.128") == SassClass::kGlobalLoad);
  CHECK(compiler::classify_opcode("LD.E") == SassClass::kOther);
  CHECK(compiler::classify_opcode("HMMA.16816.F32.BF16") == SassClass::kTensor);
  CHECK(compiler::classify_opcode("HGMMA.64x128x16.F32.BF16") == SassClass::kTensor);
  CHECK(compiler::classify_opcode("F2FP.BF16.F32.PACK_AB") == SassClass::kConversion);
  CHECK(compiler::classify_opcode("ULDC.64") == SassClass::kConstant);
  CHECK(compiler::classify_opcode("") == SassClass::kOther);
  CHECK(std::string(compiler::sass_class_name(SassClass::kGlobalStore)) == "st.global");
}

TEST_CASE("malformed cuobjdump -sass text: empty, foreign, cut off") {
  CHECK(compiler::parse_sass("").empty());
  CHECK(compiler::parse_sass("cuobjdump info    : File 'x' does not contain device code\n").empty());
  const std::string listing = sample("sass_trimmed.txt");
  // Cut inside the third function, at a line end and in the middle of a line.
  const size_t third = listing.find("channel_partials_kernel");
  const size_t at_line = listing.find('\n', third + 2000);
  CHECK_THROWS_WITH_AS(compiler::parse_sass(listing.substr(0, at_line)),
                       doctest::Contains("ends inside function"), Error);
  CHECK_THROWS_AS(compiler::parse_sass(listing.substr(0, at_line + 40)), Error);
  // Cut after "Function :" and before any instruction, then the next function begins.
  CHECK_THROWS_AS(compiler::parse_sass("arch = sm_90\n\t\tFunction : f\n\t\t..........\n"), Error);
  CHECK_THROWS_WITH_AS(compiler::parse_sass("\t\tFunction : f\n        /*0000*/ EXIT ;\n\t\t..........\n"),
                       doctest::Contains("before any \"arch =\""), Error);
  CHECK_THROWS_AS(compiler::parse_sass("arch = sm_90\n\t\tFunction : f\n        /*0000*/ EXIT ;\n"
                                       "\t\tFunction : g\n        /*0000*/ EXIT ;\n\t\t..........\n"),
                  Error);
  // Lone lines of a listing with no function open are ignored, not counted.
  CHECK(compiler::parse_sass("arch = sm_90\n        /*0000*/ EXIT ;\n\t\t..........\n").empty());
}

// nvdisasm -c 13.5 on a small cubin (ptxas 13.0, sm_80), cut to its shape: a .target line, a .text.<name>
// section with directives and labels, one line per instruction and no closing line (Note [Reading
// nvdisasm -c]); a second section ends the first. tests/compiler/sass_emit_test.cpp holds the parser to
// cuobjdump's on real cubins where both tools are there.
TEST_CASE("nvdisasm -c: a function per .text section, its arch from .target, opcodes as cuobjdump's") {
  const std::string text =
      "\t.target\tsm_80\n\n\t.elftype\t@\"ET_EXEC\"\n\n\n"
      "//--------------------- .text.fused_x             --------------------------\n"
      "\t.section\t.text.fused_x,\"ax\",@progbits\n"
      "\t.sectioninfo\t@\"SHI_REGISTERS=22\"\n"
      "        .global         fused_x\n"
      "fused_x:\n"
      ".text.fused_x:\n"
      "        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;\n"
      "        /*0010*/                   S2R R0, SR_CTAID.X ;\n"
      ".L_x_8:\n"
      "        /*00d0*/              @!P0 EXIT ;\n"
      "        /*00e0*/                   LDG.E R2, [R2.64] ;\n"
      "        /*00f0*/                   FMUL R5, R2, 2 ;\n"
      "        /*0100*/                   STG.E [R4.64], R5 ;\n"
      "\t.section\t.text.fused_y,\"ax\",@progbits\n"
      "        /*0000*/                   EXIT ;\n"
      "        /*0010*/                   BRA 0x10;\n"
      "        /*0020*/                   NOP;\n";
  const std::vector<compiler::SassFunction> f = compiler::parse_nvdisasm(text);
  REQUIRE(f.size() == 2);
  CHECK(f[0].name == "fused_x");
  CHECK(f[0].demangled == "fused_x");
  CHECK(f[0].arch == "sm_80");
  CHECK(f[0].opcodes == std::vector<std::string>{"IMAD.MOV.U32", "S2R", "EXIT", "LDG.E", "FMUL", "STG.E"});
  CHECK(f[1].name == "fused_y");
  CHECK(f[1].opcodes == std::vector<std::string>{"EXIT", "BRA", "NOP"});
  const compiler::SassMix mix = compiler::instruction_mix(f[0]);
  CHECK(mix[SassClass::kGlobalLoad] == 1);
  CHECK(mix[SassClass::kGlobalStore] == 1);
  CHECK(mix[SassClass::kFp32] == 1);
  CHECK(mix.total == 6);
}

TEST_CASE("nvdisasm -c: no section is no function - an empty one or one before .target is an Error") {
  CHECK(compiler::parse_nvdisasm("").empty());
  CHECK(compiler::parse_nvdisasm("\t.target\tsm_90\n\t.section\t.nv.info,\"\",@\"SHT_CUDA_INFO\"\n").empty());
  CHECK_THROWS_WITH_AS(compiler::parse_nvdisasm("\t.target\tsm_90\n\t.section\t.text.f,\"ax\",@progbits\n"),
                       doctest::Contains("function f has no instruction"), Error);
  CHECK_THROWS_WITH_AS(compiler::parse_nvdisasm("\t.section\t.text.f,\"ax\",@progbits\n/*0000*/ EXIT ;\n"),
                       doctest::Contains("before any .target line"), Error);
}

}  // namespace strata
