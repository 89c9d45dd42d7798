#include "layers/autograd/engine.h"

#include <algorithm>

#include "layers/dispatch/autograd.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "lib/zone.h"

namespace strata::autograd {

std::string BackwardRecord::path() const {
  std::string out;
  for (const char* name : order) out += (out.empty() ? "" : " > ") + std::string(name);
  return out;
}

namespace {

// Newest node first (PyTorch's ReadyQueue order); AccumulateGrad nodes carry the highest number.
bool runs_later(const Node* a, const Node* b) { return a->sequence_nr() < b->sequence_nr(); }

// The engine's scratch lives in the nodes (pending, slot) so that finding a node's buffer is an index,
// not a hash lookup; this puts the nodes back as they were however the pass ends.
class Scratch {
 public:
  std::vector<Node*> nodes;
  std::vector<Tensor> buffers;
  ~Scratch() {
    for (Node* n : nodes) {
      n->pending = 0;
      n->slot = -1;
    }
  }
  void add(Node* n) {
    n->slot = static_cast<int32_t>(nodes.size());
    nodes.push_back(n);
  }
};

}  // namespace

BackwardRecord backward(const Tensor& root, const Tensor& grad, const BackwardOptions& options) {
  if (!root.defined()) throw UsageError("backward: the tensor is undefined");
  if (!root.requires_grad()) {
    throw UsageError("backward: element 0 of tensors does not require grad and does not have a grad_fn "
                     "(create the inputs with requires_grad=True, or --requires-grad on the command line)");
  }
  Tensor seed = grad;
  if (seed.defined()) {
    if (!(seed.sizes() == root.sizes())) {
      throw UsageError("backward: the gradient has shape [" + seed.sizes().str() + "], the tensor [" +
                       root.sizes().str() + "]; they must match");
    }
    if (seed.device() != root.device()) {
      throw UsageError("backward: the gradient is on " + seed.device().str() + ", the tensor on " +
                       root.device().str() + "; they must be on one device (as torch's 'invalid gradient')");
    }
    if (seed.dtype() != root.dtype()) {
      // As torch's engine (validate_outputs) casts a gradient to its tensor's dtype: a float64 gradient of
      // a float32 result is float32 from the first node on, which every formula's kernels expect.
      NoGradGuard no_grad;
      seed = ops::to_copy(seed, root.dtype());
    }
  } else {
    if (root.numel() != 1) {
      throw UsageError("backward: grad can be implicitly created only for scalar outputs; the tensor has shape [" +
                       root.sizes().str() + "] (call sum() first, or pass a gradient)");
    }
    NoGradGuard no_grad;  // the seed is a constant, not part of the graph
    seed = ops::ones_like(root);
  }
  std::shared_ptr<Node> root_node = gradient_edge(root);
  BackwardRecord record;
  Scratch s;
  // The root's step starts before the graph is discovered: finding the nodes is the engine's work too,
  // and it is charged to the first node rather than to nobody.
  if (options.before_node != nullptr) options.before_node(options.context, 0, root_node->name());
  {
    STRATA_ZONE(zone, Layer::kDispatch, "engine");
    // Every node reachable from the root, each counted once per consumer edge.
    s.add(root_node.get());
    for (size_t i = 0; i < s.nodes.size(); ++i) {
      Node* n = s.nodes[i];
      for (size_t e = 0; e < kMaxArgs; ++e) {
        Node* next = n->next(e).get();
        if (next == nullptr) continue;
        if (next->slot < 0) s.add(next);
        ++next->pending;
      }
    }
    s.buffers.resize(s.nodes.size());
    s.buffers[0] = std::move(seed);
    record.order.reserve(s.nodes.size());
  }
  std::vector<Node*> ready{root_node.get()};
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), runs_later);
    Node* n = ready.back();
    ready.pop_back();
    if (options.before_node != nullptr && !record.order.empty())
      options.before_node(options.context, record.order.size(), n->name());
    // Its self time is the engine's own cost for the node: the walk, the buffers, accumulating, freeing.
    STRATA_ZONE(zone, Layer::kDispatch, "engine");
    record.order.push_back(n->name());
    GradList grads;
    {
      NoGradGuard no_grad;  // formulas' gradient ops record nothing
      grads = n->apply(s.buffers[static_cast<size_t>(n->slot)]);
    }
    s.buffers[static_cast<size_t>(n->slot)] = Tensor();
    if (!options.retain_graph) n->release_saved();
    for (size_t e = 0; e < kMaxArgs; ++e) {
      Node* next = n->next(e).get();
      if (next == nullptr) continue;
      if (!grads[e].defined()) {
        throw Error(std::string("autograd: ") + n->name() + " gave no gradient for its argument " +
                    std::to_string(e) + ", which needs one");
      }
      Tensor& buffer = s.buffers[static_cast<size_t>(next->slot)];
      if (!buffer.defined()) {
        buffer = std::move(grads[e]);
      } else {
        NoGradGuard no_grad;
        buffer = ops::add(buffer, grads[e], 1.0);  // two consumers of one tensor: their gradients add up
      }
      if (--next->pending == 0) {
        ready.push_back(next);
        std::push_heap(ready.begin(), ready.end(), runs_later);
      }
    }
  }
  return record;
}

}  // namespace strata::autograd
