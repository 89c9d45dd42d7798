// On a GPU, which fused kernel of the compiled plan launched each device kernel of a compiled run, as
// `strata trace PROGRAM --mode compiled` and compare's compiled column print it and write it in their
// JSON (Note [Compiled kernels attributed to their group] in reports/model/compiled_attribution.h).
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "apps/strata/compiled_program.h"
#include "reports/model/units.h"

namespace strata::app {

std::vector<size_t> kernels_of_ops(const DeviceTrace& device, const std::vector<uint32_t>& ops) {
  const std::unordered_set<uint64_t> wanted(ops.begin(), ops.end());
  std::unordered_map<uint32_t, uint64_t> op_of_correlation;
  for (const ExternalCorrelation& e : device.external) op_of_correlation.emplace(e.correlation_id, e.external_id);
  std::vector<size_t> out;
  for (size_t i = 0; i < device.kernels.size(); ++i) {
    const auto it = op_of_correlation.find(device.kernels[i].correlation_id);
    if (it != op_of_correlation.end() && wanted.count(it->second) > 0) out.push_back(i);
  }
  return out;
}

namespace {

std::string joined(const std::vector<std::string>& names, const char* sep) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : sep) + n;
  return s;
}

std::vector<std::string> ops_of(const compiler::CompiledGraph& graph, const compiler::FusedKernel& kernel) {
  std::vector<std::string> ops;
  for (size_t n : kernel.nodes) ops.push_back(graph.graph().nodes[n].op);
  return ops;
}

}  // namespace

void print_kernel_attribution(const CompiledProgram& program, const reports::CompiledAttribution& a,
                              std::ostream& out) {
  const compiler::CompiledGraph& g = *program.graph;
  out << "compiled kernels on the GPU by the fused kernel that launched them: " << a.attributed << " of "
      << a.kernels << " attributed\n";
  for (size_t k = 0; k < g.plan().kernels.size() && k < a.groups.size(); ++k) {
    const compiler::FusedKernel& fused = g.plan().kernels[k];
    const reports::GroupKernels& group = a.groups[k];
    out << "  k" << k << "  " << fused.name << " <- " << joined(ops_of(g, fused), " ") << ": " << group.kernels
        << " kernel" << (group.kernels == 1 ? "" : "s") << ", " << reports::format_ns(group.gpu_ns)
        << (group.names.empty() ? "" : " (" + joined(group.names, ", ") + ")") << "\n";
  }
  if (a.unattributed() > 0) {
    out << "  unattributed: " << a.unattributed() << " kernel" << (a.unattributed() == 1 ? "" : "s") << " ("
        << joined(a.unattributed_names, ", ") << ")\n";
  }
}

nlohmann::json kernel_attribution_json(const CompiledProgram& program, const reports::CompiledAttribution& a) {
  const compiler::CompiledGraph& g = *program.graph;
  nlohmann::json groups = nlohmann::json::array();
  for (size_t k = 0; k < g.plan().kernels.size() && k < a.groups.size(); ++k) {
    const compiler::FusedKernel& fused = g.plan().kernels[k];
    groups.push_back({{"kernel", "k" + std::to_string(k)},
                      {"name", fused.name},
                      {"ops", ops_of(g, fused)},
                      {"device_kernels", a.groups[k].kernels},
                      {"gpu_ns", a.groups[k].gpu_ns},
                      {"device_kernel_names", a.groups[k].names}});
  }
  return {{"kernels", a.kernels},
          {"attributed_kernels", a.attributed},
          {"unattributed_kernels", a.unattributed()},
          {"unattributed_names", a.unattributed_names},
          {"groups", groups}};
}

}  // namespace strata::app
