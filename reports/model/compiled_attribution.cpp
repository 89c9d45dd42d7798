#include "reports/model/compiled_attribution.h"

#include <algorithm>
#include <unordered_map>

namespace strata::reports {

uint32_t step_tag(size_t forward, size_t group, size_t groups) {
  return static_cast<uint32_t>(1 + forward * groups + group);
}

namespace {

void add_name(std::vector<std::string>& names, const std::string& name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
}

// Each kernel's tag: through its graph node when it was replayed from a graph (its correlation id is then
// the graph launch's, which no step was pushed around), else through its launch's correlation id.
struct TagIndex {
  std::unordered_map<uint64_t, uint32_t> by_node;
  std::unordered_map<uint32_t, uint64_t> by_correlation;

  explicit TagIndex(const DeviceTrace& device) {
    for (const GraphNodeOrigin& n : device.graph_nodes) by_node.emplace(n.graph_node_id, n.step_tag);  // first wins
    for (const ExternalCorrelation& e : device.step_tags) by_correlation.emplace(e.correlation_id, e.external_id);
  }

  uint64_t tag_of(const KernelRecord& kernel) const {
    if (kernel.graph_node_id != 0) {
      const auto it = by_node.find(kernel.graph_node_id);
      return it == by_node.end() ? 0 : it->second;
    }
    const auto it = by_correlation.find(kernel.correlation_id);
    return it == by_correlation.end() ? 0 : it->second;
  }
};

}  // namespace

CompiledAttribution attribute_compiled_kernels(const DeviceTrace& device, const std::vector<size_t>& kernels,
                                               size_t groups, size_t forwards) {
  CompiledAttribution a;
  a.groups.resize(groups);
  const TagIndex index(device);
  const uint64_t tags = uint64_t(groups) * forwards;  // tags 1..tags were given
  for (size_t i : kernels) {
    if (i >= device.kernels.size()) continue;  // not a kernel of this trace: nothing to count
    const KernelRecord& kernel = device.kernels[i];
    ++a.kernels;
    const uint64_t tag = index.tag_of(kernel);
    if (tag == 0 || tag > tags) {
      a.group_of_kernel.push_back(-1);
      a.forward_of_kernel.push_back(-1);
      add_name(a.unattributed_names, kernel.name);
      continue;
    }
    const size_t group = size_t((tag - 1) % groups), forward = size_t((tag - 1) / groups);
    a.group_of_kernel.push_back(int64_t(group));
    a.forward_of_kernel.push_back(int64_t(forward));
    GroupKernels& g = a.groups[group];
    ++g.kernels;
    g.gpu_ns += double(kernel.end_ns - kernel.start_ns);
    add_name(g.names, kernel.name);
    ++a.attributed;
  }
  return a;
}

}  // namespace strata::reports
