// The Autograd key: record the backward node an op needs (saving what PyTorch's MmBackward0 and friends
// save), with edges to the nodes of its inputs, redispatch below Autograd, and attach the node to the
// output. One mechanism for every operator: what an op records is its declaration's BackwardDecl and its
// backward formula (layers/ops/operators.h). The engine that walks these nodes is layers/autograd.
// See Note [The autograd graph].
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "layers/dispatch/dispatch.h"
#include "lib/grad_node.h"

namespace strata {

// Note [The autograd graph]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Every op that runs under the Autograd key creates one RecordedNode: its next edges point, per argument
// position, to the grad_fn of that input, or to the AccumulateGrad node of a leaf that requires grad, or
// nowhere (an int, a tensor that needs no gradient). The node saves the tensors its formula reads
// (BackwardDecl) and the op's non-tensor arguments (stride, alpha). Gradients are indexed by argument
// position throughout, so a formula, the edges and the saved inputs all say "argument i" the same way.
// Nodes are numbered in creation order (sequence_nr); the engine runs ready nodes newest first, as
// PyTorch's engine does, which makes the walk order deterministic. AccumulateGrad nodes are numbered
// highest so a leaf's gradient is stored as soon as it is complete.
//
// Note [Saved tensors and versions]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A saved tensor is kept with its storage's version at save time (Note [Version counter] in
// lib/storage.h; PyTorch's SavedVariable keeps saved_version_). input(i) and result(), the only way a
// formula reads what was saved, compare it with the version now, and a tensor written in place since
// (relu_ on the relu's output, add_ through a view of a saved input) makes backward throw a UsageError
// in PyTorch's words, naming the tensor, the node that made it (when it has one) and both versions,
// instead of computing a gradient from the changed values.
//
// Note [Freeing a long graph]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A graph is freed when its last tensor goes: the output's node, then every node only it kept alive.
// Left to the shared_ptr destructors that is one nested destructor call per node, and a chain of
// 250,000 ops (h = relu(h) in a loop) overflows the stack. ~Node frees iteratively instead, as
// PyTorch's deleteNode does: each node about to die first drops what it saved (a saved input holds the
// tensor's grad_fn, the same node as one of its edges: dropping it first leaves the edge as the only
// owner), then its edges that are the last reference to their node move onto a local stack; edges to
// nodes someone else still holds are only released, and so do the nodes it owns besides its edges
// (release_owned_nodes: CopySlices' wrapped op node, which shares its edges). The stack is popped one
// node at a time, so no destructor runs inside another more than one level deep.
inline constexpr size_t kMaxArgs = 7;           // conv2d: input, weight, bias, stride, padding, dilation, groups
using GradList = std::array<Tensor, kMaxArgs>;  // one gradient per argument position (undefined: none)

// The part of a node the engine sees: edges, ordering, and what running it means.
class Node : public GradNode {
 public:
  explicit Node(uint64_t sequence_nr) : sequence_nr_(sequence_nr) {}
  // Frees the nodes only this one keeps alive without recursing (Note [Freeing a long graph]).
  ~Node() override;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  uint64_t sequence_nr() const { return sequence_nr_; }
  const std::shared_ptr<Node>& next(size_t i) const { return next_[i]; }
  void set_next(size_t i, std::shared_ptr<Node> node) { next_[i] = std::move(node); }
  // The gradients of this node's inputs, given the gradient of its output. Runs with grad mode off.
  virtual GradList apply(const Tensor& grad) = 0;
  // Drops what the node saved (after the engine ran it); a later apply throws.
  virtual void release_saved() {}
  // Drops what the node saved because the node is being freed: no later apply, so nothing to refuse.
  virtual void release_for_free() {}
  // Hands over, while the node is being freed, the nodes it owns besides its edges (CopySlices' wrapped
  // op node): each that only it keeps alive goes onto `stack`, to be freed there without recursing.
  virtual void release_owned_nodes(std::vector<std::shared_ptr<Node>>& stack) { (void)stack; }

