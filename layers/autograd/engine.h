// The autograd engine: runs a backward pass over the graph the Autograd key recorded (Note [The autograd
// graph] in layers/dispatch/autograd.h). From the root's node it counts each node's consumers, then runs
// ready nodes newest first (reverse topological order), each formula with grad mode off so its gradient
// ops are plain dispatcher calls; gradients meeting at a node are added (ops::add), leaves' gradients go
// to their AccumulateGrad node, and each node drops what it saved once it ran. docs/autograd.md.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "lib/tensor.h"

namespace strata::autograd {

// One backward pass as the walk took it.
struct BackwardRecord {
  std::vector<const char*> order;  // node names in the order they ran ("SumBackward", "AddmmBackward", ...)
  std::string path() const;        // "SumBackward > AddmmBackward > AccumulateGrad > ..."
};

struct BackwardOptions {
  // Called before each node runs, with its position in the walk and its name: a caller that traces tags
  // the node's spans with an op id of its own here (the node's zone opens right after).
  void (*before_node)(void* context, size_t step, const char* name) = nullptr;
  void* context = nullptr;
  // Keep what nodes saved, so that another backward pass can run through the same graph.
  bool retain_graph = false;
};

// Runs backward from `root`. `grad` is the gradient of the root; left undefined it is ones, which only a
// one-element root may take (PyTorch: "grad can be implicitly created only for scalar outputs").
// Throws UsageError for a root that does not require grad, a gradient of the wrong shape, or a second
// pass through nodes that already freed what they saved.
BackwardRecord backward(const Tensor& root, const Tensor& grad = Tensor(), const BackwardOptions& options = {});

}  // namespace strata::autograd
