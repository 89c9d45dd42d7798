// The fusion planner, and the lowering table it shares with codegen.
//
// Note [What fuses]
// ~~~~~~~~~~~~~~~~~
// One pass over the calls in graph order, each becoming part of a kernel:
//  - a GEMM (matmul, linear) starts a GEMM-epilogue kernel;
//  - a pointwise op with a lowering joins the kernels of its tensor arguments when it can: an argument's
//    kernel is joinable when the argument is that kernel's current output, this op is its only user, it is
//    not a graph output, and it has this op's shape and dtype (then the intermediate never reaches memory).
//    Several joinable pointwise kernels merge into one (add(relu(x), relu(y)) is one loop); a GEMM kernel
//    joins at most once (its epilogue runs on its own output tile, and a second GEMM's tile is elsewhere);
//    with nothing to join it starts a pointwise kernel of its own;
//  - anything else (no lowering, a dtype or device codegen does not cover) is an extern kernel: the op's
//    own kernel, called through binding and dispatch as eagerly (Inductor's extern kernels).
// A GEMM kernel whose epilogue stayed empty is the GEMM alone: it becomes extern too, since a generated
// kernel would only add a compile for the same cblas call.
// Broadcasting: the existing pointwise ops take identical shapes only, so a fused loop reads every input
// at the output's index, except linear's bias, which the epilogue reads per column (a row broadcast).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "layers/compiler/internal.h"
#include "layers/compiler/lowering.h"
#include "layers/kernels/pointwise_math.h"

