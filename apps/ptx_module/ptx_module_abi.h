// Note [The PTX module]
// ~~~~~~~~~~~~~~~~~~~~~
// `--emit ptx` writes the compiled graph's kernels as CUDA C and compiles them with NVRTC, whose library
// alone maps some 100 MB. Like the CUDA layers (Note [The CUDA module] in measure/devices/cuda_module.h),
// it is not a NEEDED library of the strata executable: layers/compiler's CUDA half (strata_compiler_cuda,
// which links libnvrtc) is libstrata_ptx.so, dlopened by the program's loader (apps/strata/ptx_module.cpp)
// only when --emit ptx, or --mode compiled on a GPU (its generated kernels' PTX), asks for it.
// Not part of libstrata_cuda.so: that module is loaded only where the driver is (Note [No driver, no
// module]), and PTX is for any machine with the toolkit, GPU or not. Its references to strata's own code
// (the compiled graph, lib) resolve against the executable, as the CUDA module's do. It needs no driver;
// it asks for the GPU's architecture through libcuda.so.1 only if the loader finds one.
// The table below is declared here, beside the module that fills it (ptx_module_entry.cpp), and the
// program's loader includes it: the arrow runs from the program to the module's interface, as for the
// Python module (apps/python/python_module_abi.h).
#pragma once

#include <string>
#include <vector>

#include "layers/compiler/compiler_cuda.h"

inline constexpr int kStrataPtxModuleVersion = 5;

struct StrataPtxModule {
  int version = kStrataPtxModuleVersion;
  // compiler::cuda::emit_ptx: every generated kernel as CUDA C, PTX and ptxas's report, for one arch; with
  // keep_cubin (--emit sass) each report holds ptxas's cubin.
  std::vector<strata::compiler::cuda::PtxKernel> (*emit_ptx)(const strata::compiler::CompiledGraph& graph,
                                                             const std::string& arch, bool keep_cubin);
  // The architecture of CUDA device `device` ("sm_90"; the ordinal --device cuda:N names), or "" with `why`
  // set (no driver, no such device).
  std::string (*gpu_arch)(int device, std::string& why);
  // One generated kernel as CUDA C (compiler::cuda::generate_cuda) through the PTX cache and NVRTC
  // (compiler::cuda::cached_ptx, the default cache directory) for `arch`: what
  // --mode compiled on a GPU loads (Note [The compiled graph on a GPU] in layers/compiler/compiled_graph.cpp).
  strata::compiler::cuda::Ptx (*kernel_ptx)(const strata::compiler::Graph& graph,
                                            const strata::compiler::FusedKernel& kernel, strata::DType dtype,
                                            const std::string& arch);
};

// The module's one exported name (ptx_module_entry.cpp).
extern "C" const StrataPtxModule* strata_ptx_module_v1();
