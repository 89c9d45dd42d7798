// The non-template half of the Autograd key (layers/dispatch/autograd.h): the recorded node.
#include "layers/dispatch/autograd.h"

namespace strata {

void RecordedNode::save(const Tensor& t) {
  // An absent optional input (a bias) is nothing to save; more than the array holds is a declaration
  // error, caught by the tests of every operator's Autograd kernel.
  if (!t.defined()) return;
  if (count_ == saved_.size()) throw Error(std::string(name_) + ": saves more than 4 tensors");
  saved_[count_++] = t;
}

namespace autograd_detail {

std::shared_ptr<RecordedNode> make_node(const BackwardDecl& decl) { return std::make_shared<RecordedNode>(decl.node); }

Tensor attach(Tensor out, const BackwardDecl& decl, std::shared_ptr<RecordedNode> node) {
  if (decl.saves_result) node->save(out);
  out.set_requires_grad(true);
  out.set_grad_fn(std::move(node));
  return out;
}

}  // namespace autograd_detail
}  // namespace strata
