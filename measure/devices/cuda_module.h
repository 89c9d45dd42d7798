// Note [The CUDA module]
// ~~~~~~~~~~~~~~~~~~~~~~
// cudart, cuBLAS, cuBLASLt, cuDNN and CUPTI together map some 200 MB and take a noticeable fraction of a
// second to load. A CPU run needs none of them, and a process with a small address-space limit could not
// even start with them as NEEDED libraries (the loader fails before main with "failed to map segment").
// So a build with the CUDA layers puts them, and everything that calls them, into one shared module,
// libstrata_cuda.so: layers/runtime/cuda, layers/kernels/cuda, layers/device/cupti, the CUDA half of the
// kernel list (layers/ops/register_kernels_cuda.cpp) and the CUDA device session
// (apps/cuda_module/cuda_session.cpp). Neither the strata executable nor the Python extension links it:
// the measuring core's loader (measure/devices/cuda_module.cpp), which both link, dlopens it on the first
// CUDA use: device selection for --device auto or cuda, `strata devices`, a tensor on device='cuda'.
//
//  - One module, not one dlopen per library: strata's own nvcc-compiled kernels register with cudart when
//    their code is loaded, and the layers call each other directly.
//  - One copy of strata's state: the module carries none of lib, dispatch, binding, frontend, reports or
//    measure; those symbols stay undefined in it and resolve against the program that loaded it (the
//    executable, or the Python extension: Note [The extension and the CUDA module]), which exports its
//    symbols and contains every object of those libraries (strata_export_to_cuda_module in
//    cmake/StrataCuda.cmake). So there is one Dispatcher, one allocator registry, one active timeline.
//  - One entry point, strata_cuda_backend_v1(), returning the table below: the measuring core calls CUDA
//    code only through it. The types in it are C++ (the module is built with the same compiler, in the
//    same build, as the program that loads it); the version in the name and in the table guards against a
//    stale file.
//  - Loading registers the CUDA kernels with the dispatcher (the one kernel list, completed). `strata ops`
//    does not load the module: it lists the CUDA kernels from their declarations and says where they live.
//  - Where it is looked for: $STRATA_CUDA_MODULE if set (only there), else a copy already in the process
//    (test programs link it directly), else next to the executable (/proc/self/exe), else where this build
//    wrote it. Any failure (missing file, a library it needs that cannot be loaded or mapped, a stale
//    module) is one line naming dlerror(): --device cuda exits 4 with it, --device auto runs on the CPU and
//    prints it as the reason.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <string>

#include "layers/compiler/compiler.h"
#include "layers/dispatch/dispatch.h"
#include "measure/device_session.h"

inline constexpr int kStrataCudaBackendVersion = 6;  // 5: the compiled kernels' GPU info fields; 6: SessionOptions' --algo fields

// One generated kernel of a graph compiled for a GPU (Note [The compiled graph on a GPU] in
// layers/compiler/compiled_graph.cpp): the kernel, and its PTX from NVRTC (the PTX module) for `arch`.
struct StrataCompiledKernelRequest {
  const strata::compiler::Graph* graph = nullptr;
  const strata::compiler::FusedKernel* kernel = nullptr;
  strata::DType dtype = strata::DType::kF32;
  std::string ptx;   // NVRTC's PTX of the kernel's CUDA C (its entry is kernel->name)
  std::string arch;  // "sm_90"
  double nvrtc_ns = 0;
  strata::Device device;
};

struct StrataCudaBackend {
  int version = kStrataCudaBackendVersion;
  // Adds every operator's CUDA kernel to the dispatcher; the loader calls it once, right after loading.
  void (*register_kernels)(strata::Dispatcher& dispatcher);
  // What choose_device / available_bytes / open_device_session / list_devices (measure/device_session.h)
  // do for CUDA requests in a build with the CUDA layers.
  strata::measure::DeviceChoice (*choose_device)(const strata::frontend::DeviceRequest& request, bool device_timing);
  size_t (*available_bytes)(strata::Device device);
  std::unique_ptr<strata::measure::DeviceSession> (*open_session)(strata::Device device,
                                                              const strata::measure::SessionOptions& options);
  void (*list_devices)(std::ostream& out);
  // For the Python package (apps/python/cuda_device.cpp), which has no session: makes `device` ready for
  // tensors (its stream, the caching allocator), or throws UnavailableError with the reason alone (no
  // driver, no such device, a device strata cannot use), for the caller to put in its own words.
  void (*init_device_for_python)(strata::Device device);
  // --mode compiled on a GPU: the device kernel of one generated kernel (apps/cuda_module/
  // compiled_kernels_cuda.cpp): its cuBLASLt epilogue GEMM, or its PTX loaded by the driver and launched.
  strata::compiler::DeviceKernel (*compiled_kernel)(const StrataCompiledKernelRequest& request);
};

// The module's one exported name (cuda_module_entry.cpp).
extern "C" const StrataCudaBackend* strata_cuda_backend_v1();

namespace strata::measure {

// The CUDA backend, loading libstrata_cuda.so on the first call. nullptr when it cannot be loaded, with
// `why` set to one line ("the CUDA module libstrata_cuda.so could not be loaded: <dlerror>"). Later calls
// give the same answer without trying again.
const StrataCudaBackend* cuda_backend(std::string& why);

// The same, throwing UnavailableError with `why` when it cannot be loaded.
const StrataCudaBackend& require_cuda_backend();

// Whether the module has been loaded (and its kernels registered) in this process.
bool cuda_backend_loaded();

// Host nanoseconds the load took (dlopen of the module and the CUDA libraries it needs, plus the kernel
// registration); 0 while not loaded. Measured once: it is setup, before any traced call.
double cuda_backend_load_ns();

}  // namespace strata::measure
