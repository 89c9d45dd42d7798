// Tensor: shared Storage plus a view (sizes, strides, offset), a dtype and a device.
// At most 4 dimensions (NCHW is the largest strata needs), kept inline so that creating an output tensor
// costs one allocation for the storage and nothing for its metadata.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "lib/device.h"
#include "lib/dtype.h"
#include "lib/grad_node.h"
#include "lib/storage.h"

namespace strata {

struct AutogradMeta;

struct Shape {
  static constexpr int kMaxDims = 4;
  std::array<int64_t, kMaxDims> dims{};
  int ndim = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> list);
  int64_t operator[](int i) const { return dims[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims[static_cast<size_t>(i)]; }
  int64_t numel() const;
  std::string str() const;  // "1024x1024"
  friend bool operator==(const Shape& a, const Shape& b);
};

// Note [One byte count]
// ~~~~~~~~~~~~~~~~~~~~~
// Every size in bytes is one overflow-checked product before anything is allocated (c10's
// safe_multiplies_u64): the elements of `sizes` times `element`, multiplied in 128 bits and saturated at
// 2^64, so no product wraps to a small number. Tensor::empty refuses past kMaxTensorBytes, and the
// frontend's memory checks (required_bytes, peak_bytes) sum the same counts. A wrapped count was a small
// allocation written past its end: ones(1).expand(2**62).contiguous() asked for 2^64 bytes of f32, which
// wrapped to 0.
inline constexpr uint64_t kMaxTensorBytes = static_cast<uint64_t>(INT64_MAX);  // byte offsets are int64
unsigned __int128 byte_count(std::span<const int64_t> sizes, size_t element);
// byte_count of `sizes` in `dtype`, or a UsageError naming the size, the bytes and the limit past
// kMaxTensorBytes. `sizes` must be non-negative.
size_t checked_nbytes(const Shape& sizes, DType dtype);

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised memory from the device's allocator. Refuses a size whose bytes pass kMaxTensorBytes
  // (Note [One byte count]); whether the memory is there is the caller's check (the frontend's) or the
  // allocator's.
  static Tensor empty(const Shape& sizes, DType dtype, Device device);
  // A contiguous tensor over memory someone else owns (the Python package's zero-copy from_numpy): the
  // storage's deleter releases it. The storage must hold at least sizes.numel() elements.
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& sizes, DType dtype);
  // The same with the strides given (numpy's non-contiguous array): a tensor of its own, not a view; the
  // caller has checked that every element it addresses lies inside the storage.
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& sizes, const Shape& strides, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t stride(int i) const { return strides_[i]; }
  // Where element [0,...,0] sits in the storage, in elements (a view's narrow/select/slice moves it).
  int64_t storage_offset() const { return offset_; }
  // The memory this tensor is a view of; two views of one tensor return the same Storage.
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  int dim() const { return sizes_.ndim; }
  int64_t size(int i) const { return sizes_[i]; }
  int64_t numel() const { return sizes_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  // Kept with the strides (Note [Contiguity kept with the strides]): a kernel asks it several times a call.
  bool is_contiguous() const { return contiguous_; }

  void* data_ptr() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_ptr());
  }

  // Autograd state lives on the tensor's identity, shared by every handle (Note [Autograd identity]).
  bool requires_grad() const;
  // On the shared identity: a leaf (no grad_fn) that requires grad accumulates its gradient there, seen
  // through every copy. A handle with no identity yet (a view) gets one.
  void set_requires_grad(bool value);
  // By value: a view's node may be made by this call (Note [Views and their base's history]), and a copy
  // taken under the view's lock is what makes two threads reading one stale view's grad_fn safe.
  std::shared_ptr<GradNode> grad_fn() const;
  // Which output of grad_fn this tensor is (always 0: every strata op has one output; kept because the
  // identity is PyTorch's, and its error messages say "output 0 of").
  uint32_t output_nr() const;
  void set_grad_fn(std::shared_ptr<GradNode> node);
  bool is_leaf() const;
  // An in-place op's rebase (Note [Autograd identity]): the tensor's history becomes `node`, output 0,
  // and it requires grad, seen through every handle. const like set_grad: the header does not change.
  void rebase_history(std::shared_ptr<GradNode> node) const;
  // The gradient accumulated into this leaf by backward passes (undefined until the first one).
  Tensor grad() const;
  void set_grad(Tensor grad) const;  // on the shared AutogradMeta: const like the storage it stands beside
  const std::shared_ptr<AutogradMeta>& autograd_meta() const { return meta_; }
  // The same header with no autograd identity and no base: what a backward node saves (its values and
  // version, not its history: a saved tensor that kept its identity, or its base's, would keep the node
  // alive through a grad_fn, a cycle once an in-place op rebases that identity onto the node).
  Tensor without_autograd() const;
  // The same header, its identity dropped and its base kept: what the Autograd key attaches an op's node
  // to when the op returned a header whose identity another tensor shares.
  Tensor without_identity() const;
  // Whether this header was made by as_strided (a view op), so that it shares its memory with another
  // tensor, its base, and has an identity of its own only once autograd attaches one.
  bool is_view() const { return is_view_; }
  // Whether this view (or the view it was taken from) was made with grad mode off: torch refuses an
  // in-place op on it that autograd would record (Note [Views and their base's history]).
  bool is_no_grad_view() const { return no_grad_view_; }
  // torch's detach(): the same memory and layout as a tensor of its own (not a view: an in-place op on
  // it changes its own history, never this tensor's), with a fresh identity that requires no grad.
  Tensor detach() const;

  // Note [Views share storage]
  // A view of this tensor's memory with its own sizes, strides (in elements) and storage offset: the same
  // Storage, no data moved, the cost of one tensor header (PyTorch's as_strided). The caller (the view
  // operators in lib/views.h) has checked that every element it can address lies inside the storage.
  // The view carries no autograd state of its own (the Autograd key attaches the view's node to it); it
  // keeps its base's identity, a shared_ptr copy and no allocation (Note [Views and their base's history]).
  Tensor as_strided(const Shape& sizes, const Shape& strides, int64_t storage_offset) const;

  // A contiguous copy on another device (host <-> device through the device's allocator).
  Tensor to(Device device) const;

  std::string str() const;  // "[1024x1024] f32 cpu"

  // A view's base (Note [Views and their base's history]): the tensor, never itself a view, whose memory
  // this view addresses, sharing its identity; undefined for a tensor that is not a view, and for a view
  // of a saved copy (which has no identity).
  Tensor view_base() const;
  // Marks this view's identity, just attached by the Autograd key, as a recorded view of its base, whose
  // grad_fn is regenerated when the base's memory is written (the view's base is its header's).
  void set_view_base() const;

 private:
  // as_strided's header, every member initialised once (no zeroing first, no assignment of shared_ptrs
  // that are null): the whole cost of a view is this constructor.
  struct ViewOf {};
  Tensor(ViewOf, const Tensor& base, const Shape& sizes, const Shape& strides, int64_t storage_offset);

  // A recorded view's grad_fn, regenerated over its base's history first if its storage was written since
  // it was set; under the view's lock.
  std::shared_ptr<GradNode> recorded_view_grad_fn() const;
  // A view autograd did not record: its node over its base's history, made now, or null.
  std::shared_ptr<GradNode> unrecorded_view_grad_fn() const;
  // Whether a view autograd did not record requires grad now: whenever its base does, as torch's view
  // (DifferentiableViewMeta::requires_grad) does.
  bool unrecorded_view_requires_grad() const;
  // A new identity for this header, which records where the tensor lies (what a view's base is rebuilt from).
  std::shared_ptr<AutogradMeta> new_identity() const;

  std::shared_ptr<Storage> storage_;
  Shape sizes_;
  Shape strides_;
  int64_t offset_ = 0;
  // A view's storage version when it was taken: an unrecorded view has a node once it has moved.
  // (The small fields are ordered to fill one 8-byte word with it: the header is copied often.)
  uint32_t view_version_ = 0;
  DType dtype_ = DType::kF32;
  bool is_view_ = false;
  bool no_grad_view_ = false;
  bool contiguous_ = true;  // of sizes_ and strides_: set wherever they are
  Device device_ = kCPU;
  // The identity (Note [Autograd identity]): every tensor made by empty/from_storage has one from birth,
  // a view gets its own when autograd attaches a node, a saved copy has none.
  std::shared_ptr<AutogradMeta> meta_;
  // A view's base's identity (its tensor never a view): set by as_strided, null for every other tensor.
  std::shared_ptr<AutogradMeta> base_meta_;
};

