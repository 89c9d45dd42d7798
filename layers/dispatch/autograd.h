// The Autograd key: record the backward node an op would need (saving what PyTorch's MmBackward0 and
// friends save), redispatch below Autograd, and attach the node to the output. One mechanism for every
// operator: what an op records is its declaration's BackwardDecl (layers/ops/operators.h). strata does not
// run backward passes yet; what it measures is the forward-time cost of recording, which is what a
// `requires_grad=True` forward pays in PyTorch.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "layers/dispatch/dispatch.h"
#include "lib/grad_node.h"

namespace strata {

// What the Autograd key records for an op: the node's name and what it saves.
struct BackwardDecl {
  const char* node;           // "MmBackward"
  uint32_t saved_inputs = 0;  // bit i: the i-th argument (a tensor) is saved
  bool saves_result = false;  // the output is saved (relu: the mask is where it is positive)
};

// A recorded node: its name and the tensors it saved (at most 4: inputs of a conv, or a result).
class RecordedNode final : public GradNode {
 public:
  explicit RecordedNode(const char* name) : name_(name) {}
  const char* name() const override { return name_; }
  size_t num_saved() const override { return count_; }
  void save(const Tensor& t);

 private:
  const char* name_;
  std::array<Tensor, 4> saved_;
  size_t count_ = 0;
};

namespace autograd_detail {
// The node, with the inputs `decl` says to save; layers/dispatch/autograd.cpp.
std::shared_ptr<RecordedNode> make_node(const BackwardDecl& decl);
// Saves the result if `decl` says so and attaches the node: the output requires grad.
Tensor attach(Tensor out, const BackwardDecl& decl, std::shared_ptr<RecordedNode> node);

template <typename T>
void save_input(RecordedNode&, const BackwardDecl&, size_t, const T&) {}  // ints and floats are not saved
inline void save_input(RecordedNode& node, const BackwardDecl& decl, size_t i, const Tensor& t) {
  if ((decl.saved_inputs >> i) & 1u) node.save(t);
}
}  // namespace autograd_detail

// The Autograd kernel of operator `op` (its index) whose table type is Fn.
template <typename Fn, typename... Args>
Tensor record_backward(size_t op, const BackwardDecl& decl, DispatchKeySet ks, const Args&... args) {
  std::shared_ptr<RecordedNode> node = autograd_detail::make_node(decl);
  size_t i = 0;
  (autograd_detail::save_input(*node, decl, i++, args), ...);
  Tensor out = Dispatcher::instance().redispatch<Fn>(op, ks.remove(DispatchKey::kAutograd), args...);
  return autograd_detail::attach(std::move(out), decl, std::move(node));
}

}  // namespace strata