namespace strata::compiler {
namespace lowering {
namespace {

// A scalar as a C++ literal of the kernel's type (exact: %.17g round-trips a double). -0.0 is spelled
// so: %.17g writes "-0", the int 0 negated, which is +0.0 once converted.
std::string literal(double d) {
  if (std::isnan(d)) return "T(__builtin_nan(\"\"))";
  if (std::isinf(d)) return d > 0 ? "T(__builtin_inf())" : "T(-__builtin_inf())";
  if (d == 0.0) return std::signbit(d) ? "T(-0.0)" : "T(0)";
  char buf[40];
  std::snprintf(buf, sizeof buf, "T(%.17g)", d);
  return buf;
}

std::string literal(const binding::IValue& v) { return literal(v.to_double()); }

std::string add(const std::vector<std::string>& t, const Node& n) {
  return "(" + t[0] + " + " + literal(n.args[2].scalar) + " * " + t[1] + ")";
}
std::string gelu(const std::vector<std::string>& t, const Node&) {  // exact (erf) form, as the eager kernel
  return "(T(0.5) * " + t[0] + " * (T(1) + m_erf(" + t[0] + " * T(0.70710678118654752440))))";
}
// The tanh GELU's ops, each as its eager CPU loop computes it (layers/kernels/cpu/pointwise.cpp): a Python
// float is rounded to T first, sub is add with -alpha.
std::string mul(const std::vector<std::string>& t, const Node&) { return "(" + t[0] + " * " + t[1] + ")"; }
std::string mul_scalar(const std::vector<std::string>& t, const Node& n) {
  return "(" + t[0] + " * " + literal(n.args[1].scalar) + ")";
}
std::string div(const std::vector<std::string>& t, const Node&) { return "(" + t[0] + " / " + t[1] + ")"; }
std::string div_scalar(const std::vector<std::string>& t, const Node& n) {
  return "(" + t[0] + " / " + literal(n.args[1].scalar) + ")";
}
std::string add_scalar(const std::vector<std::string>& t, const Node& n) {
  return "(" + t[0] + " + " + literal(n.args[2].scalar) + " * " + literal(n.args[1].scalar) + ")";
}
std::string sub(const std::vector<std::string>& t, const Node& n) {
  return "(" + t[0] + " + " + literal(-n.args[2].scalar.to_double()) + " * " + t[1] + ")";
}
std::string sub_scalar(const std::vector<std::string>& t, const Node& n) {
  return "(" + t[0] + " + " + literal(-n.args[2].scalar.to_double()) + " * " + literal(n.args[1].scalar) + ")";
}
std::string tanh(const std::vector<std::string>& t, const Node&) { return "m_tanh(" + t[0] + ")"; }
// The eager kernel's special exponents (pow_value in pointwise.cpp), else the vector pow.
std::string pow(const std::vector<std::string>& t, const Node& n) {
  const double e = n.args[1].scalar.to_double();
  const std::string& x = t[0];
  if (e == 0.0) return "T(1)";
  if (e == 1.0) return x;
  if (e == 0.5) return "m_sqrt(" + x + ")";
  if (e == -0.5) return "(T(1) / m_sqrt(" + x + "))";
  if (e == -1.0) return "(T(1) / " + x + ")";
  if (e == 2.0) return "(" + x + " * " + x + ")";
  if (e == 3.0) return "(" + x + " * " + x + " * " + x + ")";
  if (e == -2.0) return "(T(1) / (" + x + " * " + x + "))";
  return "m_pow(" + x + ", " + literal(e) + ")";
}
std::string tanh_backward(const std::vector<std::string>& t, const Node&) {
  return "(" + t[0] + " * (T(1) - " + t[1] + " * " + t[1] + "))";
}
std::string threshold_backward(const std::vector<std::string>& t, const Node& n) {
  return "(" + t[1] + " <= " + literal(n.args[2].scalar) + " ? T(0) : " + t[0] + ")";
}
std::string gelu_backward(const std::vector<std::string>& t, const Node&) {
  const std::string& x = t[1];
  return "(" + t[0] + " * (T(0.5) * (T(1) + m_erf(" + x + " * T(0.70710678118654752440))) + " + x +
         " * T(0.39894228040143267794) * m_exp(T(-0.5) * " + x + " * " + x + ")))";
}

// An op with a functor in layers/kernels/pointwise_math.h and no row in the table below is lowered from
// the functor itself (Note [Pointwise math written once]): its math evaluated on Source, whose operations
// write their text, fully parenthesised in the order the eager loop computes them, and whose libm calls
// are the vector math prelude's (Note [Vector math] in codegen.cpp). A new unary op then fuses with no
// row here. Each operation is [[maybe_unused]]: the functors of the day may not use them all.
struct Source {
  std::string text;
  explicit Source(double d) : text(literal(d)) {}  // T(0.5) in a functor: a literal of the kernel's type
  explicit Source(std::string s) : text(std::move(s)) {}
};
Source binary(const Source& a, const char* op, const Source& b) { return Source("(" + a.text + op + b.text + ")"); }
[[maybe_unused]] Source operator+(const Source& a, const Source& b) { return binary(a, " + ", b); }
[[maybe_unused]] Source operator-(const Source& a, const Source& b) { return binary(a, " - ", b); }
[[maybe_unused]] Source operator*(const Source& a, const Source& b) { return binary(a, " * ", b); }
[[maybe_unused]] Source operator/(const Source& a, const Source& b) { return binary(a, " / ", b); }
[[maybe_unused]] Source operator-(const Source& a) { return Source("(-" + a.text + ")"); }
[[maybe_unused]] Source operator<(const Source& a, const Source& b) { return binary(a, " < ", b); }
[[maybe_unused]] Source select_of(const Source& c, const Source& a, const Source& b) {
  return Source("(" + c.text + " ? " + a.text + " : " + b.text + ")");
}
[[maybe_unused]] Source erf_of(const Source& x) { return Source("m_erf(" + x.text + ")"); }
[[maybe_unused]] Source exp_of(const Source& x) { return Source("m_exp(" + x.text + ")"); }
[[maybe_unused]] Source tanh_of(const Source& x) { return Source("m_tanh(" + x.text + ")"); }

template <typename Fn>
std::string functor_forward(const std::vector<std::string>& t, const Node&) {
  return Fn::forward(Source(t[0])).text;
}
template <typename Fn>
std::string functor_gradient(const std::vector<std::string>& t, const Node&) {
  return Fn::gradient(Source(t[0]), Source(t[1])).text;
}

template <typename... Fns>
PointwiseExpr find_functor(const std::string& op, kernels::math::MathList<Fns...>) {
  PointwiseExpr found = nullptr;
  ((found = found == nullptr && op == Fns::kName ? &functor_forward<Fns> : found), ...);
  return found;
}
template <typename... Fns>
PointwiseExpr find_functor_gradient(const std::string& op, kernels::math::MathList<Fns...>) {
  PointwiseExpr found = nullptr;
  ((found = found == nullptr && op == Fns::kGradientName ? &functor_gradient<Fns> : found), ...);
  return found;
}

// relu has no row: its functor's `x < 0 ? 0 : x` keeps NaN and -0.0 as eager does (a row written as
// `x > 0 ? x : 0` turned both into +0).
const std::map<std::string, PointwiseExpr>& table() {
  static const std::map<std::string, PointwiseExpr> kTable = {
      {"add", &add},
      {"gelu", &gelu},
      {"threshold_backward", &threshold_backward},
      {"gelu_backward", &gelu_backward},
      {"mul", &mul},
      {"mul.Scalar", &mul_scalar},
      {"div", &div},
      {"div.Scalar", &div_scalar},
      {"add.Scalar", &add_scalar},
      {"sub", &sub},
      {"sub.Scalar", &sub_scalar},
      {"tanh", &tanh},
      {"pow", &pow},
      {"tanh_backward", &tanh_backward},
  };
  return kTable;
}

template <typename... Fns>
void add_functor_names(std::vector<std::string>& names, kernels::math::MathList<Fns...>) {
  (names.emplace_back(Fns::kName), ...);
}
template <typename... Fns>
void add_gradient_names(std::vector<std::string>& names, kernels::math::MathList<Fns...>) {
  (names.emplace_back(Fns::kGradientName), ...);
}

}  // namespace

PointwiseExpr find_pointwise(const std::string& op) {
  auto it = table().find(op);
  if (it != table().end()) return it->second;
  if (PointwiseExpr e = find_functor(op, kernels::math::UnaryMath{})) return e;
  return find_functor_gradient(op, kernels::math::UnaryGradientMath{});
}

std::vector<std::string> pointwise_ops() {
  std::vector<std::string> names;
  for (const auto& [name, expr] : table()) names.push_back(name);
  add_functor_names(names, kernels::math::UnaryMath{});
  add_gradient_names(names, kernels::math::UnaryGradientMath{});
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

bool is_gemm(const std::string& op) { return op == "matmul" || op == "linear"; }

}  // namespace lowering

namespace {

class Planner {
 public:
  Planner(const Graph& g, bool cuda) : g_(g), cuda_(cuda), kernel_of_(g.nodes.size(), kNone), is_output_(g.nodes.size(), false) {
    for (size_t o : g.outputs) is_output_[o] = true;
  }