// Note [Autograd identity]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A Tensor is a header (storage, sizes, strides, offset), copied freely: into a boxed argument, into the
// Python object, into a container. What autograd knows about a tensor is not per header but per tensor,
// as PyTorch keeps it on the TensorImpl every handle points to: whether it requires grad, the node that
// made it (grad_fn) and which output it is, and for a leaf its .grad and its AccumulateGrad node. An
// in-place op changes that history (y.relu_() makes y's grad_fn ReluBackward, whose edge is y's old node),
// and the change must be seen through every handle of y, so it lives in this shared block. Every tensor a
// kernel or a caller makes (empty, from_storage) gets one when it is made; a view (as_strided) is a new
// tensor over the same memory and gets its own when the Autograd key attaches the view's node; the copy a
// backward node saves has none (without_autograd). strata has no TensorImpl, so the block is allocated
// beside the storage rather than inside one object with it: one small allocation per tensor made.
// What a recorded view knows beyond its identity: its storage's version when its grad_fn was last set,
// and the lock that makes regenerating it safe when two threads read it at once (PyTorch's
// DifferentiableViewMeta::mutex_). Its base is its header's (base_meta_).
struct ViewInfo {
  std::mutex lock;
  uint32_t version = 0;
};

// Where a tensor lies in its storage: recorded on an identity when it is made, so that a view, which
// keeps only its base's identity, can rebuild its base's header.
struct Geometry {
  Shape sizes, strides;
  int64_t offset = 0;
};

struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<GradNode> grad_fn;
  uint32_t output_nr = 0;
  Tensor grad;
  // The AccumulateGrad node graphs recorded from this leaf point to (weak: the graph owns the node, the
  // leaf only finds it again, so two uses of one leaf in a graph meet in one node).
  std::weak_ptr<GradNode> accumulator;
  // Set only for a recorded view (Note [Views and their base's history]): behind a pointer, so that the
  // identity every tensor is made with stays as small and as cheap to make as before.
  std::unique_ptr<ViewInfo> view;
  Geometry geometry;
};

// Note [Views and their base's history]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every view knows its base (PyTorch's DifferentiableViewMeta): as_strided copies the base's identity
// into the view's header (base_meta_; a view of a view gets the first view's base, never a view), a
// shared_ptr copy that allocates nothing, and the identity records where its tensor lies (Geometry), so
// view_base() rebuilds the base's header from it. That is what lets an in-place op on any view rebase
// the base's history onto a CopySlices node (layers/ops/copy_slices.h), whether or not the Autograd key
// recorded the view: `w[0].add_(c)` with w needing no grad makes w's grad_fn CopySlices, as in torch. A
// view made with grad mode off is marked (no_grad_view_), since torch refuses to record a write through
// one ("A view was created in no_grad mode ...").
// After such a write, every view of that base has a stale grad_fn, one that points at the base's history
// before the write. As PyTorch does, it is regenerated lazily, when next read, whenever the storage's
// version (Note [Version counter]) has moved since it was set: an AsStridedBackward node whose edge is
// the base's history now. Lazily, because a base does not know its views (a list of them would cost
// every view a registration and every write a walk); the version tells a reader exactly when its node
// may be stale, and reading grad_fn is the only way anything (the Autograd key, the engine, Python's
// grad_fn) reaches it. A recorded view keeps its node on its identity and regenerates it under its lock
// (ViewInfo), so two threads reading one stale view get one node; a view the Autograd key did not record
// has no identity to keep a node on: it requires grad whenever its base does (torch's rule), has a node
// exactly when torch's would have regenerated one (the memory was written since it was taken:
// view_version_), and each read makes that node afresh. So after `v = b[1:3]; v.relu_()`, b.grad_fn is CopySlices and v.grad_fn is
// AsStridedBackward, as in torch. The node is made by layers/ops, which lib cannot name: it installs
// the maker here (tensor_detail::g_view_grad_fn).
namespace tensor_detail {
// Makes the regenerated grad_fn of `view` over `base`'s history; null leaves the view's node as it is.
using ViewGradFnMaker = std::shared_ptr<GradNode> (*)(const Tensor& view, const Tensor& base);
inline ViewGradFnMaker g_view_grad_fn = nullptr;
// Grad mode (torch.no_grad), this thread's: the dispatcher reads it to leave the Autograd key out, and
// as_strided to mark a view made without it. Here, in lib, because a view's header is made here.
inline thread_local bool t_grad_enabled = true;
}  // namespace tensor_detail

inline bool Tensor::requires_grad() const {
  if (meta_ != nullptr) [[likely]]
    return meta_->requires_grad;
  return is_view_ && unrecorded_view_requires_grad();  // Note [Views and their base's history]
}
inline std::shared_ptr<GradNode> Tensor::grad_fn() const {
  if (meta_ == nullptr) return is_view_ ? unrecorded_view_grad_fn() : nullptr;
  if (meta_->view != nullptr) [[unlikely]]
    return recorded_view_grad_fn();  // Note [Views and their base's history]
  return meta_->grad_fn;
}
inline bool Tensor::unrecorded_view_requires_grad() const {
  return base_meta_ != nullptr && base_meta_->requires_grad;
}
// Without copying the node where the answer needs none: a tensor with an identity that is no view.
inline bool Tensor::is_leaf() const {
  if (meta_ != nullptr && meta_->view == nullptr) [[likely]]
    return meta_->grad_fn == nullptr;
  return grad_fn() == nullptr;
}
inline uint32_t Tensor::output_nr() const { return meta_ != nullptr ? meta_->output_nr : 0; }

}  // namespace strata
