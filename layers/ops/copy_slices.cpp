#include "layers/ops/copy_slices.h"

#include <string>

#include "layers/ops/operators.h"

namespace strata::ops {

namespace {

std::string described(const Tensor& t) {
  return "[" + std::string(dtype_name(t.dtype())) + " [" + t.sizes().str() + "] " + t.device().str() + "]";
}

// Whether the view addresses some element twice: a dim it repeats (stride 0 over more than one element,
// what expand makes; strata's other views never overlap).
bool repeats_elements(const Tensor& view) {
  for (int i = 0; i < view.dim(); ++i)
    if (view.stride(i) == 0 && view.size(i) > 1) return true;
  return false;
}

// AsStridedBackward: a view's grad_fn regenerated over its base's history (Note [Views and their base's
// history] in lib/tensor.h). Its gradient for the base is the view's gradient written into zeros of the
// base's shape where the view lies; a dim the view repeats (expand) is one element of the base, so the
// gradient is summed over it first, as PyTorch's as_strided_backward sums overlapping elements.
class AsStridedBackward final : public Node {
 public:
  AsStridedBackward(const Tensor& base, const Tensor& view)
      : Node(autograd_detail::next_sequence_nr()),
        base_shape_(base.without_autograd()),
        sizes_(view.sizes()),
        strides_(view.strides()),
        offset_(view.storage_offset() - base.storage_offset()) {
    set_next(0, gradient_edge(base));
  }
  const char* name() const override { return "AsStridedBackward"; }
  size_t num_saved() const override { return 0; }
  GradList apply(const Tensor& grad) override {
    Tensor g = grad;
    Shape repeated, sizes = sizes_;
    for (int i = 0; i < sizes.ndim; ++i) {
      if (strides_[i] == 0 && sizes[i] > 1) {
        repeated[repeated.ndim++] = i;
        sizes[i] = 1;
      }
    }
    if (repeated.ndim > 0) g = ops::sum_dim(g, repeated, true, std::nullopt);
    // Zeros of the base's shape: ones_like reads only the base's shape and dtype (its values may have
    // changed since; they are not read).
    const Tensor zeros = ops::mul(ops::ones_like(base_shape_), 0.0);
    GradList out;
    out[0] = ops::as_strided_scatter(zeros, g, sizes, strides_, offset_);
    return out;
  }

 private:
  Tensor base_shape_;  // the base's header without its identity: its shape, dtype and device
  Shape sizes_, strides_;
  int64_t offset_;
};

}  // namespace

CopySlices::CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<RecordedNode> op_node)
    : Node(autograd_detail::next_sequence_nr()),
      view_sizes_(view.sizes()),
      view_strides_(view.strides()),
      view_offset_(view.storage_offset() - base.storage_offset()),
      op_node_(std::move(op_node)) {
  // Edge 0 is the base's history before the write; the op node's edge 0 (the view's old grad_fn) is
  // replaced by the same edge, so that its formula computes self's gradient exactly when the base needs
  // one, and so that the op node holds no edge CopySlices does not: when a chain of CopySlices is freed,
  // release_owned_nodes puts each op node on the teardown's stack after CopySlices dropped its shares of
  // those edges, so no free recurses through the op nodes (Note [Freeing a long graph]).
  std::shared_ptr<Node> old_history = gradient_edge(base);
  op_node_->set_next(0, old_history);
  set_next(0, std::move(old_history));
  for (size_t i = 1; i < kMaxArgs; ++i) set_next(i, op_node_->next(i));
}

GradList CopySlices::apply(const Tensor& grad) {
  // The base's gradient as a contiguous tensor of its shape (a call only when it is not one already):
  // the view's geometry, relative to the base's first element, addresses the same region in it, since
  // the base is contiguous too (copy_slices_refusal).
  const Tensor g = ops::contiguous(grad);
  const Tensor region = ops::contiguous(g.as_strided(view_sizes_, view_strides_, g.storage_offset() + view_offset_));
  GradList op_grads = op_node_->apply(region);
  GradList out;
  if (next(0) != nullptr) out[0] = ops::as_strided_scatter(g, op_grads[0], view_sizes_, view_strides_, view_offset_);
  for (size_t i = 1; i < kMaxArgs; ++i)
    if (next(i) != nullptr) out[i] = std::move(op_grads[i]);
  return out;
}

std::string copy_slices_refusal(const char* op, const Tensor& view) {
  const std::string what = std::string(op) + " on " + described(view);
  const Tensor& base = view.view_base();
  if (!base.defined()) {
    return std::string(op) + "(): self " + described(view) +
           " is a view of another tensor's memory taken where autograd did not record it (under no_grad(), "
           "or of a tensor that did not require grad), so strata does not know the base whose history the "
           "write would change; PyTorch rebases the base onto CopySlices. Take the view from a tensor that "
           "requires grad with grad mode on, call " + op + " on the base, or write into a copy "
           "(strata.to_copy(v))";
  }
  if (base.requires_grad() && base.is_leaf()) {
    return "a view of a leaf Variable that requires grad is being used in an in-place operation. (" + what +
           "; under no_grad() it is allowed, as an optimizer's update is)";
  }
  if (repeats_elements(view)) {
    return "unsupported operation: more than one element of the written-to tensor refers to a single memory "
           "location. Please clone() the tensor before performing the operation. (" + what +
           ", a view with a stride-0 dim, as expand makes)";
  }
  if (!base.is_contiguous()) {
    return std::string(op) + "(): self " + described(view) + " is a view of a non-contiguous tensor " +
           described(base) + "; strata records an in-place write through a view (CopySlices) only for a "
           "contiguous base. Call " + op + " on a contiguous copy (strata.to_copy(base))";
  }
  return {};
}

std::shared_ptr<GradNode> regenerate_view_grad_fn(const Tensor& view, const Tensor& base) {
  if (!base.is_contiguous()) return nullptr;
  return std::make_shared<AsStridedBackward>(base, view);
}

}  // namespace strata::ops
