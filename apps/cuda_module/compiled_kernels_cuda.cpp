// The compiled path's generated kernels on a GPU (Note [The compiled graph on a GPU] in
// layers/compiler/compiled_graph.cpp): the CUDA module's half, the only code that talks to the driver.
//
// Note [Generated kernels on the GPU]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// For each generated kernel of a graph compiled on CUDA tensors, compiled_kernel() returns what the
// kernel's dispatch runs:
//   - a GEMM-epilogue kernel whose fused ops are one of cuBLASLt's epilogues (choose_lt_epilogue, Note
//     [Which cuBLASLt epilogue]) and for which cuBLASLt's heuristic has a kernel at this shape: one
//     cublasLtMatmul with that epilogue (kernels::cuda::lt_matmul_epilogue), the kernel issue 34 asks for.
//     Its PTX is then not loaded: nothing would run it;
//   - any other GEMM-epilogue kernel: cuBLAS's GEMM alone (the ops' CUDA matmul, or gemm(x, W^T) for
//     linear, whose bias is the epilogue's), then the generated epilogue in place on its result, as the CPU
//     plan does after OpenBLAS;
//   - a pointwise kernel: the generated kernel over rows = 1, cols = numel.
// A generated kernel's PTX (NVRTC's, for the device's architecture or the newest strata knows below it) is
// loaded with cuModuleLoadDataEx: the driver JIT-compiles it to SASS for this GPU then, so its time is the
// load phase (the cold row) and its verbose info log is kept. CU_FUNC_ATTRIBUTE_BINARY_VERSION and
// _PTX_VERSION of the loaded function say what runs: SASS for the device's architecture, made from PTX of
// the named virtual architecture. The launch is cuLaunchKernel on strata's stream (CUstream and
// cudaStream_t are the same handle), 256 threads a block and at most 32 blocks per SM: the grid-stride
// loop covers the rest. It runs inside the timed call, whose op id the session pushed for CUPTI (external
// correlation), so CUPTI attributes the kernel to the call as it does every kernel of it. The driver's
// functions come through cudart's entry-point query, so the module needs no link to libcuda.
#include <cuda.h>
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "apps/cuda_module/device_session_cuda.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"
#include "lib/host_clock.h"
#include "lib/zone.h"

namespace strata::cuda_module {
namespace {

template <typename Fn>
Fn driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || fn == nullptr) {
    throw UnavailableError(std::string("--mode compiled on a GPU: the CUDA driver has no ") + name);
  }
  return reinterpret_cast<Fn>(fn);
}

struct Driver {
  decltype(&cuModuleLoadDataEx) load = driver_function<decltype(&cuModuleLoadDataEx)>("cuModuleLoadDataEx");
  decltype(&cuModuleGetFunction) get_function = driver_function<decltype(&cuModuleGetFunction)>("cuModuleGetFunction");
  decltype(&cuFuncGetAttribute) attribute = driver_function<decltype(&cuFuncGetAttribute)>("cuFuncGetAttribute");
  decltype(&cuLaunchKernel) launch = driver_function<decltype(&cuLaunchKernel)>("cuLaunchKernel");
  decltype(&cuModuleUnload) unload = driver_function<decltype(&cuModuleUnload)>("cuModuleUnload");
  decltype(&cuGetErrorString) error_string = driver_function<decltype(&cuGetErrorString)>("cuGetErrorString");

  static const Driver& get() {
    static const Driver kDriver;
    return kDriver;
  }
  std::string describe(CUresult r) const {
    const char* s = nullptr;
    return error_string(r, &s) == CUDA_SUCCESS && s != nullptr ? std::string(s) : "CUresult " + std::to_string(int(r));
  }
  void check(CUresult r, const std::string& call) const {
    if (r != CUDA_SUCCESS) throw Error(call + " failed: " + describe(r));
  }
};

// One generated kernel's PTX, loaded: the module lives as long as the compiled graph that launches it.
//
// Note [A zone's name outlives the zone]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A span keeps its zone's `const char*` (lib/timeline.h: zones never allocate), and the report reads it
// after the run, possibly after the compiled graph that holds this module is gone (a compiled function
// dropped inside a strata.profile() block). So a launch's zone name is interned (Note [Zone names made at
// run time] in lib/zone.h), never the buffer of a std::string made for the call or owned by the module.
// Passing "cuLaunchKernel" to a `const std::string&` parameter once left every pointwise launch's span
// pointing into a dead temporary, and `trace gelu_tanh --mode compiled --device cuda --json` failed on
// its bytes.
struct LoadedPtx {
  std::string kernel;       // the generated kernel's name, for a failed launch's message
  const char* launch_zone = "";  // the name of each launch's Library zone, interned
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  int max_blocks = 1;
  ~LoadedPtx() {
    if (module != nullptr) (void)Driver::get().unload(module);  // at exit the context may be gone: ignored
  }
};

