// Code generation: one C++ translation unit per fused kernel and dtype (Inductor's C++ backend is the
// model, without its explicit vector classes). The loop is plain C++ over contiguous rows with __restrict
// pointers and one local per fused op, which GCC and Clang vectorise at -O3 -march=native; each op's
// expression is the lowering table's (lowering.h), written as the eager kernel computes it, and its math
// calls are SLEEF's as in the eager loops (Note [Vector math]). The compiled graph runs the kernel on the
// intra-op threads (Note [Intra-op threads] in lib/parallel.h).
#include <algorithm>
#include <string>

#include "layers/compiler/math_f32_text.h"
#include "layers/compiler/internal.h"
#include "layers/compiler/lowering.h"
#include "layers/kernels/cpu/cpu_kernels.h"

namespace strata::compiler::detail {
namespace {

// Note [Vector math]
// ~~~~~~~~~~~~~~~~~~
// The generated loop calls erf, exp, tanh and pow as the eager CPU loops do: SLEEF's vector functions for
// the instruction set the eager loops chose (layers/kernels/cpu/vectorized/loops.h), and for f32 erf and
// tanh the text of the eager loops' own (math_f32.h, embedded with its explicit multiply-adds), so that eager
// against compiled compares fusion and host tax, not two math libraries, and a compiled op gives the
// eager op's bits. The loop stays scalar C++ under `omp simd` (-fopenmp-simd: no OpenMP runtime); each
// math call is declared `omp declare simd`, which tells the compiler that vector variants exist under the
// x86 vector ABI's names (_ZGVdN8v_<name>: 8 floats in an AVX2 register), and the prelude defines every
// variant the compiler may call (SSE, AVX, AVX2, AVX-512 widths, and the scalar one for a remainder) by
// padding its lanes into one vector of the eager loops' width and calling the eager function for it:
// every element goes through the same routine as in eager, the remainder too. No other multiply-add is
// fused (-ffp-contract=off, as the eager loops are built), so the arithmetic around it rounds as eager's.
// On a CPU without AVX2 the eager loops are the portable ones (libm, one element at a time) and so is the
// generated code. The prelude names the SLEEF functions, so the kernel cache's key (the source) changes
// with the instruction set and the library.
struct MathFn {
  const char* name;  // m_<name> in the lowering table
  int args;
};
constexpr MathFn kMathFns[] = {{"erf", 1}, {"exp", 1}, {"tanh", 1}, {"pow", 2}};

std::string math_prelude(DType dtype) {
  const bool f64 = dtype == DType::kF64;
  const std::string t = f64 ? "double" : "float";
  const int bytes = kernels::cpu::cpu_vector_bytes();
  if (bytes == 0) {
    std::string s = "#include <cmath>\n";
    for (const MathFn& f : kMathFns)
      s += "#define m_" + std::string(f.name) + " " + f.name + (f64 ? "" : "f") + "\n";
    return s + "#define m_sqrt " + (f64 ? "__builtin_sqrt" : "__builtin_sqrtf") + "\n\n";
  }
  const int lanes = bytes / (f64 ? 8 : 4);
  const std::string isa = bytes == 64 ? "avx512f" : "avx2";
  const std::string native = std::string(bytes == 64 ? "__m512" : "__m256") + (f64 ? "d" : "");
  std::string s = "#include <immintrin.h>\n#include <sleef.h>\n#include <cstdint>\n#include <cstring>\n\n";
  s += "typedef " + t + " strata_full __attribute__((vector_size(" + std::to_string(bytes) + ")));\n";
  s += "constexpr int kStrataLanes = " + std::to_string(lanes) + ";\n";
  // Apply a full-width function to V lanes of any vector: padded with zeros, one full vector at a time.
  s += "template <int V, typename Vec, typename F>\n"
       "static inline Vec strata_lanes(F f, const Vec* xs, int nargs) {\n"
       "  Vec r;\n"
       "  for (int o = 0; o < V; o += kStrataLanes) {\n"
       "    const int n = V - o < kStrataLanes ? V - o : kStrataLanes;\n"
       "    strata_full full[2] = {};\n"
       "    for (int a = 0; a < nargs; ++a) std::memcpy(&full[a], reinterpret_cast<const T*>(&xs[a]) + o, n * sizeof(T));\n"
       "    const strata_full y = f(full[0], full[1]);\n"
       "    std::memcpy(reinterpret_cast<T*>(&r) + o, &y, n * sizeof(T));\n"
       "  }\n"
       "  return r;\n"
       "}\n";
  // The variants' widths for T under the x86 vector ABI: (mangling letter, lanes, bytes).
  const struct { char letter; int bytes; } abi[] = {{'b', 16}, {'c', 32}, {'d', 32}, {'e', 64}};
  // The eager loops' own functions (layers/kernels/cpu/vectorized/vec.h): SLEEF's (f64 tanh its 3.5-ulp
  // one), and for f32 erf and tanh math_f32.h's, whose text is embedded here as the eager build compiles it.
  auto sleef = [&](const std::string& name) {
    return "Sleef_" + name + (f64 ? "d" : "f") + std::to_string(lanes) + (name == "tanh" ? "_u35" : "_u10") + isa;
  };
  if (!f64) {
    // math_f32.h's multiply-add at this width, then its text: erf and tanh as the eager f32 loops have them.
    s += "static inline strata_full strata_fma(strata_full a, strata_full b, strata_full c) {\n"
         "  return (strata_full)" + std::string(bytes == 64 ? "_mm512_fmadd_ps" : "_mm256_fmadd_ps") + "((" + native +
         ")a, (" + native + ")b, (" + native + ")c);\n}\n";
    s += kMathF32Text;
    s += "static inline strata_full strata_erf_full(strata_full x, strata_full) { return strata_erf_f32(x); }\n"
         "static inline strata_full strata_tanh_full(strata_full x, strata_full) { return strata_tanh_f32(x); }\n";
  }
  for (const MathFn& f : kMathFns) {
    const std::string call = f.args == 1 ? sleef(f.name) + "((" + native + ")x)" : sleef(f.name) + "((" + native + ")x, (" + native + ")y)";
    if (f64 || (std::string(f.name) != "erf" && std::string(f.name) != "tanh"))
      s += "static inline strata_full strata_" + std::string(f.name) + "_full(strata_full x, [[maybe_unused]] strata_full y) { return (strata_full)" + call + "; }\n";
    const std::string params = f.args == 1 ? "v" : "vv";
    // const: no side effects (SLEEF sets no errno), which lets the vectoriser if-convert a loop that also
    // selects (relu's `v < 0 ? 0 : v`): without it GCC keeps that loop scalar, one padded call per element.
    s += "extern \"C\" {\n#pragma omp declare simd notinbranch\n__attribute__((const)) " + t + " m_" + f.name + "(" + (f.args == 1 ? t : t + ", " + t) +
         ") __asm__(\"strata_m_" + f.name + "\");\n}\n";
    // The scalar one (a loop's remainder).
    s += "extern \"C\" __attribute__((visibility(\"hidden\"))) " + t + " strata_m_" + f.name + "_1(" + t + " x" +
         (f.args == 2 ? ", " + t + " y" : "") + ") __asm__(\"strata_m_" + f.name + "\");\n";
    s += "extern \"C\" " + t + " strata_m_" + f.name + "_1(" + t + " x" + (f.args == 2 ? ", " + t + " y" : "") +
         ") {\n  const " + t + " xs[2] = {x, " + (f.args == 2 ? "y" : "x") + "};\n  return strata_lanes<1>(strata_" + f.name +
         "_full, xs, " + std::to_string(f.args) + ");\n}\n";
    for (const auto& v : abi) {
      const int vl = v.bytes / (f64 ? 8 : 4);
      const std::string vt = "strata_v" + std::string(1, v.letter) + "_" + f.name;
      const std::string mangled = std::string("_ZGV") + v.letter + "N" + std::to_string(vl) + params + "_strata_m_" + f.name;
      s += "typedef " + t + " " + vt + " __attribute__((vector_size(" + std::to_string(v.bytes) + ")));\n";
      s += "extern \"C\" __attribute__((visibility(\"hidden\"))) " + vt + " " + vt + "_fn(" + vt + " x" +
           (f.args == 2 ? ", " + vt + " y" : "") + ") __asm__(\"" + mangled + "\");\n";
      s += "extern \"C\" " + vt + " " + vt + "_fn(" + vt + " x" + (f.args == 2 ? ", " + vt + " y" : "") + ") {\n  const " + vt +
           " xs[2] = {x, " + (f.args == 2 ? "y" : "x") + "};\n  return strata_lanes<" + std::to_string(vl) + ">(strata_" + f.name +
           "_full, xs, " + std::to_string(f.args) + ");\n}\n";
    }
  }
  return s + "#define m_sqrt " + (f64 ? "__builtin_sqrt" : "__builtin_sqrtf") + "\n\n";
}

}  // namespace

std::string source_header(const Graph& g, const FusedKernel& k, DType dtype) {
  std::string s = "// strata generated kernel: " + k.name + " (" + std::string(dtype_name(dtype)) + "), " + kernel_kind_name(k.kind) +
                  "\n";
  // Each op's dtype, not its shape: the source (and so the cache key) must not depend on sizes, or a
  // recompile for a new shape would miss the cache (kernels are shape-generic, docs/compiled.md).
  for (size_t id : k.nodes)
    s += "//   %" + std::to_string(id) + " = " + call_text(g.nodes[id]) + "  : " +
         std::string(dtype_name(g.nodes[id].meta.dtype)) + "\n";
  return s;
}

std::string var(size_t node) { return "v" + std::to_string(node); }

std::string element_expr(const Graph& g, const FusedKernel& k, size_t id) {
  const Node& n = g.nodes[id];
  auto input_at = [&](size_t value, const char* index) {
    const size_t pos = size_t(std::find(k.inputs.begin(), k.inputs.end(), value) - k.inputs.begin());
    return "in" + std::to_string(pos) + "[" + index + "]";
  };
  if (lowering::is_gemm(n.op)) {
    // The GEMM's result is already in the output row; linear adds its bias per column (a row broadcast).
    const bool bias = n.op == "linear" && n.args.size() > 2 && n.args[2].value.has_value();
    return bias ? "(out[i] + " + input_at(*n.args[2].value, "c") + ")" : "out[i]";
  }
  std::vector<std::string> tensors;
  for (const Arg& a : n.args) {
    if (!a.value) continue;
    const bool inside = std::find(k.nodes.begin(), k.nodes.end(), *a.value) != k.nodes.end();
    tensors.push_back(inside ? var(*a.value) : input_at(*a.value, "i"));
  }
  return lowering::find_pointwise(n.op)(tensors, n);
}

size_t gemm_node(const Graph& graph, const FusedKernel& kernel) {
  for (size_t id : kernel.nodes) {
    if (lowering::is_gemm(graph.nodes[id].op)) return id;
  }
  throw Error("compiler: kernel " + kernel.name + " has no GEMM node");
}

std::string generate_source(const Graph& g, const FusedKernel& k, DType dtype) {
  std::string s = source_header(g, k, dtype);
  s += "#include <cstdint>\n\n";
  s += std::string("using T = ") + (dtype == DType::kF64 ? "double" : "float") + ";\n\n";
  s += math_prelude(dtype);
  s += "extern \"C\" int strata_kernel_abi() { return " + std::to_string(kKernelAbi) + "; }\n\n";
  s += "extern \"C\" void strata_kernel(const void* const* inputs, void* output, int64_t row_begin, int64_t row_end,\n"
       "                              int64_t cols) {\n";
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    s += "  [[maybe_unused]] const T* __restrict in" + std::to_string(i) + " = static_cast<const T*>(inputs[" +
         std::to_string(i) + "]);\n";
  }
  s += "  T* __restrict out = static_cast<T*>(output);\n";
  s += "  for (int64_t r = row_begin; r < row_end; ++r) {\n";
  s += "#pragma omp simd\n";
  s += "    for (int64_t c = 0; c < cols; ++c) {\n";
  s += "      const int64_t i = r * cols + c;\n";
  for (size_t id : k.nodes) s += "      const T " + var(id) + " = " + element_expr(g, k, id) + ";\n";
  s += "      out[i] = " + var(k.output) + ";\n";
  s += "    }\n  }\n}\n";
  return s;
}

}  // namespace strata::compiler::detail
