#include "layers/ops/copy_slices.h"

#include <string>

#include "layers/ops/operators.h"

namespace strata::ops {

namespace {

std::string described(const Tensor& t) {
  return "[" + std::string(dtype_name(t.dtype())) + " [" + t.sizes().str() + "] " + t.device().str() + "]";
}

// Whether the tensor addresses some element twice: a dim it repeats (stride 0 over more than one element,
// what expand makes; strata's other views never overlap).
bool repeats_elements(const Tensor& t) {
  for (int i = 0; i < t.dim(); ++i)
    if (t.stride(i) == 0 && t.size(i) > 1) return true;
  return false;
}

// How many elements of storage a tensor spans from its first element (its layout's extent).
int64_t span_of(const Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int i = 0; i < t.dim(); ++i) last += (t.size(i) - 1) * t.stride(i);
  return last + 1;
}

// Zeros laid out as `base`'s memory from its first element: a region given by storage geometry relative
// to the base's first element (a view's) is that region of it. For a contiguous base that is zeros of its
// shape; any other base's are one dim, its span. ones_like reads only the header's shape and dtype.
Tensor zeros_laid_out_as(const Tensor& base) {
  if (base.is_contiguous()) return ops::mul(ops::ones_like(base), 0.0);
  return ops::mul(ops::ones_like(base.as_strided(Shape{span_of(base)}, Shape{1}, base.storage_offset())), 0.0);
}

// A gradient laid out as the base's memory (zeros_laid_out_as's layout) as a tensor of the base's shape:
// itself for a contiguous base, a contiguous copy of the base's layout over it for any other.
Tensor read_as_base(const Tensor& laid_out, const Tensor& base) {
  if (base.is_contiguous()) return laid_out;
  return ops::contiguous(laid_out.as_strided(base.sizes(), base.strides(), laid_out.storage_offset()));
}

// AsStridedBackward: a view's grad_fn regenerated over its base's history (Note [Views and their base's
// history] in lib/tensor.h). Its gradient for the base is the view's gradient written into zeros laid out
// as the base's storage, where the view lies, read back in the base's shape (for a contiguous base, the
// layout is the base's own); a dim the view repeats (expand) is one element of the base, so the gradient
// is summed over it first, as PyTorch's as_strided_backward sums overlapping elements.
class AsStridedBackward final : public Node {
 public:
  AsStridedBackward(const Tensor& base, const Tensor& view)
      : Node(autograd_detail::next_sequence_nr()),
        base_(base.without_autograd()),
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
    GradList out;
    out[0] = read_as_base(ops::as_strided_scatter(zeros_laid_out_as(base_), g, sizes, strides_, offset_), base_);
    return out;
  }

 private:
  // The base's header without its identity: its layout, dtype and device (its values may have changed
  // since; they are not read). It keeps the base's storage alive with the graph, as the node did before.
  Tensor base_;
  Shape sizes_, strides_;
  int64_t offset_;
};

}  // namespace

CopySlices::CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<RecordedNode> op_node)
    : Node(autograd_detail::next_sequence_nr()),
      base_(base.without_autograd()),
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
  // The base's gradient laid out as the base's storage: the view's geometry, relative to the base's first
  // element, addresses its region in it. For a contiguous base that is the gradient itself as a
  // contiguous tensor (a call only when it is not one already); any other base's gradient is written into
  // zeros over the base's span first, and read back in the base's shape at the end.
  const Tensor g = base_.is_contiguous() ? ops::contiguous(grad)
                                         : ops::as_strided_scatter(zeros_laid_out_as(base_), ops::contiguous(grad),
                                                                   base_.sizes(), base_.strides(), 0);
  const Tensor region = ops::contiguous(g.as_strided(view_sizes_, view_strides_, g.storage_offset() + view_offset_));
  GradList op_grads = op_node_->apply(region);
  GradList out;
  if (next(0) != nullptr) {
    const Tensor written = ops::as_strided_scatter(g, op_grads[0], view_sizes_, view_strides_, view_offset_);
    out[0] = read_as_base(written, base_);
  }
  for (size_t i = 1; i < kMaxArgs; ++i)
    if (next(i) != nullptr) out[i] = std::move(op_grads[i]);
  return out;
}

std::string copy_slices_refusal(const char* op, const Tensor& view) {
  const std::string what = std::string(op) + " on " + described(view);
  // torch's check order (check_inplace): the view's creation mode, then its base being a leaf; the
  // repeated-element check is its kernel's, after both.
  if (view.is_no_grad_view()) {
    return "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that "
           "this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both "
           "the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
           "tracked) or both outside (if you want the inplace to be tracked). (" + what + ")";
  }
  const Tensor base = view.view_base();
  if (!base.defined()) {
    return std::string(op) + "(): self " + described(view) + " is a view of a tensor saved for backward, which "
           "keeps no autograd identity, so there is no base whose history the write would change; write into "
           "a copy (strata.to_copy(v))";
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
  if (repeats_elements(base)) {
    return "unsupported operation: more than one element of the written-to tensor refers to a single memory "
           "location. Please clone() the tensor before performing the operation. (" + what + ", a view of " +
           described(base) + ", which has a stride-0 dim)";
  }
  return {};
}

std::shared_ptr<GradNode> regenerate_view_grad_fn(const Tensor& view, const Tensor& base) {
  if (repeats_elements(base)) return nullptr;  // no layout to write the view's gradient into
  return std::make_shared<AsStridedBackward>(base, view);
}

}  // namespace strata::ops