  // The generated GEMM kernels are 2-D (gemm_with_epilogue); a batched or 1-D matmul, or linear on N-D
  // input, stays extern: the eager kernel, one dispatcher call.
  bool two_d_operands(const Node& n) const {
    for (size_t i = 0; i < 2 && i < n.args.size(); ++i)
      if (n.args[i].value && g_.nodes[*n.args[i].value].meta.shape.ndim != 2) return false;
    return true;
  }

  FusionPlan run() {
    for (size_t id = 0; id < g_.nodes.size(); ++id) {
      const Node& n = g_.nodes[id];
      if (n.kind != NodeKind::kCall) continue;
      if (lowering::lowerable(n.meta, cuda_) && lowering::is_gemm(n.op) && two_d_operands(n)) {
        start(id, KernelKind::kGemmEpilogue);
      } else if (lowering::lowerable(n.meta, cuda_) && lowering::find_pointwise(n.op) != nullptr) {
        join(id);
      } else {
        start(id, KernelKind::kExtern);
      }
    }
    return finish();
  }

 private:
  static constexpr size_t kNone = ~size_t{0};

  void start(size_t id, KernelKind kind) {
    kernels_.push_back({kind, "", {id}, id, {}});
    kernel_of_[id] = kernels_.size() - 1;
  }

  // Whether the pointwise op `id` may read argument `v` inside v's kernel (Note [What fuses]).
  bool joinable(size_t v, size_t id) const {
    const size_t k = kernel_of_[v];
    return k != kNone && kernels_[k].kind != KernelKind::kExtern && kernels_[k].output == v && !is_output_[v] &&
           g_.nodes[v].users.size() == 1 && g_.nodes[v].meta == g_.nodes[id].meta;
  }

