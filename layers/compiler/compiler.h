// The compiled path on the CPU (docs/compiled.md): capture a function at the dispatcher into a graph,
// plan which ops fuse into one kernel, generate C++ for each fused kernel, compile it with the system's
// C++ compiler into a shared object kept in an on-disk cache, load it, and run the graph with one call
// per fused kernel. TorchDynamo + TorchInductor's C++ backend are the model, at strata's scale.
//
//   compiler::Captured c = compiler::capture(fn, inputs);        // runs fn once, for real
//   compiler::CompiledGraph g = compiler::compile(c, options);   // fusion, codegen, compile, load
//   std::vector<Tensor> out = g.run(inputs);                     // guards, then the fused kernels
//
// The public surface of layers/compiler; everything else in the folder is private.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/binding/binding.h"
#include "lib/error.h"
#include "lib/tensor.h"

namespace strata::compiler {

// ---- The graph (an FX graph's analogue) ---------------------------------------------------------------

// What a value is: its shape, dtype and device (what the guards compare, and what codegen is for).
struct ValueMeta {
  Shape shape;
  DType dtype = DType::kF32;
  Device device = kCPU;
  std::string str() const;  // "f32[1024x1024]" (", cuda:0" off the CPU)
  friend bool operator==(const ValueMeta&, const ValueMeta&) = default;
};

enum class NodeKind {
  kInput,     // the function's i-th input (FX's placeholder)
  kConstant,  // a tensor the function read that is neither an input nor made in the graph (a parameter)
  kCall,      // one operator call, as the dispatcher saw it
};

// One argument of a call in schema order: a tensor is a reference to the node that made it; anything
// else (alpha, stride, a dtype, an absent Tensor?) is kept boxed as it was passed.
struct Arg {
  std::optional<size_t> value;  // the node whose output this tensor is
  binding::IValue scalar;       // when not a tensor
};

struct Node {
  NodeKind kind = NodeKind::kCall;
  std::string op;  // the operator's name, for a call
  std::vector<Arg> args;
  ValueMeta meta;                // of the node's output
  Tensor constant;               // kConstant: the tensor itself, kept for every run
  size_t input_index = 0;        // kInput: which input
  std::vector<size_t> users;     // the call nodes that read this node's output, in graph order
};

struct Graph {
  std::vector<Node> nodes;     // in recording order, which is a topological order
  std::vector<size_t> inputs;  // node ids of the inputs, in the function's order
  // For each input, the first input that was the same tensor at capture (itself when none was): the graph
  // reads both through that one, so a run must pass the same tensor there too (a guard).
  std::vector<size_t> same_as;
  std::vector<size_t> outputs; // node ids of what the function returned
  size_t calls() const;        // the operator calls: what eager runs, one dispatch each
  // The FX-style listing:  %2 = matmul(%0, %1)  : f32[64x32]
  std::string str() const;
};

// The captured graph, what the function returned when it ran for real, and how long capture took.
struct Captured {
  Graph graph;
  std::vector<Tensor> eager_outputs;
  double capture_ns = 0;
};

using Function = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

// Runs fn(inputs) once with the Capture dispatch key on (Note [Capture is a dispatch key]): every
// operator call is executed as eagerly as ever and recorded. Throws UsageError when fn returns a tensor
// that no recorded call, input or constant explains.
Captured capture(const Function& fn, const std::vector<Tensor>& inputs);

// ---- Fusion ----------------------------------------------------------------------------------------------

enum class KernelKind {
  kPointwise,     // a chain (or tree) of pointwise ops: one loop, each input read once, one output written
  kGemmEpilogue,  // matmul / linear through OpenBLAS, the pointwise ops after it applied per row block
  kExtern,        // one op with no lowering (or nothing to fuse with): called through binding and dispatch
};
const char* kernel_kind_name(KernelKind kind);

struct FusedKernel {
  KernelKind kind = KernelKind::kExtern;
  std::string name;            // "fused_matmul_relu"; an extern kernel is its op's name
  std::vector<size_t> nodes;   // the graph's call nodes it computes, in graph order
  size_t output = 0;           // the one node whose value leaves the kernel (the last of `nodes`)
  std::vector<size_t> inputs;  // nodes it reads from outside, in first-use order
};

struct FusionPlan {
  std::vector<FusedKernel> kernels;  // in an order that runs (each after what it reads)
  std::string str(const Graph& graph) const;
};

// The fusion decisions (Note [What fuses] in fusion.cpp). Pure: reads only the graph. `cuda_kernels`:
// CUDA tensors' ops lower too (a compile with CompileOptions::device_kernel); otherwise they are extern.
FusionPlan plan_fusion(const Graph& graph, bool cuda_kernels = false);

// Why an extern kernel is one ("no lowering for to_copy", "bf16: generated kernels are f32/f64 on the
// CPU", "a GEMM with nothing to fuse after it"), for explain views; "" for a generated kernel.
std::string extern_reason(const Graph& graph, const FusedKernel& kernel);

// ---- GEMM epilogues on the GPU (gemm_epilogue.cpp, Note [Which cuBLASLt epilogue]) ----------------------

// cuBLASLt's epilogues that a GEMM-epilogue kernel can become, in strata's own words (this header includes
// no CUDA header: the CUDA module maps each onto its cublasLtEpilogue_t, lt_epilogue_name() names it).
enum class LtEpilogue { kNone, kRelu, kBias, kReluBias, kGelu, kGeluBias };
// "CUBLASLT_EPILOGUE_RELU_BIAS"; "none" for kNone.
const char* lt_epilogue_name(LtEpilogue epilogue);

struct EpilogueChoice {
  LtEpilogue epilogue = LtEpilogue::kNone;
  // Why this one, or why none: "linear's bias then relu: cuBLASLt's RELU_BIAS adds the bias, then relu".
  std::string why;
  size_t gemm = 0;          // the GEMM node
  bool has_bias = false;    // linear with a bias (the epilogue's bias vector, one per output column)
};
// Which cuBLASLt epilogue computes `kernel`'s fused ops after its GEMM exactly, or none and why. Pure:
// reads only the graph. A kernel that is not a GEMM epilogue is kNone with the reason.
EpilogueChoice choose_lt_epilogue(const Graph& graph, const FusedKernel& kernel);

// ---- Code generation, JIT, the kernel cache ----------------------------------------------------------------

// A generated kernel on a GPU: how it runs there and what the driver made of it (the CUDA module fills it).
struct DeviceKernelInfo {
  std::string path;        // "cublasLtMatmul + CUBLASLT_EPILOGUE_RELU", "cuBLAS GEMM + generated epilogue (PTX)"
  std::string epilogue;    // lt_epilogue_name() of the cuBLASLt epilogue that ran, "none" otherwise
  std::string epilogue_why;  // choose_lt_epilogue's reason, or why cuBLASLt's heuristic had no kernel
  std::string arch;        // the PTX's target ("sm_90")
  bool ptx_loaded = false; // the PTX went through the driver's JIT (cuModuleLoadDataEx)
  int binary_version = 0;  // CU_FUNC_ATTRIBUTE_BINARY_VERSION of the loaded function (90 = sm_90), 0 if none
  int ptx_version = 0;     // CU_FUNC_ATTRIBUTE_PTX_VERSION (its PTX's virtual architecture), 0 if none
  std::string jit_log;     // the driver JIT's info log (verbose), "" when it said nothing
  double nvrtc_ns = 0;     // NVRTC, CUDA C to PTX; on a PTX cache hit, reading the cached file instead
  bool ptx_cache_hit = false;  // the PTX came from the on-disk cache (Note [The PTX cache] in nvrtc.cpp)
  std::string ptx_path;        // <cache>/<key>.ptx
  std::string ptx_key;
  std::string ptx_refused;     // why a cached file under the key was recompiled over, "" otherwise
  std::string cache_dir, cache_note;
  double jit_ns = 0;       // cuModuleLoadDataEx: the driver's PTX -> SASS JIT, and the cuBLASLt plan
};

// The implementation of one generated kernel on a CUDA device: `run` takes the kernel's inputs
// (FusedKernel::inputs, on the device, in order) and returns its output there, its launches on strata's
// stream; `zone` names the Library zone it runs in.
struct DeviceKernel {
  std::function<Tensor(const std::vector<Tensor>& inputs)> run;
  std::string zone;
  DeviceKernelInfo info;
};

struct CompileOptions {
  // "" = $STRATA_CACHE_DIR, else ~/.cache/strata/kernels.
  std::string cache_dir;
  // "" = $CXX, else the first of c++, g++, clang++ on PATH. One executable (a name or a path).
  std::string cxx;
  // Seconds one kernel's compile may take before the compiler is killed and the compile fails
  // (KernelCompileError); 0 = $STRATA_COMPILE_TIMEOUT, else 300 (Note [Waiting for a child]).
  double compile_timeout_s = 0;
  // Rows of C per cblas_?gemm call in a GEMM-epilogue kernel, the epilogue running on each block while it
  // is in cache; 0 = one GEMM call over all rows, then one fused pass. bench/compiled_bench measures both
  // (docs/performance.md); 0 is the default because it measured faster here.
  int64_t gemm_row_block = 0;
  // Generated kernels for a CUDA device (Note [The compiled graph on a GPU] in compiled_graph.cpp): called
  // once per generated kernel, it returns the device's implementation (the CUDA module's: NVRTC's PTX
  // loaded by the driver, cuBLASLt for a GEMM). Set: CUDA tensors' ops fuse, and no C++ is compiled.
  std::function<DeviceKernel(const Graph& graph, const FusedKernel& kernel, DType dtype)> device_kernel;
};

// No C++ compiler on this machine (or CXX names none): the compiled path cannot run, eager and graph
// replay still can. An UnavailableError: the CLI's exit 4.
class CompilerUnavailableError : public UnavailableError {
 public:
  explicit CompilerUnavailableError(const std::string& what) : UnavailableError(what) {}
};

// Generated code the compiler refused. The message holds the compiler's output and where the generated
// source was kept; nothing of it is left in the cache.
class KernelCompileError : public Error {
 public:
  KernelCompileError(const std::string& what, std::string source_path)
      : Error(what), source_path_(std::move(source_path)) {}
  const std::string& source_path() const { return source_path_; }

