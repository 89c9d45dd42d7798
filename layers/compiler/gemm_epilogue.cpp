// Which cuBLASLt epilogue a GEMM-epilogue kernel becomes on the GPU (compiler.h, choose_lt_epilogue).
//
// Note [Which cuBLASLt epilogue]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// cublasLtMatmul can finish a GEMM with a fixed epilogue (cublasLt.h, cublasLtEpilogue_t): BIAS adds a
// vector "broadcasted to all columns" of column-major D, one value per row of D, "before applying final
// postprocessing"; RELU is x := max(x, 0); GELU is "GELU point-wise transform"; RELU_BIAS and GELU_BIAS are
// the bias, then the activation. strata's row-major [M, N] result is column-major D = [N, M] (Note
// [Row-major GEMM on column-major cuBLAS]), so D's rows are linear's output features and its bias vector is
// exactly linear's bias. An epilogue is chosen only when it computes the kernel's fused ops exactly:
//   - relu -> RELU. strata's relu is `v > 0 ? v : 0`, which maps NaN to 0, as cuBLASLt's RELU is reported
//     to (torch.relu keeps NaN; strata's eager kernels and its generated ones do not);
//   - gelu -> none. strata's gelu is the exact (erf) form, and cuBLASLt's GELU is the tanh approximation:
//     the header does not give its formula, but PyTorch sends only gelu(approximate='tanh') to it (its
//     addmm GELU epilogue falls back to the tanh gelu when cuBLASLt cannot run it). The two differ by up to
//     about 5e-4 absolute, far above f32's tolerance, so the erf gelu keeps cuBLAS + the generated kernel;
//   - the tanh GELU as a user writes it, 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))), eight calls over x,
//     matched whole (both operand orders of add and mul, the constants to 1e-6) -> GELU;
//   - linear's bias -> BIAS, combined with the activation after it; f64 has none (cuBLASLt's f64 GEMMs
//     have no bias epilogue: layers/kernels/cuda/cublas_gemm.cpp's linear takes cublasGemmEx there);
//   - anything else after the GEMM (an add of a tensor, a second activation, a chain that is not the tanh
//     GELU) -> none, naming what is there.
// "None" is not an error: the GPU run then calls the GEMM alone and launches the generated epilogue kernel
// on its result, as the CPU plan does after OpenBLAS. Whether cuBLASLt has a kernel for the chosen epilogue
// at a given shape and dtype is its heuristic's answer at run time, with the same fallback.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "layers/compiler/compiler.h"
#include "layers/compiler/internal.h"

namespace strata::compiler {
namespace {

// The tanh GELU of node x over exactly the nodes `ops`, as programs.cpp's gelu_tanh writes it:
// mul(mul.Scalar(x, 0.5), add.Scalar(tanh(mul.Scalar(add(x, mul.Scalar(pow(x, 3), 0.044715)), k)), 1)).
class TanhGeluMatcher {
 public:
  TanhGeluMatcher(const Graph& g, const std::vector<size_t>& ops, size_t x) : g_(g), ops_(ops), x_(x) {}

  bool matches() {
    if (ops_.empty()) return false;
    matched_.clear();
    if (!product(ops_.back())) return false;
    std::vector<size_t> got = matched_, want = ops_;
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    return got == want;  // every op of the kernel is part of the GELU, and nothing is counted twice
  }

 private:
  const Node* call(size_t id, const char* op) {
    if (std::find(ops_.begin(), ops_.end(), id) == ops_.end()) return nullptr;
    const Node& n = g_.nodes[id];
    if (n.kind != NodeKind::kCall || n.op != op) return nullptr;
    matched_.push_back(id);
    return &n;
  }
  static bool near(const Arg& a, double want) {
    if (a.value || !(a.scalar.is_double() || a.scalar.is_int())) return false;
    return std::fabs(a.scalar.to_double() - want) <= 1e-6 * std::fabs(want);
  }
  static bool is(const Arg& a, size_t id) { return a.value && *a.value == id; }
  // Tries `first` then `second` on the two operands in both orders, undoing a half match.
  template <typename A, typename B>
  bool either_order(const Node& n, A first, B second) {
    const size_t mark = matched_.size();
    if (first(n.args[0]) && second(n.args[1])) return true;
    matched_.resize(mark);
    return first(n.args[1]) && second(n.args[0]);
  }