std::shared_ptr<LoadedPtx> load_ptx(const StrataCompiledKernelRequest& r, compiler::DeviceKernelInfo& info,
                                    const std::string& launch_zone) {
  const Driver& d = Driver::get();
  runtime::cuda::set_current_device(r.device.index);
  std::string info_log(size_t(1) << 14, '\0'), error_log(size_t(1) << 14, '\0');
  CUjit_option options[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE};
  void* values[] = {info_log.data(), reinterpret_cast<void*>(uintptr_t(info_log.size())), error_log.data(),
                    reinterpret_cast<void*>(uintptr_t(error_log.size())), reinterpret_cast<void*>(uintptr_t(1))};
  auto loaded = std::make_shared<LoadedPtx>();
  loaded->kernel = r.kernel->name;
  loaded->launch_zone = intern_zone_name(launch_zone);
  const int64_t t0 = host_clock::now_ns();
  CUresult status = CUDA_SUCCESS;
  {
    STRATA_ZONE(zone, Layer::kRuntime, "cuModuleLoadDataEx (the driver's PTX -> SASS JIT)");
    status = d.load(&loaded->module, r.ptx.c_str(), 5, options, values);
  }
  info.jit_ns += double(host_clock::now_ns() - t0);
  info_log.resize(std::strlen(info_log.c_str()));
  error_log.resize(std::strlen(error_log.c_str()));
  const std::string& name = r.kernel->name;
  if (status != CUDA_SUCCESS) {
    throw compiler::KernelCompileError("the CUDA driver could not load the PTX of " + name + " (" + r.arch + "): " +
                                           d.describe(status) + (error_log.empty() ? "" : ":\n" + error_log),
                                       name + ".ptx");
  }
  info.ptx_loaded = true;
  info.jit_log = info_log;
  d.check(d.get_function(&loaded->function, loaded->module, name.c_str()), "cuModuleGetFunction(" + name + ")");
  d.check(d.attribute(&info.binary_version, CU_FUNC_ATTRIBUTE_BINARY_VERSION, loaded->function),
          "cuFuncGetAttribute(BINARY_VERSION)");
  d.check(d.attribute(&info.ptx_version, CU_FUNC_ATTRIBUTE_PTX_VERSION, loaded->function),
          "cuFuncGetAttribute(PTX_VERSION)");
  loaded->max_blocks = std::max(1, runtime::cuda::device_info(r.device.index).sm_count * 32);
  return loaded;
}

// The generated kernel over rows x cols of `out` (in0.., out, rows, cols: cuda_codegen.cpp's parameters).
void launch(const LoadedPtx& fn, const std::vector<Tensor>& inputs, Tensor& out, long long rows, long long cols) {
  const long long n = rows * cols;
  if (n == 0) return;  // a grid of no blocks is an error, and there is nothing to compute
  std::vector<void*> pointers;
  pointers.reserve(inputs.size() + 1);
  for (const Tensor& t : inputs) pointers.push_back(const_cast<void*>(t.data_ptr()));
  pointers.push_back(out.data_ptr());
  std::vector<void*> args;
  for (void*& p : pointers) args.push_back(&p);
  args.push_back(&rows);
  args.push_back(&cols);
  const unsigned blocks = unsigned(std::min<long long>((n + 255) / 256, fn.max_blocks));
  const cudaStream_t stream = runtime::cuda::stream(out.device().index);
  STRATA_ZONE(zone, Layer::kLibrary, fn.launch_zone);  // Note [A zone's name outlives the zone]
  const Driver& d = Driver::get();
  d.check(d.launch(fn.function, blocks, 1, 1, 256, 1, 1, 0, stream, args.data(), nullptr),
          "cuLaunchKernel(" + fn.kernel + ")");
}

