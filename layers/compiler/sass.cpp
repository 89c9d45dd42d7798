// cuobjdump's listings read into figures: the functions of `-sass` and their opcodes, the instruction mix,
// and the architectures of `--list-elf --list-ptx`.
#include "layers/compiler/sass.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <glob.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "lib/error.h"

extern char** environ;

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

// The opcode with its modifiers out of an instruction's text after "/*<hex>*/", its guard predicate
// removed: "@P0 BRA 0x950 ;" -> "BRA". `function` and `line` name it in the error.
std::string opcode_of(std::string_view rest, const std::string& function, std::string_view line) {
  const size_t semicolon = rest.find(';');
  if (semicolon == std::string_view::npos) {
    throw Error("SASS listing: an instruction of " + function + " has no ';': " + std::string(line));
  }
  std::string_view ins = trim(rest.substr(0, semicolon));
  if (starts_with(ins, "@")) {  // the guard predicate ("@P0", "@!UP1") says when, not what
    const size_t space = ins.find_first_of(" \t");
    ins = space == std::string_view::npos ? std::string_view() : trim(ins.substr(space));
  }
  const std::string_view opcode = ins.substr(0, ins.find_first_of(" \t"));
  if (opcode.empty()) throw Error("SASS listing: an empty instruction in " + function + ": " + std::string(line));
  return std::string(opcode);
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
      functions.back().opcodes.push_back(opcode_of(rest, functions.back().name, line));
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

// Note [Reading nvdisasm -c]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// nvdisasm -c (code sections only) prints a cubin as assembler: ".target sm_90", then per kernel a
// ".section .text.<name>,..." line, directives and labels, and one line per instruction,
// "/*0010*/  S2R R0, SR_CTAID.X ;" (no encoding column). There is no closing line: a function's listing
// ends at the next section or at the end of the text. Instruction lines are read as cuobjdump's are
// (opcode_of), so one instruction mix serves both tools.
std::vector<SassFunction> parse_nvdisasm(const std::string& text) {
  std::vector<SassFunction> functions;
  std::string arch;
  bool open = false;
  auto close = [&] {
    if (open && functions.back().opcodes.empty())
      throw Error("nvdisasm listing: function " + functions.back().name + " has no instruction");
    open = false;
  };
  std::istringstream in(text);
  for (std::string raw; std::getline(in, raw);) {
    const std::string_view line = trim(raw);
    if (starts_with(line, ".target")) {
      arch = std::string(trim(line.substr(7)));
    } else if (starts_with(line, ".section") && line.size() > 8 &&
               std::isspace(static_cast<unsigned char>(line[8])) != 0) {  // not ".sectioninfo"
      close();
      std::string_view name = trim(line.substr(8));
      name = name.substr(0, name.find(','));
      if (!starts_with(name, ".text.")) continue;
      SassFunction f;
      f.name = std::string(name.substr(6));
      if (arch.empty()) throw Error("nvdisasm listing: function " + f.name + " comes before any .target line");
      f.demangled = demangle(f.name);
      f.arch = arch;
      functions.push_back(std::move(f));
      open = true;
    } else if (std::string_view rest; open && instruction_text(line, &rest)) {
      functions.back().opcodes.push_back(opcode_of(rest, functions.back().name, line));
    }
  }
  close();
  return functions;
}

// Note [Finding the disassemblers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// cuobjdump and nvdisasm are in the CUDA toolkit's bin, but a toolkit installed piecemeal (this project's
// development VM: nvcc, NVRTC, ptxas) may lack them; NVIDIA also ships them as wheels
// (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm: nvidia/cu13/bin in site-packages), which
// scripts/install-python-deps puts into the project's virtual environment. One lookup, for `strata sass`
// and `--emit sass`: the environment variable (as given), PATH, the toolkit's bin (the one this build
// found, else /usr/local/cuda/bin), $VIRTUAL_ENV's site-packages, then the project's environment where
// the script makes it ($STRATA_VENV, else $XDG_CACHE_HOME/strata/venv, else ~/.cache/strata/venv).
namespace {

#ifdef STRATA_CUDA_TOOLKIT_BIN
constexpr const char* kToolkitBin = STRATA_CUDA_TOOLKIT_BIN;
#else
constexpr const char* kToolkitBin = "/usr/local/cuda/bin";
#endif

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// nvidia/cu13/bin/<tool> under <venv>/lib/python3*/site-packages; "" when there is none.
std::string in_venv(const std::string& venv, const std::string& tool) {
  if (venv.empty()) return "";
  const std::string pattern = venv + "/lib/python3*/site-packages/nvidia/cu13/bin/" + tool;
  glob_t g{};
  std::string found;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc && found.empty(); ++i) {
      if (executable(g.gl_pathv[i])) found = g.gl_pathv[i];
    }
  }
  ::globfree(&g);
  return found;
}