  void join(size_t id) {
    size_t target = kNone;
    std::vector<size_t> merge;
    for (const Arg& a : g_.nodes[id].args) {
      if (!a.value || !joinable(*a.value, id)) continue;
      const size_t k = kernel_of_[*a.value];
      if (k == target || std::find(merge.begin(), merge.end(), k) != merge.end()) continue;
      const bool gemm = kernels_[k].kind == KernelKind::kGemmEpilogue;
      if (gemm && target != kNone && kernels_[target].kind == KernelKind::kGemmEpilogue) continue;  // one GEMM
      if (target == kNone || gemm) {
        if (target != kNone) merge.push_back(target);
        target = k;
      } else {
        merge.push_back(k);
      }
    }
    if (target == kNone) return start(id, KernelKind::kPointwise);
    FusedKernel& t = kernels_[target];
    for (size_t k : merge) {
      for (size_t n : kernels_[k].nodes) {
        t.nodes.push_back(n);
        kernel_of_[n] = target;
      }
      kernels_[k].nodes.clear();  // emptied: dropped by finish()
    }
    std::sort(t.nodes.begin(), t.nodes.end());  // graph order is a topological order
    t.nodes.push_back(id);
    t.output = id;
    kernel_of_[id] = target;
  }

  // A kernel's name joins its ops' names, and it names the generated source's file, whose name may not
  // pass 255 bytes: a chain of 49 ops failed with "File name too long". A long name keeps its first ops
  // whole, then the count of ops and a hash of the full name, so that two long chains differ by name
  // (the header comment of the source still lists every call).
  static void bound_name(FusedKernel& k) {
    constexpr size_t kMaxName = 96;
    if (k.name.size() <= kMaxName) return;
    const std::string tail = "_" + std::to_string(k.nodes.size()) + "ops_" + detail::hex16(detail::fnv1a(k.name)).substr(0, 8);
    std::string head = k.name.substr(0, kMaxName - tail.size());
    head.erase(head.find_last_of('_'));  // whole op names only
    k.name = head + tail;
  }

  FusionPlan finish() {
    FusionPlan plan;
    for (FusedKernel& k : kernels_) {
      if (k.nodes.empty()) continue;
      if (k.kind == KernelKind::kGemmEpilogue && k.nodes.size() == 1) k.kind = KernelKind::kExtern;
      k.name = k.kind == KernelKind::kExtern ? g_.nodes[k.output].op : "fused";
      for (size_t n : k.nodes) {
        // An overload's base name ("mul.Scalar" -> mul): kernel names stay identifiers, as Inductor's do
        // (the kernel's header comment lists each call by its full name).
        if (k.kind != KernelKind::kExtern) k.name += "_" + g_.nodes[n].op.substr(0, g_.nodes[n].op.find('.'));
        for (const Arg& a : g_.nodes[n].args) {
          const bool inside = a.value && std::find(k.nodes.begin(), k.nodes.end(), *a.value) != k.nodes.end();
          if (a.value && !inside && std::find(k.inputs.begin(), k.inputs.end(), *a.value) == k.inputs.end())
            k.inputs.push_back(*a.value);
        }
      }
      bound_name(k);
      plan.kernels.push_back(std::move(k));
    }
    // Each kernel's inputs are earlier kernels' outputs (or inputs, constants), made before its last node.
    std::sort(plan.kernels.begin(), plan.kernels.end(),
              [](const FusedKernel& a, const FusedKernel& b) { return a.output < b.output; });
    return plan;
  }

  const Graph& g_;
  bool cuda_;  // generated kernels for CUDA tensors too (plan_fusion's cuda_kernels)
  std::vector<FusedKernel> kernels_;
  std::vector<size_t> kernel_of_;
  std::vector<bool> is_output_;
};

}  // namespace

FusionPlan plan_fusion(const Graph& graph, bool cuda_kernels) { return Planner(graph, cuda_kernels).run(); }

// The same tests, in the same order, as Planner::run's, so the reason is the one that decided.
std::string extern_reason(const Graph& graph, const FusedKernel& kernel) {
  if (kernel.kind != KernelKind::kExtern) return "";
  const Node& n = graph.nodes[kernel.output];
  if (!lowering::lowerable(n.meta)) {
    return n.meta.str() + ": generated kernels are f32 or f64 on the CPU, so " + n.op +
           " runs its own kernel";
  }
  if (lowering::is_gemm(n.op))
    return "a GEMM with nothing fused after it: OpenBLAS as eagerly, no generated code";
  return "no lowering for " + n.op + ": its own kernel, called through binding and dispatch";
}

}  // namespace strata::compiler
