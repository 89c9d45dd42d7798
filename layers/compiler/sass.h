// SASS, the GPU's own instructions, as cuobjdump lists them (docs/compiled.md, "SASS"): `cuobjdump -sass`
// read into functions and their opcodes, an instruction mix per function by class, and `cuobjdump
// --list-elf --list-ptx` read into the architectures a binary carries code for. Text in, figures out: no
// CUDA header and no GPU, so it is in strata_compiler and every build has it; the listings come from
// whatever machine has the toolkit.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::compiler {

// One kernel's machine code as cuobjdump -sass prints it.
struct SassFunction {
  std::string name;       // as mangled in the binary
  std::string demangled;  // abi::__cxa_demangle's, or `name` when it is not a C++ name
  std::string arch;       // "sm_90": the `arch =` of the fatbin section the function is in
  // Each instruction's opcode with its modifiers, in address order, its guard predicate removed:
  // "@P0 BRA 0x950" -> "BRA", "LDG.E.128 R4, desc[UR4][R2.64]" -> "LDG.E.128".
  std::vector<std::string> opcodes;
};

// Parses cuobjdump -sass output. Text with no function in it (empty, or another tool's output) gives an
// empty list; a listing cut off inside a function (no closing ".........." line), a function with no
// instruction, or a function before any architecture line throws strata::Error saying which.
std::vector<SassFunction> parse_sass(const std::string& text);

// What cuobjdump --list-elf --list-ptx says a binary embeds.
struct EmbeddedCode {
  std::vector<std::string> sass_archs;  // one per ELF (cubin) file, "sm_90", in listing order
  std::vector<std::string> ptx_archs;   // one per PTX file, its target "sm_90"; empty for "No PTX file found"
};
// Reads the "ELF file N: name.sm_XX.cubin" and "PTX file N: name.sm_XX.ptx" lines; other lines (notes,
// "No PTX file found ...") are ignored, so text with neither gives empty lists.
EmbeddedCode parse_cuobjdump_list(const std::string& text);

// The instruction classes of a mix. kNop is apart from kOther: the NOPs after a kernel's EXIT pad it to
// an alignment and never run, so counting them as work would swell every small kernel's "other".
enum class SassClass : int {
  kFp32,
  kFp64,
  kHalf,
  kTensor,
  kGlobalLoad,
  kGlobalStore,
  kShared,
  kConstant,
  kBranch,
  kConversion,
  kSpecial,
  kInteger,
  kNop,
  kOther,
};
inline constexpr int kSassClassCount = static_cast<int>(SassClass::kOther) + 1;

// "fp32", "fp64", "half", "tensor", "ld.global", "st.global", "shared", "const", "branch", "convert",
// "mufu", "int", "nop", "other".
const char* sass_class_name(SassClass c);
// The class of an opcode (with or without modifiers: "LDG.E.128" is kGlobalLoad).
SassClass classify_opcode(std::string_view opcode);

struct SassMix {
  std::array<int64_t, kSassClassCount> counts{};
  int64_t total = 0;  // every instruction, NOPs included
  int64_t operator[](SassClass c) const { return counts[static_cast<size_t>(c)]; }
};
SassMix instruction_mix(const SassFunction& function);

// abi::__cxa_demangle's answer, or `mangled` as it is when it does not demangle.
std::string demangle(const std::string& mangled);

// Parses `nvdisasm -c` output of one cubin (Note [Reading nvdisasm -c]): a function per ".text.<name>"
// section, its architecture the ".target sm_XX" line, opcodes as parse_sass gives them. A section with no
// instruction, or one before any ".target" line, throws strata::Error; text with no section gives nothing.
std::vector<SassFunction> parse_nvdisasm(const std::string& text);

// Where one of the toolkit's tools is (Note [Finding the disassemblers]): `tool` is "cuobjdump" or
// "nvdisasm"; $CUOBJDUMP / $NVDISASM when set (taken as given: a wrong path is reported, not passed over),
// else PATH, else the CUDA toolkit's bin, else nvidia/cu13/bin in the site-packages of $VIRTUAL_ENV and of
// the project's virtual environment (scripts/install-python-deps). "" with `why` when there is none.
std::string find_cuda_tool(const std::string& tool, std::string& why);
// How to get the disassemblers, for the messages that say one is missing.
extern const char* const kDisassemblerHowTo;

// Runs `args` (argv[0] a path) without a shell and returns its stdout and stderr together. Throws
// UnavailableError when it cannot be started, Error with its output when it fails.
std::string run_tool(std::vector<std::string> args);

// One cubin's SASS: which tool listed it, the listing, its functions.
struct Disassembly {
  std::string tool;  // the executable that ran
  std::string listing;
  std::vector<SassFunction> functions;
};
// cuobjdump -sass on `cubin_path` where there is a cuobjdump, else nvdisasm -c (each read by its parser);
// a $CUOBJDUMP that names nothing is UnavailableError, unless $NVDISASM is set too (then that one is tried).
// Throws UnavailableError (exit 4) naming both, where each was looked for and how to get them, when
// neither is found.
Disassembly disassemble_cubin(const std::string& cubin_path);

}  // namespace strata::compiler