  // The engine's scratch while one backward pass runs: how many of this node's consumers are still
  // to deliver a gradient, and where its pending gradient sits (see layers/autograd/engine.cpp).
  uint32_t pending = 0;
  int32_t slot = -1;

 private:
  uint64_t sequence_nr_;
  std::array<std::shared_ptr<Node>, kMaxArgs> next_;
};

class RecordedNode;
// A backward formula: the node (its saved tensors and scalars, which inputs need a gradient) and the
// gradient of the output; returns the inputs' gradients by argument position. Every gradient op it
// calls is a dispatcher call (ops::gemm, ...), so it is traced like any other op.
using BackwardFormula = GradList (*)(const RecordedNode& node, const Tensor& grad);

// What the Autograd key records for an op: the node's name and what it saves.
struct BackwardDecl {
  const char* node;           // "MmBackward"
  uint32_t saved_inputs = 0;  // bit i: the i-th argument (a tensor) is saved
  bool saves_result = false;  // the output is saved (relu: the mask is where it is positive)
};

// A recorded node: its name, formula, the tensors it saved and the op's scalar arguments.
class RecordedNode final : public Node {
 public:
  RecordedNode(const char* name, const char* op, BackwardFormula formula);
  ~RecordedNode() override;
  const char* name() const override { return name_; }
  size_t num_saved() const override { return count_; }
  const char* op() const { return op_; }  // the forward op, for errors: "matmul"

  void save_input(size_t i, const Tensor& t);
  void save_result(const Tensor& t);
  void save_scalar(size_t i, double v) { scalars_[i] = v; }
  const Tensor& input(size_t i) const;  // throws once released
  // The sizes of tensor argument i at record time, kept for every tensor argument (saved or not): the
  // broadcasting ops' formulas sum a gradient back to an operand's shape (PyTorch's nodes keep
  // self_sym_sizes for the same reason) without keeping the operand alive.
  void save_input_sizes(size_t i, const Shape& sizes) { input_sizes_[i] = sizes; }
  const Shape& input_sizes(size_t i) const { return input_sizes_[i]; }
  // Its dtype, for the same reason: a promoted operand's gradient is cast back to it (Note [Type promotion]).
  void save_input_dtype(size_t i, DType dtype) { input_dtypes_[i] = dtype; }
  DType input_dtype(size_t i) const { return input_dtypes_[i]; }
  const Tensor& result() const;
  double scalar(size_t i) const { return scalars_[i]; }
  // The op's int[] argument i (permute's dims, conv2d's stride), for formulas that need it; int_list() is
  // the first, for ops that take one.
  void save_int_list(size_t i, const Shape& v) {
    int_lists_[i] = v;
    if (first_int_list_ > i) first_int_list_ = i;
  }
  const Shape& int_list(size_t i) const { return int_lists_[i]; }
  const Shape& int_list() const { return int_lists_[first_int_list_ < kMaxArgs ? first_int_list_ : 0]; }
  // Whether argument i gets a gradient: only inputs with an edge do (formulas skip the others' ops).
  bool needs_grad(size_t i) const { return next(i) != nullptr; }

  GradList apply(const Tensor& grad) override;
  void release_saved() override;
  void release_for_free() override;

  // Nodes alive in this process, for the leak tests (a node freed with its graph decrements it).
  static int64_t live_count();

 private:
  [[noreturn]] void throw_released() const;
  // Throws when tensor t, saved at version `saved`, was written in place since (Note [Saved tensors and versions]).
  void check_version(const Tensor& t, uint32_t saved, const char* made_by) const;