cublasLtEpilogue_t lt_value(compiler::LtEpilogue e) {
  switch (e) {
    case compiler::LtEpilogue::kRelu: return CUBLASLT_EPILOGUE_RELU;
    case compiler::LtEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case compiler::LtEpilogue::kReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case compiler::LtEpilogue::kGelu: return CUBLASLT_EPILOGUE_GELU;
    case compiler::LtEpilogue::kGeluBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case compiler::LtEpilogue::kNone: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Where each GEMM operand is among the kernel's inputs (FusedKernel::inputs order).
struct GemmOperands {
  size_t a = 0, b = 0, bias = 0;
  bool has_bias = false, linear = false;
};
GemmOperands gemm_operands(const StrataCompiledKernelRequest& r, const compiler::EpilogueChoice& choice) {
  const compiler::Node& gemm = r.graph->nodes[choice.gemm];
  const std::vector<size_t>& in = r.kernel->inputs;
  auto position = [&](size_t arg) {
    const auto it = std::find(in.begin(), in.end(), *gemm.args[arg].value);
    if (it == in.end()) throw Error("compiled kernel " + r.kernel->name + ": a GEMM operand is not among its inputs");
    return size_t(it - in.begin());
  };
  GemmOperands o{position(0), position(1), 0, choice.has_bias, gemm.op == "linear"};
  if (o.has_bias) o.bias = position(2);
  return o;
}

// Tensors on the device standing in for the operands at load time: the heuristic needs their shapes, dtype
// and the bias's alignment (the caching allocator's), not their values.
Tensor placeholder(const compiler::Graph& g, const std::vector<size_t>& inputs, size_t index, Device device) {
  const compiler::ValueMeta& m = g.nodes[inputs[index]].meta;
  return Tensor::empty(m.shape, m.dtype, device);
}

compiler::DeviceKernel gemm_kernel(const StrataCompiledKernelRequest& r) {
  compiler::DeviceKernel dk;
  compiler::DeviceKernelInfo& info = dk.info;
  info.arch = r.arch;
  info.nvrtc_ns = r.nvrtc_ns;
  const compiler::EpilogueChoice choice = compiler::choose_lt_epilogue(*r.graph, *r.kernel);
  const GemmOperands ops = gemm_operands(r, choice);
  info.epilogue_why = choice.why;
  const std::string& name = r.kernel->name;
  if (choice.epilogue != compiler::LtEpilogue::kNone) {
    const std::vector<size_t>& in = r.kernel->inputs;
    const int64_t t0 = host_clock::now_ns();
    bool available = false;
    std::string refused;
    try {
      available = kernels::cuda::lt_epilogue_available(
          placeholder(*r.graph, in, ops.a, r.device), placeholder(*r.graph, in, ops.b, r.device), ops.linear,
          ops.has_bias ? placeholder(*r.graph, in, ops.bias, r.device) : Tensor(), int(lt_value(choice.epilogue)));
    } catch (const Error& e) {  // cuBLASLt refusing a combination is a fallback, said so, not a failed run
      refused = e.what();
    }
    info.jit_ns += double(host_clock::now_ns() - t0);
    if (available) {
      info.epilogue = compiler::lt_epilogue_name(choice.epilogue);
      info.path = "cublasLtMatmul + " + info.epilogue;
      dk.zone = name + " (" + info.path + ")";
      const compiler::ValueMeta out_meta = r.graph->nodes[r.kernel->output].meta;
      const int epilogue = int(lt_value(choice.epilogue));
      dk.run = [ops, out_meta, epilogue](const std::vector<Tensor>& inputs) {
        Tensor out = Tensor::empty(out_meta.shape, out_meta.dtype, inputs[ops.a].device());
        kernels::cuda::lt_matmul_epilogue(inputs[ops.a], inputs[ops.b], ops.linear,
                                          ops.has_bias ? inputs[ops.bias] : Tensor(), epilogue, out);
        return out;
      };
      return dk;
    }
    info.epilogue_why += refused.empty() ? "; but cuBLASLt's heuristic has no " +
                                               std::string(compiler::lt_epilogue_name(choice.epilogue)) +
                                               " kernel at this shape and dtype"
                                         : "; but cuBLASLt refused it: " + refused;
  }
  info.epilogue = "none";
  info.path = "cuBLAS GEMM + generated epilogue (PTX)";
  dk.zone = name + " (" + info.path + ")";
  std::shared_ptr<LoadedPtx> fn = load_ptx(r, info, name + "<<<>>> (generated epilogue)");
  dk.run = [ops, fn](const std::vector<Tensor>& inputs) {
    // The GEMM alone: linear's bias is the generated epilogue's, so linear is x @ W^T without it.
    Tensor out = ops.linear ? kernels::cuda::gemm(inputs[ops.a], inputs[ops.b], 0, 1)
                            : kernels::cuda::matmul(inputs[ops.a], inputs[ops.b]);
    launch(*fn, inputs, out, out.size(0), out.size(1));
    return out;
  };
  return dk;
}

}  // namespace

compiler::DeviceKernel compiled_kernel(const StrataCompiledKernelRequest& r) {
  if (r.graph == nullptr || r.kernel == nullptr) throw Error("compiled_kernel: no kernel given");
  if (r.kernel->kind == compiler::KernelKind::kGemmEpilogue) return gemm_kernel(r);
  compiler::DeviceKernel dk;
  dk.info.arch = r.arch;
  dk.info.nvrtc_ns = r.nvrtc_ns;
  dk.info.epilogue = "none";
  dk.info.epilogue_why = compiler::choose_lt_epilogue(*r.graph, *r.kernel).why;
  dk.info.path = "generated kernel (PTX)";
  dk.zone = r.kernel->name + "<<<>>> (generated, PTX)";
  std::shared_ptr<LoadedPtx> fn = load_ptx(r, dk.info, "cuLaunchKernel");
  const compiler::ValueMeta out_meta = r.graph->nodes[r.kernel->output].meta;
  // The dispatch's Library zone is named dk.zone already; the launch's own zone nests in it.
  dk.run = [fn, out_meta](const std::vector<Tensor>& inputs) {
    Tensor out = Tensor::empty(out_meta.shape, out_meta.dtype, inputs.at(0).device());
    launch(*fn, inputs, out, 1, out.numel());
    return out;
  };
  return dk;
}

}  // namespace strata::cuda_module
