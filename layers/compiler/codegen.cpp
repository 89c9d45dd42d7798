// Code generation: one C++ translation unit per fused kernel and dtype (Inductor's C++ backend is the
// model, without its explicit vector classes). The loop is plain C++ over contiguous rows with __restrict
// pointers and one local per fused op, which GCC and Clang vectorise at -O3 -march=native; each op's
// expression is the lowering table's (lowering.h), written as the eager kernel computes it.
#include <algorithm>
#include <string>

#include "layers/compiler/internal.h"
#include "layers/compiler/lowering.h"

namespace strata::compiler::detail {
namespace {

// Note [Vector math]
// ~~~~~~~~~~~~~~~~~~
// A loop that calls erf, exp, tanh or pow does not vectorise with plain libm calls: the compiler cannot
// call a scalar function on a vector. glibc's libmvec has vector variants of them (_ZGVdN8v_erff: 8 floats
// in AVX2 registers), and OpenMP's `declare simd` on the declaration tells the compiler they exist, so
// the loop (under `omp simd`, -fopenmp-simd: no OpenMP runtime) calls them 8 or 4 lanes at a time.
// glibc's own headers declare them only under -ffast-math, which strata does not use: it would also
// allow reassociation and drop NaN semantics, and fused results must stay those of eager to rounding.
// libmvec's functions (tanh since glibc 2.35, pow since 2.22) are within 4 ulp of the scalar ones, far
// inside the dtype tolerances.
const char* math_prelude(DType dtype) {
  if (dtype == DType::kF64) {
    return "extern \"C\" {\n#pragma omp declare simd notinbranch\ndouble erf(double);\n"
           "#pragma omp declare simd notinbranch\ndouble exp(double);\n"
           "#pragma omp declare simd notinbranch\ndouble tanh(double);\n"
           "#pragma omp declare simd notinbranch\ndouble pow(double, double);\n}\n"
           "#define m_erf erf\n#define m_exp exp\n#define m_tanh tanh\n#define m_pow pow\n#define m_sqrt __builtin_sqrt\n\n";
  }
  return "extern \"C\" {\n#pragma omp declare simd notinbranch\nfloat erff(float);\n"
         "#pragma omp declare simd notinbranch\nfloat expf(float);\n"
         "#pragma omp declare simd notinbranch\nfloat tanhf(float);\n"
         "#pragma omp declare simd notinbranch\nfloat powf(float, float);\n}\n"
         "#define m_erf erff\n#define m_exp expf\n#define m_tanh tanhf\n#define m_pow powf\n#define m_sqrt __builtin_sqrtf\n\n";
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
