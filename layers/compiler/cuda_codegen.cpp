// The fused kernels as CUDA C (compiler_cuda.h). The C++ generator's twin: the same header comment, the
// same locals in the same order, each node's expression from the same lowering row (element_expr), so the
// GPU kernel computes what the CPU plan computes; only the loop and the math prelude differ.
#include <algorithm>
#include <string>

#include "layers/compiler/compiler_cuda.h"
#include "layers/compiler/internal.h"

namespace strata::compiler::cuda {
namespace {

// CUDA's device math functions, by type (erff/erf, ...), under the names the lowering rows use. NVRTC
// declares them without an #include.
const char* math_prelude(DType dtype) {
  if (dtype == DType::kF64) {
    return "typedef double T;\n"
           "#define m_erf erf\n#define m_exp exp\n#define m_tanh tanh\n#define m_pow pow\n#define m_sqrt "
           "sqrt\n\n";
  }
  return "typedef float T;\n"
         "#define m_erf erff\n#define m_exp expf\n#define m_tanh tanhf\n#define m_pow powf\n#define m_sqrt "
         "sqrtf\n\n";
}

}  // namespace

CudaKernel generate_cuda(const Graph& g, const FusedKernel& k, DType dtype) {
  if (k.kind == KernelKind::kExtern)
    throw Error("compiler: " + k.name + " is an extern kernel: there is no code to generate");
  if (dtype != DType::kF32 && dtype != DType::kF64)
    throw Error("compiler: generated CUDA kernels are f32 or f64, not " + std::string(dtype_name(dtype)));
  std::vector<std::string> lines;
  bool uses_column = false;  // only linear's bias reads by column; the others would leave c unused
  for (size_t id : k.nodes) {
    const std::string e = detail::element_expr(g, k, id);
    uses_column = uses_column || e.find("[c]") != std::string::npos;
    lines.push_back("    const T " + detail::var(id) + " = " + e + ";\n");
  }
  std::string s = detail::source_header(g, k, dtype);
  s += math_prelude(dtype);
  s += "extern \"C\" __global__ void " + k.name + "(";
  for (size_t i = 0; i < k.inputs.size(); ++i) s += "const T* __restrict__ in" + std::to_string(i) + ", ";
  s += "T* __restrict__ out, long long rows, long long cols) {\n";
  // One thread per element, the grid striding over the rest: any grid size is correct, so the launch can
  // size it to the device rather than to the tensor.
  s += "  const long long n = rows * cols;\n";
  s += "  const long long stride = (long long)blockDim.x * gridDim.x;\n";
  s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {\n";
  if (uses_column) s += "    const long long c = i % cols;\n";
  for (const std::string& l : lines) s += l;
  s += "    out[i] = " + detail::var(k.output) + ";\n";
  s += "  }\n}\n";
  return {k.name, dtype, s};
}

std::vector<CudaKernel> generate_cuda(const CompiledGraph& graph) {
  std::vector<CudaKernel> out;
  const std::vector<KernelBuild>& builds = graph.builds();  // one per generated kernel, in plan order
  size_t b = 0;
  for (const FusedKernel& k : graph.plan().kernels) {
    if (k.kind == KernelKind::kExtern) continue;
    if (b >= builds.size())
      throw Error("compiler: the compiled graph has fewer builds than generated kernels");
    out.push_back(generate_cuda(graph.graph(), k, builds[b++].dtype));
  }
  return out;
}

}  // namespace strata::compiler::cuda
