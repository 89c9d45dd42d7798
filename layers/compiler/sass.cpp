// cuobjdump's listings read into figures: the functions of `-sass` and their opcodes, the instruction mix,
// and the architectures of `--list-elf --list-ptx`.
#include "layers/compiler/sass.h"

#include <cxxabi.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "lib/error.h"

namespace strata::compiler {
namespace {

// Note [Reading cuobjdump -sass]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// cuobjdump 13.0 prints, per fatbin ELF section, a header ("arch = sm_90", "code version", "host",
// "compile_size", "code for sm_90"), then per function a "Function : <mangled>" line, a ".headerflags"
// line, two lines per instruction ("/*0010*/  S2R R6, SR_TID.X ;  /* 0x...  */" and a second line holding
// only the rest of the 128-bit encoding, "/* 0x... */"), and a closing "..........". Only the first kind of
// line starts "/*<hex>*/", so that is what marks an instruction; everything else outside a function is
// header and is skipped, which is what lets a trimmed listing (tests/compiler/data/sass) parse as well.
// The closing line is the one sign that a function's listing is whole: without it the text was cut off,
// and a count from it would be too small without saying so, hence the Error.

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// True, with the text after "/*<hex>*/" in *out, when `line` is an instruction's line.
bool instruction_text(std::string_view line, std::string_view* out) {
  if (!starts_with(line, "/*") || line.size() < 3 ||
      std::isxdigit(static_cast<unsigned char>(line[2])) == 0) {
    return false;
  }
  const size_t close = line.find("*/");
  if (close == std::string_view::npos) return false;
  for (size_t i = 2; i < close; ++i) {
    if (std::isxdigit(static_cast<unsigned char>(line[i])) == 0) return false;
  }
  *out = line.substr(close + 2);
  return true;
}

// "sm_90" from a file name such as "libstrata_cuda.1.sm_90.cubin"; "" when it names none.
std::string arch_in_name(std::string_view name) {
  const size_t at = name.rfind("sm_");
  if (at == std::string_view::npos) return "";
  size_t end = at + 3;
  while (end < name.size() && std::isalnum(static_cast<unsigned char>(name[end])) != 0) ++end;
  return end > at + 3 ? std::string(name.substr(at, end - at)) : "";
}

[[noreturn]] void malformed(const std::string& what) {
  throw Error("cuobjdump -sass listing: " + what + " (is the listing whole?)");
}

}  // namespace

std::string demangle(const std::string& mangled) {
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && out != nullptr ? std::string(out.get()) : mangled;
}

std::vector<SassFunction> parse_sass(const std::string& text) {
  std::vector<SassFunction> functions;
  std::string arch;
  bool open = false;  // inside a function, before its closing line (Note [Reading cuobjdump -sass])
  std::istringstream in(text);
  for (std::string raw; std::getline(in, raw);) {
    const std::string_view line = trim(raw);
    if (starts_with(line, "arch = ")) {
      arch = std::string(trim(line.substr(7)));
    } else if (starts_with(line, "code for ") && arch.empty()) {
      // A lone cubin has no fatbin header; its "code for sm_XX" is the only architecture line.
      arch = std::string(trim(line.substr(9)));
    } else if (starts_with(line, "Function : ")) {
      if (open) malformed("function " + functions.back().name + " has no closing line before the next one");
      SassFunction f;
      f.name = std::string(trim(line.substr(11)));
      if (f.name.empty()) malformed("a \"Function :\" line without a name");
      if (arch.empty()) malformed("function " + f.name + " comes before any \"arch =\" line");
      f.demangled = demangle(f.name);
      f.arch = arch;
      functions.push_back(std::move(f));
      open = true;
    } else if (starts_with(line, "..........")) {
      if (!open) continue;
      if (functions.back().opcodes.empty())
        malformed("function " + functions.back().name + " has no instruction");
      open = false;
    } else if (std::string_view rest; open && instruction_text(line, &rest)) {
      const size_t semicolon = rest.find(';');
      if (semicolon == std::string_view::npos) {
        malformed("an instruction of " + functions.back().name + " has no ';': " + std::string(line));
      }
      std::string_view ins = trim(rest.substr(0, semicolon));
      if (starts_with(ins, "@")) {  // the guard predicate ("@P0", "@!UP1") says when, not what
        const size_t space = ins.find_first_of(" \t");
        ins = space == std::string_view::npos ? std::string_view() : trim(ins.substr(space));
      }
      const std::string_view opcode = ins.substr(0, ins.find_first_of(" \t"));
      if (opcode.empty())
        malformed("an empty instruction in " + functions.back().name + ": " + std::string(line));
      functions.back().opcodes.emplace_back(opcode);
    }
  }
  if (open) malformed("it ends inside function " + functions.back().name);
  return functions;
}

EmbeddedCode parse_cuobjdump_list(const std::string& text) {
  EmbeddedCode code;
  std::istringstream in(text);
  for (std::string raw; std::getline(in, raw);) {
    const std::string_view line = trim(raw);
    const bool elf = starts_with(line, "ELF file");
    if (!elf && !starts_with(line, "PTX file")) continue;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string arch = arch_in_name(trim(line.substr(colon + 1)));
    if (arch.empty()) continue;
    (elf ? code.sass_archs : code.ptx_archs).push_back(arch);
  }
  return code;
}

const char* sass_class_name(SassClass c) {
  switch (c) {
    case SassClass::kFp32:
      return "fp32";
    case SassClass::kFp64:
      return "fp64";
    case SassClass::kHalf:
      return "half";
    case SassClass::kTensor:
      return "tensor";
    case SassClass::kGlobalLoad:
      return "ld.global";
    case SassClass::kGlobalStore:
      return "st.global";
    case SassClass::kShared:
      return "shared";
    case SassClass::kConstant:
      return "const";
    case SassClass::kBranch:
      return "branch";
    case SassClass::kConversion:
      return "convert";
    case SassClass::kSpecial:
      return "mufu";
    case SassClass::kInteger:
      return "int";
    case SassClass::kNop:
      return "nop";
    case SassClass::kOther:
      return "other";
  }
  return "other";
}

SassClass classify_opcode(std::string_view opcode) {
  // Keyed by the mnemonic before the first '.', matched whole rather than by prefix, because prefixes
  // cross classes: LD is a generic load, LDG a global one, LDS a shared one, LDC a constant. HFMA2.MMA
  // with -RZ, RZ operands is the compiler's way of moving a constant into a register; it is counted as
  // half all the same, as cuobjdump names it.
  // The U-prefixed opcodes are the uniform datapath's integer ops (one per warp, for addresses and loop
  // counters), hence integer.
  static const std::unordered_map<std::string_view, SassClass> kTable = {
      {"FFMA", SassClass::kFp32},      {"FMUL", SassClass::kFp32},       {"FADD", SassClass::kFp32},
      {"FMNMX", SassClass::kFp32},     {"FSETP", SassClass::kFp32},      {"FSET", SassClass::kFp32},
      {"FSEL", SassClass::kFp32},      {"FRND", SassClass::kFp32},       {"FCHK", SassClass::kFp32},
      {"FSWZADD", SassClass::kFp32},   {"DFMA", SassClass::kFp64},       {"DMUL", SassClass::kFp64},
      {"DADD", SassClass::kFp64},      {"DSETP", SassClass::kFp64},      {"DMNMX", SassClass::kFp64},
      {"HFMA2", SassClass::kHalf},     {"HMUL2", SassClass::kHalf},      {"HADD2", SassClass::kHalf},
      {"HMNMX2", SassClass::kHalf},    {"HSETP2", SassClass::kHalf},     {"HSET2", SassClass::kHalf},
      {"HMMA", SassClass::kTensor},    {"HGMMA", SassClass::kTensor},    {"IMMA", SassClass::kTensor},
      {"DMMA", SassClass::kTensor},    {"IGMMA", SassClass::kTensor},    {"QGMMA", SassClass::kTensor},
      {"BGMMA", SassClass::kTensor},   {"LDG", SassClass::kGlobalLoad},  {"STG", SassClass::kGlobalStore},
      {"LDS", SassClass::kShared},     {"STS", SassClass::kShared},      {"LDSM", SassClass::kShared},
      {"ATOMS", SassClass::kShared},   {"LDC", SassClass::kConstant},    {"ULDC", SassClass::kConstant},
      {"BRA", SassClass::kBranch},     {"BRX", SassClass::kBranch},      {"JMP", SassClass::kBranch},
      {"JMX", SassClass::kBranch},     {"CALL", SassClass::kBranch},     {"RET", SassClass::kBranch},
      {"EXIT", SassClass::kBranch},    {"BSSY", SassClass::kBranch},     {"BSYNC", SassClass::kBranch},
      {"BREAK", SassClass::kBranch},   {"F2F", SassClass::kConversion},  {"F2I", SassClass::kConversion},
      {"I2F", SassClass::kConversion}, {"F2FP", SassClass::kConversion}, {"I2FP", SassClass::kConversion},
      {"I2I", SassClass::kConversion}, {"MUFU", SassClass::kSpecial},    {"IMAD", SassClass::kInteger},
      {"IADD3", SassClass::kInteger},  {"LOP3", SassClass::kInteger},    {"SHF", SassClass::kInteger},
      {"ISETP", SassClass::kInteger},  {"IMNMX", SassClass::kInteger},   {"IABS", SassClass::kInteger},
      {"LEA", SassClass::kInteger},    {"SEL", SassClass::kInteger},     {"VIADD", SassClass::kInteger},
      {"PRMT", SassClass::kInteger},   {"POPC", SassClass::kInteger},    {"FLO", SassClass::kInteger},
      {"BREV", SassClass::kInteger},   {"IMUL", SassClass::kInteger},    {"UIADD3", SassClass::kInteger},
      {"UIMAD", SassClass::kInteger},  {"ULEA", SassClass::kInteger},    {"UISETP", SassClass::kInteger},
      {"ULOP3", SassClass::kInteger},  {"USHF", SassClass::kInteger},    {"USEL", SassClass::kInteger},
      {"NOP", SassClass::kNop},
  };
  const auto it = kTable.find(opcode.substr(0, opcode.find('.')));
  return it == kTable.end() ? SassClass::kOther : it->second;
}

SassMix instruction_mix(const SassFunction& function) {
  SassMix mix;
  for (const std::string& op : function.opcodes) {
    ++mix.counts[static_cast<size_t>(classify_opcode(op))];
    ++mix.total;
  }
  return mix;
}

}  // namespace strata::compiler
