// The compiled path's fused kernels as CUDA (docs/compiled.md, "PTX"): the plan's generated kernels
// written as CUDA C from the same lowering rows as the C++ ones, compiled by NVRTC to PTX for a named
// architecture, and checked by the toolkit's ptxas, whose resource report (registers, shared memory,
// spills, stack) is parsed into figures. None of it needs a GPU or a driver: only the toolkit.
//
// Built only where the CUDA toolkit is (STRATA_WITH_CUDA), as strata_compiler_cuda; libnvrtc is some
// 100 MB, so nothing a CPU run maps links it (Note [The CUDA module] in measure/devices/cuda_module.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/compiler/compiler.h"

namespace strata::compiler::cuda {

// The architectures --arch accepts: those CUDA 13 compiles for that users have (arch.cpp, in
// strata_compiler: every build validates --arch).
const std::vector<std::string>& known_archs();
// Throws UsageError naming `arch` and the allowed values when it is not one of known_archs().
void check_arch(const std::string& arch);

// One fused kernel as CUDA C: a __global__ function named `name`, one thread per element in a
// grid-stride loop over rows * cols elements, its parameters the kernel's inputs in0.. (FusedKernel::inputs,
// in order), then out, rows, cols. A GEMM-epilogue kernel reads the GEMM's result from out (cuBLAS wrote
// it there) and writes the epilogue's result in place, as the C++ kernel does.
struct CudaKernel {
  std::string name;  // the entry point, "fused_matmul_relu"
  DType dtype = DType::kF32;
  std::string source;
};
CudaKernel generate_cuda(const Graph& graph, const FusedKernel& kernel, DType dtype);
// Every generated (non-extern) kernel of a compiled graph, in plan order, in the dtype it was built for.
std::vector<CudaKernel> generate_cuda(const CompiledGraph& graph);

// NVRTC's output for one kernel and architecture ("sm_90": PTX for compute_90).
struct Ptx {
  std::string arch;
  std::string ptx;
  std::string log;  // NVRTC's compile log (warnings); "" when it had nothing to say
  // Through the PTX cache (cached_ptx, Note [The PTX cache] in nvrtc.cpp); empty / false from compile_ptx.
  std::string key;         // 16 hex digits: source, arch, NVRTC's version and options
  std::string path;        // <cache>/<key>.ptx
  bool cache_hit = false;  // read from the cache: NVRTC did not run
  std::string refused;     // why a file under the key was not used (corrupt, truncated), "" otherwise
  std::string cache_dir;
  std::string cache_note;  // "" or why the cache is a private temporary directory
  double compile_ns = 0;   // NVRTC's wall time (0 on a hit)
  double read_ns = 0;      // reading and checking the cached file (a hit, or a refused file)
};
// Throws KernelCompileError with NVRTC's log and the kernel's name when NVRTC refuses the source, and
// UsageError for an unknown architecture. Uncached.
Ptx compile_ptx(const CudaKernel& kernel, const std::string& arch);
// compile_ptx through the on-disk cache `cache_dir` ("" = the CPU kernels' cache: $STRATA_CACHE_DIR, else
// ~/.cache/strata/kernels): a valid <key>.ptx there is read instead of running NVRTC.
Ptx cached_ptx(const CudaKernel& kernel, const std::string& arch, const std::string& cache_dir = "");
// The key cached_ptx files `kernel` under for `arch`.
std::string ptx_cache_key(const CudaKernel& kernel, const std::string& arch);

// What `ptxas -v` reports for one entry function.
struct PtxasResources {
  std::string function;
  std::string arch;  // "sm_90"
  int registers = 0;
  int64_t shared_bytes = 0;  // static shared memory (smem)
  int64_t stack_frame_bytes = 0;
  int64_t spill_store_bytes = 0;
  int64_t spill_load_bytes = 0;
  int barriers = 0;
  // "fused_add_relu sm_90: 10 registers, 0 B smem, 0 B stack frame, 0 B spill stores, 0 B spill loads"
  std::string str() const;
};
// Parses ptxas's verbose output (its stderr) into one entry per function it compiled, in order. Lines it
// does not know are ignored; a function with no "Used N registers" line has registers 0.
std::vector<PtxasResources> parse_ptxas_verbose(const std::string& text);

struct PtxasReport {
  bool ran = false;
  std::string why_not;  // when !ran: there is no ptxas (not a failure: PTX alone is still the answer)
  std::string ptxas;    // the executable that ran
  std::vector<PtxasResources> functions;
  std::string cubin;  // with keep_cubin: the assembled ELF (what --emit sass disassembles), else ""
};
// Assembles `ptx` for `arch` with ptxas -v (the cubin kept in the report with `keep_cubin`, else
// discarded) and parses its report. ptxas is
// $STRATA_PTXAS when set, else the toolkit's this build found, else `ptxas` on PATH. Throws
// KernelCompileError with ptxas's output when ptxas rejects the PTX.
PtxasReport run_ptxas(const std::string& ptx, const std::string& arch, bool keep_cubin = false);

// One generated kernel all the way down: its CUDA C, NVRTC's PTX, ptxas's report.
struct PtxKernel {
  CudaKernel kernel;
  Ptx ptx;
  PtxasReport ptxas;
};
// Every generated kernel of `graph` (generate_cuda) through cached_ptx (the default cache) and run_ptxas
// for `arch`, the cubins kept with `keep_cubin` (--emit sass).
std::vector<PtxKernel> emit_ptx(const CompiledGraph& graph, const std::string& arch, bool keep_cubin = false);

}  // namespace strata::compiler::cuda
