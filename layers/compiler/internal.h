// Private to layers/compiler: what codegen, the JIT and the compiled graph share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "layers/compiler/compiler.h"

namespace strata::compiler::detail {

// Note [The kernel ABI]
// ~~~~~~~~~~~~~~~~~~~~~
// Every generated shared object exports three C symbols:
//   int strata_kernel_abi()            kKernelAbi, checked at load (a stale cache entry of another layout
//                                      is recompiled, never called)
//   const char strata_kernel_key[]     the cache key it was compiled under, checked at load
//   void strata_kernel(inputs, output, row_begin, row_end, cols)
// strata_kernel computes rows [row_begin, row_end) of a row-major [rows, cols] output: a pointwise kernel
// is called once with one row of numel columns; a GEMM epilogue once per row block of C, with `output`
// already holding the GEMM's result there. `inputs` are the kernel's inputs (FusedKernel::inputs), in order.
inline constexpr int kKernelAbi = 1;
using KernelEntry = void (*)(const void* const* inputs, void* output, int64_t row_begin, int64_t row_end,
                             int64_t cols);

// A call as the graph listing writes it: "add(%3, %2, alpha=-0.5)".
std::string call_text(const Node& node);

// The C++ source of one fused kernel for one dtype (f32 or f64), without the key line the JIT appends.
std::string generate_source(const Graph& graph, const FusedKernel& kernel, DType dtype);
// The local that holds one fused node's value ("v3"), and the expression of that node's value at element
// (r, c), i = r * cols + c, over in0.. (the kernel's inputs) and out (a GEMM's result): the lowering
// table's row, shared by the C++ and the CUDA generators so that both compute the same thing.
std::string var(size_t node);
// The comment a generated source opens with: the kernel, its dtype and kind, each fused call.
std::string source_header(const Graph& graph, const FusedKernel& kernel, DType dtype);
std::string element_expr(const Graph& graph, const FusedKernel& kernel, size_t node);
// The kernel's GEMM node (a GEMM-epilogue kernel has exactly one).
size_t gemm_node(const Graph& graph, const FusedKernel& kernel);

// Runs args[0] (a path) without a shell, its stdout and stderr into `log`; returns the exit status, or
// -signal, or kCouldNotStart with the reason in *spawn_error (errno). The C++ JIT and ptxas both run a
// compiler this way (the PTX module reaches it through the program, Note [The PTX module]).
// The child runs in a process group of its own and is killed past `timeout_s` seconds (then kTimedOut is
// returned; < 0: compile_timeout_from_env(), 0: no limit), or on a signal (then Error(kInterrupted) is
// thrown): Note [Waiting for a child] in lib/child_process.h.
inline constexpr int kCouldNotStart = -1000;
inline constexpr int kTimedOut = -1001;
int run_logged(std::vector<std::string> args, const std::string& log, int* spawn_error = nullptr,
               double timeout_s = -1);

struct Toolchain {
  std::string path;      // resolved executable
  std::string identity;  // what the cache key holds of it
  double timeout_s = 0;  // how long one compile may take (0: no limit)
};
// Throws CompilerUnavailableError when there is none (Note [Finding the compiler] in jit.cpp). The
// timeout is `timeout_s` when positive, else compile_timeout_from_env() (which may throw UsageError).
Toolchain resolve_compiler(const std::string& requested, double timeout_s = 0);

struct CacheDir {
  std::string path;
  std::string note;  // "" or why this is a private temporary directory
};
CacheDir resolve_cache_dir(const std::string& requested);

// The cache's pieces, shared by the C++ JIT and the PTX cache (Note [The kernel cache] in jit.cpp, Note
// [The PTX cache] in nvrtc.cpp). A 64-bit FNV-1a hash, and as 16 hex digits (a key).
uint64_t fnv1a(const std::string& text);
std::string hex16(uint64_t value);
// Throws Error naming the path when it cannot be written.
void write_file(const std::string& path, const std::string& text);
// The largest file the caches read (a kernel's object or PTX is KiBs to a few MiB).
inline constexpr uint64_t kMaxCacheFileBytes = uint64_t{64} << 20;
// The file's bytes, "" when it cannot be read or is not a regular file of at most kMaxCacheFileBytes.
std::string read_file(const std::string& path);
// A cache entry's bytes (Note [Reading a file strata did not write] in lib/input_file.h): nullopt with
// `refused` empty when there is none (a miss), nullopt with the reason when what is there is not a
// regular file of at most kMaxCacheFileBytes (a FIFO, a link to /dev/zero), which is then compiled over.
std::optional<std::string> read_cache_entry(const std::string& path, std::string& refused);
// A name in `dir` that no other process or thread uses: "<dir>/.<key><ext>.tmp.<pid>.<n>".
std::string temp_name_in(const std::string& dir, const std::string& key, const char* ext);
// Writes `text` to a temporary in `dir`, then renames it onto <dir>/<key><ext> (atomic within a
// directory: a reader sees the old file, the new one or none, never half of one); returns that path.
// Throws Error, leaving no temporary behind, when either step fails.
std::string write_into_cache(const std::string& dir, const std::string& key, const char* ext, const std::string& text);

// Compiles build.source (or finds it in the cache) and loads it; fills in the build's key, cache_hit,
// compile_ns, load_ns and library_path. Throws KernelCompileError when the compiler refuses the source.
KernelEntry build_kernel(KernelBuild& build, const Toolchain& toolchain, const CacheDir& cache);

}  // namespace strata::compiler::detail
