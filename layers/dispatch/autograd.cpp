// The non-template half of the Autograd key (layers/dispatch/autograd.h): nodes, edges, AccumulateGrad.
#include "layers/dispatch/autograd.h"

#include <atomic>
#include <limits>
#include <string>
#include <vector>

namespace strata {

namespace {
std::atomic<int64_t> g_live_nodes{0};
}  // namespace

namespace autograd_detail {

uint64_t next_sequence_nr() {
  // Per thread, as PyTorch's: a graph is recorded by one thread, and a plain counter costs nothing.
  static thread_local uint64_t next = 0;
  return next++;
}

AddFn g_add = nullptr;

Tensor attach(Tensor out, const BackwardDecl& decl, std::shared_ptr<RecordedNode> node) {
  // The result is saved without its identity (without_autograd): a node holding its own output's
  // grad_fn would be a reference cycle, and the graph would never be freed (PyTorch's SavedVariable
  // stores an output without its grad_fn for the same reason).
  if (decl.saves_result) node->save_result(out);
  // A fresh output's identity is its alone and is used as it is; one shared with another tensor (an op
  // that returned its input's header: contiguous() of a contiguous tensor) or absent (a view) is replaced
  // by a new one, so that recording this node never changes another tensor's history.
  if (out.autograd_meta() != nullptr && out.autograd_meta().use_count() != 1) out = out.without_identity();
  out.set_grad_fn(std::move(node));
  out.set_requires_grad(true);
  return out;
}

}  // namespace autograd_detail

namespace {
// Moves each edge of `n` that is the last owner of its node onto `stack`, and releases the others; then
// the nodes `n` owns besides its edges, the same way.
void take_sole_edges(Node& n, std::vector<std::shared_ptr<Node>>& stack) {
  for (size_t i = 0; i < kMaxArgs; ++i) {
    std::shared_ptr<Node> edge = n.next(i);
    n.set_next(i, nullptr);
    if (edge != nullptr && edge.use_count() == 1) stack.push_back(std::move(edge));
  }
  n.release_owned_nodes(stack);
}
}  // namespace

Node::~Node() {
  // See Note [Freeing a long graph]. A derived node's saved tensors are gone already (its members die
  // before this body runs); its edges are not.
  std::vector<std::shared_ptr<Node>> stack;
  take_sole_edges(*this, stack);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    n->release_for_free();
    take_sole_edges(*n, stack);
  }  // n, the last owner, frees its node here: with no edges left, its destructor does not recurse
}

RecordedNode::RecordedNode(const char* name, const char* op, BackwardFormula formula)
    : Node(autograd_detail::next_sequence_nr()), name_(name), op_(op), formula_(formula) {
  g_live_nodes.fetch_add(1, std::memory_order_relaxed);
}

RecordedNode::~RecordedNode() { g_live_nodes.fetch_sub(1, std::memory_order_relaxed); }

int64_t RecordedNode::live_count() { return g_live_nodes.load(std::memory_order_relaxed); }

void RecordedNode::save_input(size_t i, const Tensor& t) {
  // An absent optional input (a bias) is nothing to save.
  if (!t.defined()) return;
  // Its values and version, not its identity (Note [Autograd identity]): a saved input that kept its
  // grad_fn could close a cycle once an in-place op rebases it onto a node that reaches this one. The
  // name of the node that made it is kept for the version error.
  inputs_[i] = t.without_autograd();
  const std::shared_ptr<GradNode> maker = t.grad_fn();
  input_makers_[i] = maker != nullptr ? maker->name() : nullptr;
  input_versions_[i] = t.storage()->version();
  ++count_;
}

void RecordedNode::save_result(const Tensor& t) {
  result_ = t.without_autograd();
  result_version_ = t.storage()->version();
  ++count_;
}

void RecordedNode::throw_released() const {
  throw UsageError(std::string("Trying to backward through the graph a second time: ") + name_ + " (recorded by " +
                   op_ + ") already freed the tensors it saved when the first backward pass ran through it. "
                   "Run the forward again to record a new graph.");
}

void RecordedNode::check_version(const Tensor& t, uint32_t saved, const char* made_by) const {
  if (!t.defined()) return;
  const uint32_t now = t.storage()->version();
  if (now == saved) [[likely]]
    return;
  // PyTorch's words (torch/csrc/autograd/saved_variable.cpp), with strata's tensor description and the
  // node that needed the tensor added to its hint.
  std::string what = "[" + std::string(dtype_name(t.dtype())) + " [" + t.sizes().str() + "] " + t.device().str() + "]";
  if (made_by != nullptr) what += std::string(", which is output 0 of ") + made_by + ",";
  throw UsageError("one of the variables needed for gradient computation has been modified by an inplace "
                   "operation: " + what + " is at version " + std::to_string(now) + "; expected version " +
                   std::to_string(saved) + " instead. Hint: " + name_ + " (recorded by " + op_ +
                   ") saved it for backward, and an in-place op changed it after that; use the out-of-place "
                   "op (relu, not relu_) there instead.");
}

const Tensor& RecordedNode::input(size_t i) const {
  if (released_) throw_released();
  const Tensor& t = inputs_[i];
  if (t.defined()) check_version(t, input_versions_[i], input_makers_[i]);
  return t;
}

const Tensor& RecordedNode::result() const {
  if (released_) throw_released();
  check_version(result_, result_version_, name_);  // saved without its identity: made by this very node
  return result_;
}

GradList RecordedNode::apply(const Tensor& grad) {
  if (released_) throw_released();
  if (formula_ == nullptr) {
    throw UnavailableError(std::string(name_) + ": strata has no derivative for " + op_ +
                           " (it is a gradient op itself; higher-order gradients are not supported)");
  }
  return formula_(*this, grad);
}

void RecordedNode::release_saved() {
  if (count_ == 0) return;  // saved nothing: running it again needs nothing freed (PyTorch's AddBackward)
  for (Tensor& t : inputs_) t = Tensor();
  result_ = Tensor();
  count_ = 0;
  released_ = true;
}

void RecordedNode::release_for_free() {
  for (Tensor& t : inputs_) t = Tensor();
  result_ = Tensor();
}

AccumulateGrad::AccumulateGrad(std::shared_ptr<AutogradMeta> meta)
    : Node(std::numeric_limits<uint64_t>::max()), meta_(std::move(meta)) {}

GradList AccumulateGrad::apply(const Tensor& grad) {
  // The first gradient is stored as it is: every gradient op returns a fresh tensor and none writes in
  // place, so sharing it with another leaf (AddBackward passes one gradient to both inputs) is safe.
  if (!meta_->grad.defined()) {
    meta_->grad = grad;
  } else {
    meta_->grad = autograd_detail::g_add(meta_->grad, grad);
  }
  return {};
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return nullptr;
  if (std::shared_ptr<GradNode> fn = t.grad_fn()) return std::static_pointer_cast<Node>(std::move(fn));
  // A leaf that requires grad has an identity, except a view autograd did not record whose base requires
  // grad and whose memory was not written since it was taken: no node, no edge, as torch's gradient
  // stops there too (Note [Views and their base's history]).
  const std::shared_ptr<AutogradMeta>& meta = t.autograd_meta();
  if (meta == nullptr) return nullptr;
  if (std::shared_ptr<GradNode> existing = meta->accumulator.lock()) return std::static_pointer_cast<Node>(existing);
  auto node = std::make_shared<AccumulateGrad>(meta);
  meta->accumulator = node;
  return node;
}

}  // namespace strata
