// In-place ops on views with a history: PyTorch's CopySlices node, which an in-place op on a view makes
// the base's new grad_fn, and the AsStridedBackward node a view regenerates when its base's history
// changed (Note [Views and their base's history] in lib/tensor.h). Called from the in-place ops' Autograd
// kernels (register_kernels.cpp); their formulas are dispatcher calls like every backward formula's.
#pragma once

#include <memory>

#include "layers/dispatch/autograd.h"
#include "lib/tensor.h"

namespace strata::ops {

// Note [CopySlices]
// ~~~~~~~~~~~~~~~~~
// v = b[1:3]; v.relu_() writes part of b, so b's history must change, not only v's: as PyTorch does, the
// in-place op's own node (ReluBackward, recorded as for a tensor that is not a view) is wrapped in a
// CopySlices node that becomes b's grad_fn. It remembers where the view lies in the base (sizes, strides
// and offset relative to the base's first element: the view's as_strided geometry) and has the wrapped
// node's edges, except edge 0, which is b's history before the write. Its backward, given the gradient g
// of b:
//   - the view's region of g goes through the wrapped node's formula (the in-place op's backward);
//   - b's old history gets g with that region replaced by the formula's gradient for self
//     (as_strided_scatter: the region was overwritten, so the old values reach the old history only
//     through the op), and every element outside the region as it is;
//   - the other operands (add_'s and mul_'s `other`) get the formula's gradients for them.
// Afterwards v's grad_fn is regenerated (AsStridedBackward over CopySlices) the next time it is read.
// The view need not have been recorded by the Autograd key (w[0].add_(c) with w needing no grad): every
// view knows its base (Note [Views and their base's history]). A base that is not contiguous (a
// transposed or strided leaf) gets its gradient laid out as its storage first, where the view's
// geometry addresses the region as it does in the base's memory, and read back in its shape at the end.
// Refused in PyTorch's words, as torch refuses them: a view made with grad mode off, a view of a leaf
// that requires grad, and a view or a base that addresses an element twice (expand).
class CopySlices final : public Node {
 public:
  // `op_node` is the in-place op's node, recorded with `view` as self; it becomes base's grad_fn's payload.
  CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<RecordedNode> op_node);
  const char* name() const override { return "CopySlices"; }
  size_t num_saved() const override { return op_node_->num_saved(); }
  GradList apply(const Tensor& grad) override;
  void release_saved() override { op_node_->release_saved(); }
  void release_for_free() override { op_node_->release_for_free(); }
  // The op node shares this node's edges: freed on the teardown's stack, not inside this node's
  // destructor, where its edges' nodes would each free the next chain link one call deeper (Note
  // [Freeing a long graph]).
  void release_owned_nodes(std::vector<std::shared_ptr<Node>>& stack) override {
    if (op_node_.use_count() == 1) stack.push_back(std::move(op_node_));
    op_node_.reset();
  }

 private:
  Tensor base_;  // the base's header without its identity: its layout, dtype and device
  Shape view_sizes_, view_strides_;
  int64_t view_offset_;  // from the base's first element, in elements
  std::shared_ptr<RecordedNode> op_node_;
};

// Why an in-place op on `view` (a view, or a tensor some operand needs a gradient through) cannot be
// recorded; empty when CopySlices can record it. `op` names the in-place op in the message.
std::string copy_slices_refusal(const char* op, const Tensor& view);

// The grad_fn a view regenerates over its base's history now (AsStridedBackward: the view's gradient
// written into zeros laid out as the base, summed first over dims the view repeats), or null where the
// base addresses an element twice and has no such layout: installed as tensor_detail::g_view_grad_fn.
std::shared_ptr<GradNode> regenerate_view_grad_fn(const Tensor& view, const Tensor& base);

}  // namespace strata::ops
