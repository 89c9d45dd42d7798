#include "layers/device/cupti/graph_node_origins.h"

namespace strata::cupti {

bool GraphNodeOrigins::add(uint64_t node_id, uint32_t op_id, GraphNodeSource source, uint32_t step_tag) {
  const GraphNodeOrigin origin{node_id, op_id, source, step_tag};
  if (!index_.emplace(node_id, origin).second) return false;
  nodes_.push_back(origin);
  return true;
}

bool GraphNodeOrigins::add_clone(uint64_t clone_id, uint64_t original_id) {
  const auto it = index_.find(original_id);
  if (it == index_.end()) return false;
  const GraphNodeOrigin original = it->second;  // add() may rehash index_
  return add(clone_id, original.op_id, original.source, original.step_tag);
}

std::vector<GraphNodeOrigin> GraphNodeOrigins::take() {
  std::vector<GraphNodeOrigin> taken;
  taken.swap(nodes_);
  index_.clear();
  return taken;
}

}  // namespace strata::cupti
