// layers/device/cupti: which op created each node of a captured CUDA Graph, as the session's callbacks
// report them. No cupti.h: testable on any machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "lib/timeline.h"

namespace strata::cupti {

// Which op created each node of a captured CUDA Graph, first report wins. Three sources report nodes:
// the GRAPHNODE_CREATED callback, the GRAPHNODE_CLONED callback (the executable graph's copies, under new
// ids) and attribute_graph_nodes' fallback after each captured op. A node reported twice keeps one entry,
// so no later duplicate can override the first where the comparison joins replayed kernels to ops.
class GraphNodeOrigins {
 public:
  // False when the node is already known. `step_tag`: the fused kernel's tag, 0 when none was pushed.
  bool add(uint64_t node_id, uint32_t op_id, GraphNodeSource source, uint32_t step_tag = 0);
  // The clone inherits its original's op, source and step tag. False when the original is unknown or the clone
  // already known.
  bool add_clone(uint64_t clone_id, uint64_t original_id);
  void reserve(size_t nodes) {  // before capture: no reallocation or rehash inside timed calls
    nodes_.reserve(nodes);
    index_.reserve(nodes);
  }
  std::vector<GraphNodeOrigin> take();  // every node in the order first reported; leaves the table empty

 private:
  std::vector<GraphNodeOrigin> nodes_;
  // The same pairs indexed: each clone looks its original up inside cudaGraphInstantiate, whose time
  // strata reports, so a scan of nodes_ would add O(nodes^2) to it.
  std::unordered_map<uint64_t, GraphNodeOrigin> index_;
};

}  // namespace strata::cupti