  const char* name_;
  const char* op_;
  BackwardFormula formula_;
  std::array<Tensor, kMaxArgs> inputs_;
  Tensor result_;
  std::array<uint32_t, kMaxArgs> input_versions_{};  // each saved tensor's version at save time
  std::array<const char*, kMaxArgs> input_makers_{};  // the name of each saved input's grad_fn then, or null
  uint32_t result_version_ = 0;
  std::array<double, kMaxArgs> scalars_{};
  std::array<Shape, kMaxArgs> input_sizes_{};
  std::array<DType, kMaxArgs> input_dtypes_{};
  std::array<Shape, kMaxArgs> int_lists_{};
  size_t first_int_list_ = kMaxArgs;
  size_t count_ = 0;
  bool released_ = false;
};

// The node a leaf's gradient flows into: stores it as the leaf's .grad, or adds it to what is there
// (ops::add, a dispatcher call), as PyTorch's AccumulateGrad does.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<AutogradMeta> meta);
  const char* name() const override { return "AccumulateGrad"; }
  size_t num_saved() const override { return 0; }
  GradList apply(const Tensor& grad) override;
  const std::shared_ptr<AutogradMeta>& meta() const { return meta_; }

 private:
  std::shared_ptr<AutogradMeta> meta_;
};

// The graph edge for a tensor argument: its grad_fn, a leaf's AccumulateGrad (found again or made), or
// null when it needs no gradient.
std::shared_ptr<Node> gradient_edge(const Tensor& t);

namespace autograd_detail {
uint64_t next_sequence_nr();
// The ops the engine adds with (AccumulateGrad, and gradients meeting at a node): ops::add, installed by
// layers/ops, because the dispatcher knows no operator.
using AddFn = Tensor (*)(const Tensor&, const Tensor&);
extern AddFn g_add;

// Saves the result if `decl` says so and attaches the node: the output requires grad.
Tensor attach(Tensor out, const BackwardDecl& decl, std::shared_ptr<RecordedNode> node);

template <typename T>
void record_arg(RecordedNode& node, const BackwardDecl&, size_t i, const T& v) {
  if constexpr (std::is_arithmetic_v<T>) node.save_scalar(i, static_cast<double>(v));
}
inline void record_arg(RecordedNode& node, const BackwardDecl&, size_t i, const Shape& list) { node.save_int_list(i, list); }
// A float? (rms_norm's eps): the number, or NaN for None (the formula resolves None as the kernel did).
inline void record_arg(RecordedNode& node, const BackwardDecl&, size_t i, const std::optional<double>& v) {
  node.save_scalar(i, v ? *v : std::numeric_limits<double>::quiet_NaN());
}
// Whether a view op's output is a header over the storage of tensor argument `t`: then it is a recorded
// view of its base (Note [Views and their base's history] in lib/tensor.h).
template <typename T>
bool shares_storage(const Tensor& out, const T& t) {
  if constexpr (std::is_same_v<T, Tensor>) {
    return t.defined() && out.storage() == t.storage();
  } else {
    return false;
  }
}
inline void record_arg(RecordedNode& node, const BackwardDecl& decl, size_t i, const Tensor& t) {
  node.set_next(i, gradient_edge(t));
  node.save_input_sizes(i, t.sizes());
  node.save_input_dtype(i, t.dtype());
  if ((decl.saved_inputs >> i) & 1u) node.save_input(i, t);
}
}  // namespace autograd_detail

// The Autograd kernel of operator `op` (its index) whose table type is Fn.
template <typename Fn, typename... Args>
Tensor record_backward(size_t op, const char* op_name, const BackwardDecl& decl, BackwardFormula formula,
                       DispatchKeySet ks, const Args&... args) {
  static_assert(sizeof...(Args) <= kMaxArgs, "more arguments than a node has edges");
  auto node = std::make_shared<RecordedNode>(decl.node, op_name, formula);
  size_t i = 0;
  (autograd_detail::record_arg(*node, decl, i++, args), ...);
  Tensor out = Dispatcher::instance().redispatch<Fn>(op, ks.remove(DispatchKey::kAutograd), args...);
  const bool recorded_view = out.is_view() && (autograd_detail::shares_storage(out, args) || ...);
  out = autograd_detail::attach(std::move(out), decl, std::move(node));
  if (recorded_view) [[unlikely]]
    out.set_view_base();
  return out;
}

}  // namespace strata