 private:
  std::string source_path_;
};

// One kernel's build: what it cost cold, and where its code lives.
struct KernelBuild {
  std::string name;       // "fused_add_relu"
  DType dtype = DType::kF32;
  std::string key;        // the cache key: hash of source, dtype, compiler identity and flags
  bool cache_hit = false; // loaded from the cache without compiling
  // Why a file under the key was refused and compiled over (cut short, damaged, not a regular file: Note
  // [A sealed kernel object] in jit.cpp); "" otherwise.
  std::string cache_refused;
  double codegen_ns = 0;  // generating the source and its key
  double compile_ns = 0;  // the compiler's wall time (0 on a hit)
  double load_ns = 0;     // dlopen + dlsym + the ABI check
  std::string library_path;
  std::string source;     // the generated C++ (what --emit cpp prints)
  std::optional<DeviceKernelInfo> device;  // compiled for a GPU (CompileOptions::device_kernel)
};

// The cold phases of one compile, in strata's host clock (Note [One host clock]).
struct CompileTimings {
  double capture_ns = 0, fusion_ns = 0, codegen_ns = 0, compile_ns = 0, load_ns = 0;
  int cache_hits = 0, cache_misses = 0;
  std::string cache_dir;   // where the kernels are
  std::string cache_note;  // "" or why the cache is a private temporary directory
  std::string compiler;    // the compiler used, resolved
  double total_ns() const { return capture_ns + fusion_ns + codegen_ns + compile_ns + load_ns; }
};

// Compiles `source` (a complete translation unit exporting the kernel ABI, see codegen.cpp) through the
// cache, as compile() does for each generated kernel: the hook for tools and the tests, which need to
// hand the JIT a source of their own (one that does not compile, for instance).
KernelBuild jit_compile(const std::string& name, DType dtype, const std::string& source,
                        const CompileOptions& options = {});

// Told around each fused kernel's call in a run, with the kernel's index in plan().kernels: on a GPU the
// caller tags the device work each one issues, so that every device kernel it launches (its own, cuBLAS's)
// is attributed to the ops it computes (reports/model/compiled_attribution.h). end() runs on every way
// out, a throw included.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void begin(size_t kernel) = 0;
  virtual void end() = 0;
};

