// The printed forms of a graph and a fusion plan, and the byte counts both paths move.
#include <cstdio>
#include <string>

#include "layers/compiler/internal.h"

namespace strata::compiler {
namespace {

std::string ref(size_t id) { return "%" + std::to_string(id); }

// A scalar argument as the listing shows it: the schema's own spelling where it has one.
std::string scalar_text(const binding::IValue& v) {
  if (v.is_double()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v.to_double());
    return buf;
  }
  return v.repr();
}

double bytes_of(const ValueMeta& m) { return double(m.shape.numel()) * double(element_size(m.dtype)); }

}  // namespace

namespace detail {

std::string call_text(const Node& n) {
  const binding::Schema& schema = binding::find_operator(n.op).schema();
  std::string s = n.op + "(";
  for (size_t i = 0; i < n.args.size(); ++i) {
    if (i > 0) s += ", ";
    const bool keyword = i < schema.arguments.size() && schema.arguments[i].keyword_only;
    if (keyword) s += schema.arguments[i].name + "=";
    s += n.args[i].value ? ref(*n.args[i].value) : scalar_text(n.args[i].scalar);
  }
  return s + ")";
}

}  // namespace detail

std::string ValueMeta::str() const {
  std::string s = std::string(dtype_name(dtype)) + "[" + shape.str() + "]";
  if (!device.is_cpu()) s += ", " + device.str();
  return s;
}

size_t Graph::calls() const {
  size_t n = 0;
  for (const Node& node : nodes) n += node.kind == NodeKind::kCall ? 1 : 0;
  return n;
}

std::string Graph::str() const {
  std::string s = "graph(";
  for (size_t i = 0; i < inputs.size(); ++i) s += (i > 0 ? ", " : "") + ref(inputs[i]) + ": " + nodes[inputs[i]].meta.str();
  s += "):\n";
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    if (n.kind == NodeKind::kInput) continue;
    std::string line = "  " + ref(id) + " = " + (n.kind == NodeKind::kConstant ? std::string("constant") : detail::call_text(n));
    if (line.size() < 40) line.resize(40, ' ');
    s += line + "  : " + n.meta.str() + "\n";
  }
  s += "  return (";
  for (size_t i = 0; i < outputs.size(); ++i) s += (i > 0 ? ", " : "") + ref(outputs[i]);
  return s + ")\n";
}

const char* kernel_kind_name(KernelKind kind) {
  switch (kind) {
    case KernelKind::kPointwise: return "pointwise (generated loop)";
    case KernelKind::kGemmEpilogue: return "OpenBLAS gemm + generated epilogue";
    case KernelKind::kExtern: return "extern (the op's own kernel, through binding and dispatch)";
  }
  return "?";
}

std::string FusionPlan::str(const Graph& graph) const {
  std::string s = "plan: " + std::to_string(kernels.size()) + " kernel" + (kernels.size() == 1 ? "" : "s") +
                  " for " + std::to_string(graph.calls()) + " op" + (graph.calls() == 1 ? "" : "s") + "\n";
  for (size_t k = 0; k < kernels.size(); ++k) {
    const FusedKernel& f = kernels[k];
    std::string line = "  k" + std::to_string(k) + "  " + f.name;
    if (line.size() < 28) line.resize(28, ' ');
    line += "  " + ref(f.output) + " <-";
    for (size_t n : f.nodes) line += " " + graph.nodes[n].op;
    line += "  reads";
    for (size_t in : f.inputs) line += " " + ref(in);
    s += line + "  [" + kernel_kind_name(f.kind) + "]\n";
  }
  return s;
}

double eager_bytes_moved(const Graph& graph) {
  double bytes = 0;
  for (const Node& n : graph.nodes) {
    if (n.kind != NodeKind::kCall) continue;
    for (const Arg& a : n.args) {
      if (a.value) bytes += bytes_of(graph.nodes[*a.value].meta);
    }
    bytes += bytes_of(n.meta);
  }
  return bytes;
}

}  // namespace strata::compiler