std::string project_venv() {
  if (std::string v = env_or_empty("STRATA_VENV"); !v.empty()) return v;
  if (std::string x = env_or_empty("XDG_CACHE_HOME"); !x.empty()) return x + "/strata/venv";
  if (std::string h = env_or_empty("HOME"); !h.empty()) return h + "/.cache/strata/venv";
  return "";
}

}  // namespace

const char* const kDisassemblerHowTo =
    "cuobjdump and nvdisasm come with the CUDA toolkit (its bin), or from PyPI: scripts/install-python-deps "
    "installs nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm into the project's virtual environment (or `pip "
    "install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm` into $VIRTUAL_ENV); CUOBJDUMP / NVDISASM name one "
    "anywhere";

std::string find_cuda_tool(const std::string& tool, std::string& why) {
  std::string env_name = tool;
  for (char& c : env_name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (const std::string env = env_or_empty(env_name.c_str()); !env.empty()) {
    if (executable(env)) return env;
    why = env_name + " is " + env + ", which is not an executable file (" + std::strerror(errno) + ")";
    return "";
  }
  std::stringstream dirs(env_or_empty("PATH"));
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + tool;
    if (executable(candidate)) return candidate;
  }
  if (const std::string candidate = std::string(kToolkitBin) + "/" + tool; executable(candidate)) return candidate;
  const std::string virtual_env = env_or_empty("VIRTUAL_ENV"), project = project_venv();
  if (std::string found = in_venv(virtual_env, tool); !found.empty()) return found;
  if (std::string found = in_venv(project, tool); !found.empty()) return found;
  why = "no " + tool + ": not in " + env_name + ", on PATH, in " + kToolkitBin + " or in nvidia/cu13/bin of " +
        (virtual_env.empty() ? "" : virtual_env + " or ") + (project.empty() ? "the project's venv" : project);
  return "";
}

std::string run_tool(std::vector<std::string> args) {
  int fds[2];
  if (::pipe(fds) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw UnavailableError(args[0] + " could not be started: " + std::strerror(rc) + "; " + kDisassemblerHowTo);
  }
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string command;
    for (const std::string& a : args) command += (command.empty() ? "" : " ") + a;
    throw Error(command + " failed (" +
                (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                   : "signal " + std::to_string(WTERMSIG(status))) +
                "):\n" + out);
  }
  return out;
}

Disassembly disassemble_cubin(const std::string& cubin_path) {
  std::string why_cuobjdump, why_nvdisasm;
  Disassembly d;
  if (std::string cuobjdump = find_cuda_tool("cuobjdump", why_cuobjdump); !cuobjdump.empty()) {
    d.tool = cuobjdump;
    d.listing = run_tool({cuobjdump, "-sass", cubin_path});
    d.functions = parse_sass(d.listing);
    return d;
  }
  // $CUOBJDUMP naming nothing is a mistake to report, not a reason to use another tool.
  if (const char* env = std::getenv("CUOBJDUMP"); env != nullptr && *env != '\0' &&
                                                  std::getenv("NVDISASM") == nullptr) {
    throw UnavailableError("the SASS listing needs cuobjdump or nvdisasm: " + why_cuobjdump + "; " +
                           kDisassemblerHowTo);
  }
  if (std::string nvdisasm = find_cuda_tool("nvdisasm", why_nvdisasm); !nvdisasm.empty()) {
    d.tool = nvdisasm;
    d.listing = run_tool({nvdisasm, "-c", cubin_path});
    d.functions = parse_nvdisasm(d.listing);
    return d;
  }
  throw UnavailableError("the SASS listing needs cuobjdump or nvdisasm, and there is neither (" + why_cuobjdump +
                         "; " + why_nvdisasm + "); " + kDisassemblerHowTo);
}

}  // namespace strata::compiler
