// ptxas as a check on generated PTX and a report of what each kernel costs the GPU's resources.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "layers/compiler/compiler_cuda.h"
#include "layers/compiler/internal.h"

extern char** environ;

namespace strata::compiler::cuda {
namespace {

// Note [Reading ptxas -v]
// ~~~~~~~~~~~~~~~~~~~~~~~
// ptxas -v writes, per entry function, "Compiling entry function 'f' for 'sm_90'", then a properties
// line "N bytes stack frame, N bytes spill stores, N bytes spill loads" and a usage line "Used N
// registers, used N barriers, N bytes smem, N bytes cmem[0]". The usage line's items vary with the
// version and the kernel (no smem item without shared memory, no barriers item before CUDA 12), so each
// item is matched on its own, never the line as a whole (tests/compiler/data/ptxas: real outputs).
int64_t item(const std::string& line, const std::regex& re) {
  std::smatch m;
  return std::regex_search(line, m, re) ? std::stoll(m[1].str()) : 0;
}

std::string find_ptxas() {
  if (const char* env = std::getenv("STRATA_PTXAS"); env != nullptr && *env != '\0') return env;
#ifdef STRATA_TOOLKIT_PTXAS
  if (::access(STRATA_TOOLKIT_PTXAS, X_OK) == 0) return STRATA_TOOLKIT_PTXAS;
#endif
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      const std::string candidate = (dir.empty() ? "." : dir) + "/ptxas";
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "";
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

std::vector<PtxasResources> parse_ptxas_verbose(const std::string& text) {
  static const std::regex kEntry(R"(Compiling entry function '([^']+)' for '([^']+)')");
  static const std::regex kStack(R"((\d+) bytes stack frame)"), kStores(R"((\d+) bytes spill stores)"),
      kLoads(R"((\d+) bytes spill loads)"), kRegs(R"(Used (\d+) registers)"),
      kBarriers(R"(used (\d+) barriers)"), kSmem(R"((\d+) bytes smem)");
  std::vector<PtxasResources> out;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kEntry)) {
      out.push_back({m[1].str(), m[2].str()});
      continue;
    }
    if (out.empty()) continue;  // "0 bytes gmem" and the like, before any function
    PtxasResources& f = out.back();
    if (line.find("stack frame") != std::string::npos) {
      f.stack_frame_bytes = item(line, kStack);
      f.spill_store_bytes = item(line, kStores);
      f.spill_load_bytes = item(line, kLoads);
    } else if (std::regex_search(line, kRegs)) {
      f.registers = int(item(line, kRegs));
      f.barriers = int(item(line, kBarriers));
      f.shared_bytes = item(line, kSmem);
    }
  }
  return out;
}

PtxasReport run_ptxas(const std::string& ptx, const std::string& arch, bool keep_cubin) {
  check_arch(arch);
  PtxasReport report;
  report.ptxas = find_ptxas();
  if (report.ptxas.empty()) {
    report.why_not = "no ptxas (not in the CUDA toolkit this build found, not on PATH, STRATA_PTXAS unset)";
    return report;
  }
  static std::atomic<uint64_t> counter{0};
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("strata-ptxas-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                               .string();
  const std::string in = base + ".ptx", log = base + ".log", cubin = base + ".cubin";
  std::ofstream(in, std::ios::binary) << ptx;
  const int rc = detail::run_logged({report.ptxas, "-v", "-arch=" + arch, in, "-o", keep_cubin ? cubin : "/dev/null"}, log);
  const std::string output = read_all(log);
  std::filesystem::remove(log);
  if (keep_cubin) {
    if (rc == 0) report.cubin = read_all(cubin);
    std::filesystem::remove(cubin);
  }
  if (rc == detail::kCouldNotStart) {
    std::filesystem::remove(in);
    report.why_not = "ptxas (" + report.ptxas + ") could not be started";
    return report;
  }
  // A rejected PTX is kept, named in the error, for a look at what ptxas refused.
  if (rc != 0) {
    throw KernelCompileError("ptxas rejected the PTX for " + arch + " (exit " + std::to_string(rc) +
                                 ", kept in " + in + "):\n" + output,
                             in);
  }
  std::filesystem::remove(in);
  report.ran = true;
  report.functions = parse_ptxas_verbose(output);
  return report;
}

}  // namespace strata::compiler::cuda
