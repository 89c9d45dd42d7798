// Tensor: shared Storage plus a view (sizes, strides, offset), a dtype and a device.
// At most 4 dimensions (NCHW is the largest strata needs), kept inline so that creating an output tensor
// costs one allocation for the storage and nothing for its metadata.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
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

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised memory from the device's allocator. The caller checks sizes first (frontend does).
  static Tensor empty(const Shape& sizes, DType dtype, Device device);
  // A contiguous tensor over memory someone else owns (the Python package's zero-copy from_numpy): the
  // storage's deleter releases it. The storage must hold at least sizes.numel() elements.
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& sizes, DType dtype);

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
  bool is_contiguous() const;

  void* data_ptr() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_ptr());
  }

  bool requires_grad() const { return requires_grad_; }
  // A leaf (no grad_fn) that requires grad gets its AutogradMeta here: copies made afterwards share it,
  // so the gradient the engine accumulates is seen through every copy (PyTorch's AutogradMeta).
  void set_requires_grad(bool value);
  const std::shared_ptr<GradNode>& grad_fn() const { return grad_fn_; }
  void set_grad_fn(std::shared_ptr<GradNode> node) { grad_fn_ = std::move(node); }
  bool is_leaf() const { return grad_fn_ == nullptr; }
  // The gradient accumulated into this leaf by backward passes (undefined until the first one).
  Tensor grad() const;
  void set_grad(Tensor grad) const;  // on the shared AutogradMeta: const like the storage it stands beside
  const std::shared_ptr<AutogradMeta>& autograd_meta() const { return meta_; }

  // Note [Views share storage]
  // A view of this tensor's memory with its own sizes, strides (in elements) and storage offset: the same
  // Storage, no data moved, the cost of one tensor header (PyTorch's as_strided). The caller (the view
  // operators in lib/views.h) has checked that every element it can address lies inside the storage.
  // The view carries no autograd state: the Autograd key attaches the view's node to it.
  Tensor as_strided(const Shape& sizes, const Shape& strides, int64_t storage_offset) const;

  // A contiguous copy on another device (host <-> device through the device's allocator).
  Tensor to(Device device) const;

  std::string str() const;  // "[1024x1024] f32 cpu"

 private:
  std::shared_ptr<Storage> storage_;
  Shape sizes_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::kF32;
  Device device_ = kCPU;
  bool requires_grad_ = false;
  std::shared_ptr<GradNode> grad_fn_;
  std::shared_ptr<AutogradMeta> meta_;  // leaves that require grad only
};

// What a leaf that requires grad shares among its copies: its .grad, and the AccumulateGrad node that
// graphs recorded from it point to (weak: the graph owns the node, the leaf only finds it again, so two
// uses of one leaf in a graph meet in one node).
struct AutogradMeta {
  Tensor grad;
  std::weak_ptr<GradNode> accumulator;
};

}  // namespace strata