  bool cube(const Arg& a) {
    const Node* n = a.value ? call(*a.value, "pow") : nullptr;
    return n && is(n->args[0], x_) && near(n->args[1], 3.0);
  }
  bool small_term(const Arg& a) {  // 0.044715 * x^3
    const Node* n = a.value ? call(*a.value, "mul.Scalar") : nullptr;
    return n && cube(n->args[0]) && near(n->args[1], 0.044715);
  }
  bool inner(const Arg& a) {  // x + 0.044715 * x^3 (add's alpha 1)
    const Node* n = a.value ? call(*a.value, "add") : nullptr;
    if (!n || n->args.size() < 3 || !near(n->args[2], 1.0)) return false;
    return either_order(*n, [&](const Arg& v) { return is(v, x_); }, [&](const Arg& v) { return small_term(v); });
  }
  bool one_plus_tanh(const Arg& a) {  // 1 + tanh(sqrt(2/pi) * inner)
    const Node* add = a.value ? call(*a.value, "add.Scalar") : nullptr;
    if (!add || !near(add->args[1], 1.0) || !near(add->args[2], 1.0) || !add->args[0].value) return false;
    const Node* th = call(*add->args[0].value, "tanh");
    if (!th || !th->args[0].value) return false;
    const Node* scaled = call(*th->args[0].value, "mul.Scalar");
    return scaled && near(scaled->args[1], std::sqrt(2.0 / M_PI)) && inner(scaled->args[0]);
  }
  bool half_x(const Arg& a) {
    const Node* n = a.value ? call(*a.value, "mul.Scalar") : nullptr;
    return n && is(n->args[0], x_) && near(n->args[1], 0.5);
  }
  bool product(size_t id) {
    const Node* n = call(id, "mul");
    return n && either_order(*n, [&](const Arg& v) { return half_x(v); },
                             [&](const Arg& v) { return one_plus_tanh(v); });
  }

  const Graph& g_;
  const std::vector<size_t>& ops_;
  size_t x_;
  std::vector<size_t> matched_;
};

EpilogueChoice with_bias(EpilogueChoice c, LtEpilogue plain, LtEpilogue biased, const std::string& what) {
  c.epilogue = c.has_bias ? biased : plain;
  c.why = (c.has_bias ? "linear's bias then " : "") + what + ": cuBLASLt's " +
          std::string(lt_epilogue_name(c.epilogue)) + (c.has_bias ? " adds the bias, then applies it" : "");
  return c;
}

std::string op_list(const Graph& g, const std::vector<size_t>& ops) {
  std::string s;
  for (size_t id : ops) s += (s.empty() ? "" : ", ") + g.nodes[id].op;
  return s;
}

}  // namespace

const char* lt_epilogue_name(LtEpilogue epilogue) {
  switch (epilogue) {
    case LtEpilogue::kNone: return "none";
    case LtEpilogue::kRelu: return "CUBLASLT_EPILOGUE_RELU";
    case LtEpilogue::kBias: return "CUBLASLT_EPILOGUE_BIAS";
    case LtEpilogue::kReluBias: return "CUBLASLT_EPILOGUE_RELU_BIAS";
    case LtEpilogue::kGelu: return "CUBLASLT_EPILOGUE_GELU";
    case LtEpilogue::kGeluBias: return "CUBLASLT_EPILOGUE_GELU_BIAS";
  }
  return "none";
}

EpilogueChoice choose_lt_epilogue(const Graph& g, const FusedKernel& k) {
  EpilogueChoice c;
  if (k.kind != KernelKind::kGemmEpilogue) {
    c.why = std::string(k.kind == KernelKind::kPointwise ? "a pointwise" : "an extern") +
            " kernel has no GEMM to carry an epilogue";
    return c;
  }
  c.gemm = detail::gemm_node(g, k);
  const Node& gemm = g.nodes[c.gemm];
  const DType dtype = g.nodes[k.output].meta.dtype;
  c.has_bias = gemm.op == "linear" && gemm.args.size() > 2 && gemm.args[2].value.has_value();
  std::vector<size_t> ops;
  for (size_t id : k.nodes)
    if (id != c.gemm) ops.push_back(id);
  if (c.has_bias && dtype == DType::kF64) {
    c.why = "f64: cuBLASLt's f64 GEMMs have no bias epilogue (linear's CUDA kernel takes cublasGemmEx there)";
    return c;
  }
  if (ops.empty()) {
    if (c.has_bias) return with_bias(c, LtEpilogue::kNone, LtEpilogue::kBias, "nothing else");
    c.why = "nothing after the GEMM";
    return c;
  }
  if (ops.size() == 1) {
    const Node& n = g.nodes[ops[0]];
    const bool reads_gemm = !n.args.empty() && n.args[0].value == c.gemm;
    if (n.op == "relu" && reads_gemm) return with_bias(c, LtEpilogue::kRelu, LtEpilogue::kReluBias, "relu");
    if (n.op == "gelu") {
      c.why = "gelu is the exact (erf) GELU and cuBLASLt's GELU epilogue is the tanh approximation: the "
              "generated kernel applies it after the GEMM";
      return c;
    }
  }
  if (TanhGeluMatcher(g, ops, c.gemm).matches())
    return with_bias(c, LtEpilogue::kGelu, LtEpilogue::kGeluBias, "the tanh GELU (" + std::to_string(ops.size()) + " calls)");
  c.why = op_list(g, ops) + " after the GEMM: cuBLASLt's epilogues are a bias, relu and the tanh GELU, one "
          "activation after the bias";
  return c;
}

}  // namespace strata::compiler
