// NVRTC: a generated CUDA kernel to PTX for one architecture, in process, without a GPU or a driver.
#include <nvrtc.h>

#include <memory>
#include <string>

#include "layers/compiler/compiler_cuda.h"

namespace strata::compiler::cuda {
namespace {

std::string nvrtc_log(nvrtcProgram prog) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // the terminating NUL
  return log;
}

void check(nvrtcResult r, const std::string& what, const std::string& source_name) {
  if (r != NVRTC_SUCCESS)
    throw Error("NVRTC: " + what + " for " + source_name + " failed: " + nvrtcGetErrorString(r));
}

}  // namespace

Ptx compile_ptx(const CudaKernel& kernel, const std::string& arch) {
  check_arch(arch);
  const std::string source_name = kernel.name + ".cu";
  nvrtcProgram prog = nullptr;
  check(nvrtcCreateProgram(&prog, kernel.source.c_str(), source_name.c_str(), 0, nullptr, nullptr),
        "creating the program", source_name);
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(
      &prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  // compute_XX, not sm_XX: a virtual architecture makes NVRTC stop at PTX (sm_XX would make a cubin, and
  // PTX only beside it); ptxas then assembles that PTX for sm_XX (run_ptxas).
  const std::string arch_flag = "--gpu-architecture=compute_" + arch.substr(3);
  const char* options[] = {arch_flag.c_str(), "--std=c++17"};
  const nvrtcResult compiled = nvrtcCompileProgram(prog, 2, options);
  Ptx out{arch, "", nvrtc_log(prog)};
  if (compiled != NVRTC_SUCCESS) {
    throw KernelCompileError("NVRTC could not compile " + source_name + " for " + arch + " (" +
                                 nvrtcGetErrorString(compiled) + "):\n" + out.log,
                             source_name);
  }
  size_t size = 0;
  check(nvrtcGetPTXSize(prog, &size), "getting the PTX size", source_name);
  out.ptx.assign(size, '\0');
  check(nvrtcGetPTX(prog, out.ptx.data()), "getting the PTX", source_name);
  if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  return out;
}

std::vector<PtxKernel> emit_ptx(const CompiledGraph& graph, const std::string& arch, bool keep_cubin) {
  check_arch(arch);
  std::vector<PtxKernel> out;
  for (CudaKernel& k : generate_cuda(graph)) {
    Ptx ptx = compile_ptx(k, arch);
    PtxasReport report = run_ptxas(ptx.ptx, arch, keep_cubin);
    out.push_back({std::move(k), std::move(ptx), std::move(report)});
  }
  return out;
}

}  // namespace strata::compiler::cuda