class CompiledGraph {
 public:
  // Checks the inputs against the guards (count, shape, dtype, device: what the graph was compiled for)
  // and runs every fused kernel, one dispatched call each (Note [One dispatch per fused kernel]).
  // A guard that fails is a UsageError naming the input, what it is and what was compiled.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, StepObserver* observer = nullptr) const;

  const Graph& graph() const;
  const FusionPlan& plan() const;
  const CompileTimings& timings() const;
  const std::vector<KernelBuild>& builds() const;  // one per generated kernel, in plan order
  std::string emit_cpp() const;                    // every generated kernel's source
  // Bytes one run moves through memory: each kernel's inputs read once and its output written once.
  double bytes_moved() const;

  struct Impl;
  explicit CompiledGraph(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const Impl> impl_;
};

// Fusion, codegen, compile and load for a captured graph (its capture time goes into the timings).
CompiledGraph compile(const Captured& captured, const CompileOptions& options = {});

// Calls `op` (the operator of call node `n`) through the binding layer as the recorded call made it:
// tensor arguments from `env` by node id, scalars as recorded, keyword-only arguments as keywords. The
// extern kernels of a compiled run and the eager replay of a compiled function's backward both call it.
Tensor call_recorded(const binding::BoundOperator& op, const Node& n, const std::vector<Tensor>& env);

// Bytes an eager run of the graph moves: every call reads its tensor arguments and writes its output,
// so every intermediate is written once and read back by each user.
double eager_bytes_moved(const Graph& graph);

}  // namespace strata::compiler
