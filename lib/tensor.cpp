#include "lib/tensor.h"

#include <algorithm>
#include <cstring>

#include "lib/error.h"

namespace strata {

Shape::Shape(std::initializer_list<int64_t> list) {
  if (list.size() > kMaxDims) throw Error("Shape: more than 4 dimensions");
  for (int64_t d : list) dims[static_cast<size_t>(ndim++)] = d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[static_cast<size_t>(i)];
  return n;
}

std::string Shape::str() const {
  std::string out;
  for (int i = 0; i < ndim; ++i) {
    if (i) out += 'x';
    out += std::to_string(dims[static_cast<size_t>(i)]);
  }
  return out;
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

unsigned __int128 byte_count(std::span<const int64_t> sizes, size_t element) {
  constexpr unsigned __int128 kSaturated = static_cast<unsigned __int128>(1) << 64;
  unsigned __int128 n = element;
  for (int64_t d : sizes) n = std::min(n * static_cast<unsigned __int128>(d), kSaturated);
  return n;
}

size_t checked_nbytes(const Shape& sizes, DType dtype) {
  const unsigned __int128 bytes = byte_count(std::span<const int64_t>(sizes.dims.data(), size_t(sizes.ndim)),
                                             element_size(dtype));
  if (bytes > kMaxTensorBytes) {
    const bool saturated = bytes >= static_cast<unsigned __int128>(1) << 64;
    throw UsageError("a tensor of size [" + sizes.str() + "] " + std::string(dtype_name(dtype)) + " needs " +
                     (saturated ? std::string("2^64 bytes or more") : format_bytes(double(bytes))) +
                     "; one tensor holds at most 2^63 - 1 bytes (" + format_bytes(double(kMaxTensorBytes)) + ")");
  }
  return static_cast<size_t>(bytes);
}

namespace {
// Row-major strides of a contiguous tensor of `sizes`. Sizes whose products overflow int64 (possible with
// a zero among them: [0, 2^62, 2^62] holds nothing, but its strides do not fit) are refused here, for
// every caller, before anything is allocated.
Shape contiguous_strides(const Shape& sizes) {
  Shape strides;
  strides.ndim = sizes.ndim;
  int64_t stride = 1, extent = 1;  // extent: the product with zeros taken as ones
  for (int i = sizes.ndim - 1; i >= 0; --i) {
    strides[i] = stride;
    if (sizes[i] < 0 || __builtin_mul_overflow(extent, std::max<int64_t>(sizes[i], 1), &extent)) {
      throw UsageError("a tensor of size [" + sizes.str() +
                       "]: sizes must be non-negative and their product must fit in 64 bits");
    }
    stride *= sizes[i];  // cannot overflow: 0 <= stride <= extent
  }
  return strides;
}
}  // namespace

// Note [Contiguity kept with the strides]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A matmul asks is_contiguous about ten times (the checks, the operands, the view test), and walking the
// dims each time cost ~330 instructions of a ~2,500-instruction overhead (callgrind, bench/overhead_bench
// --calls-only): the header keeps the answer, as TensorImpl keeps is_contiguous_, set with the strides.
// PyTorch's rule: a tensor with no elements is contiguous whatever its strides (there is nothing to lay
// out), so contiguous() returns it and x[:, ::2] of an empty x reads as torch's does.
namespace {
bool contiguous_layout(const Shape& sizes, const Shape& strides) {
  if (sizes.numel() == 0) return true;
  int64_t stride = 1;
  for (int i = sizes.ndim - 1; i >= 0; --i) {
    if (sizes[i] != 1 && strides[i] != stride) return false;
    stride *= sizes[i];
  }
  return true;
}
}  // namespace

Tensor Tensor::empty(const Shape& sizes, DType dtype, Device device) {
  Tensor t;
  t.sizes_ = sizes;
  t.strides_ = contiguous_strides(sizes);
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = allocator_for(device).allocate(checked_nbytes(sizes, dtype), device);
  t.meta_ = t.new_identity();  // Note [Autograd identity]
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& sizes, DType dtype) {
  Tensor t;
  t.sizes_ = sizes;
  t.strides_ = contiguous_strides(sizes);
  t.dtype_ = dtype;
  t.device_ = storage->device();
  if (storage->nbytes() < t.nbytes()) throw Error("Tensor::from_storage: the storage is smaller than the shape");
  t.storage_ = std::move(storage);
  t.meta_ = t.new_identity();  // Note [Autograd identity]
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& sizes, const Shape& strides, DType dtype) {
  Tensor t;
  t.storage_ = std::move(storage);
  t.sizes_ = sizes;
  t.strides_ = strides;
  t.contiguous_ = contiguous_layout(sizes, strides);
  t.dtype_ = dtype;
  t.device_ = t.storage_->device();
  t.meta_ = t.new_identity();
  return t;
}

// Note [Views and their base's history]: the base is never a view, so a view of a view keeps the first
// view's base; what grad mode was off for carries over, as torch's creation meta does.
Tensor::Tensor(ViewOf, const Tensor& base, const Shape& sizes, const Shape& strides, int64_t storage_offset)
    : storage_(base.storage_),
      sizes_(sizes),
      strides_(strides),
      offset_(storage_offset),
      view_version_(base.storage_ != nullptr ? base.storage_->version() : 0),
      dtype_(base.dtype_),
      is_view_(true),
      no_grad_view_((base.is_view_ && base.no_grad_view_) || !tensor_detail::t_grad_enabled),
      contiguous_(contiguous_layout(sizes, strides)),
      device_(base.device_),
      base_meta_(base.is_view_ ? base.base_meta_ : base.meta_) {}

Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, int64_t storage_offset) const {
  return {ViewOf{}, *this, sizes, strides, storage_offset};
}

Tensor Tensor::detach() const {
  Tensor t = *this;
  t.is_view_ = false;
  t.no_grad_view_ = false;
  t.base_meta_ = nullptr;
  t.meta_ = t.new_identity();
  return t;
}

std::shared_ptr<AutogradMeta> Tensor::new_identity() const {
  auto meta = std::make_shared<AutogradMeta>();
  meta->geometry = Geometry{sizes_, strides_, offset_};
  return meta;
}


void* Tensor::data_ptr() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size(dtype_));
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  if (!device_.is_cpu() && !device.is_cpu()) {
    throw Error("Tensor::to: device-to-device copies are not supported (" + device_.str() + " -> " +
                device.str() + ")");
  }
  // A view keeps its layout on the other side, as torch's .to() does for a strided tensor: the span of
  // storage it reaches (offset to its last element) is copied in one transfer and the same strides are laid
  // over the copy, so `--view other=t` on the GPU is still a transposed view there, read through cuBLAS's
  // op flags. Strides are never negative here (no view flips), so the span starts at the first element.
  int64_t span = numel();
  if (span > 0 && !is_contiguous()) {
    span = 1;
    for (int i = 0; i < sizes_.ndim; ++i) span += (sizes_[i] - 1) * strides_[i];
  }
  const size_t bytes = static_cast<size_t>(span) * element_size(dtype_);
  Tensor out = empty(Shape{span}, dtype_, device);
  if (device_.is_cpu()) {
    allocator_for(device).copy_from_host(out.data_ptr(), data_ptr(), bytes, device);
  } else {
    allocator_for(device_).copy_to_host(out.data_ptr(), data_ptr(), bytes, device_);
  }
  // The copy is a tensor of its own (not a view of the one-dimensional span): it keeps empty()'s identity.
  out.sizes_ = sizes_;
  out.strides_ = is_contiguous() ? contiguous_strides(sizes_) : strides_;
  out.contiguous_ = contiguous_;
  out.meta_->geometry = Geometry{out.sizes_, out.strides_, 0};
  out.meta_->requires_grad = requires_grad();
  return out;
}

void Tensor::set_requires_grad(bool value) {
  if (meta_ == nullptr) {
    if (!value) return;
    meta_ = new_identity();
  }
  meta_->requires_grad = value;
}

void Tensor::set_grad_fn(std::shared_ptr<GradNode> node) {
  if (meta_ == nullptr) {
    if (node == nullptr) return;
    meta_ = new_identity();
  }
  meta_->grad_fn = std::move(node);
  meta_->output_nr = 0;
}

void Tensor::rebase_history(std::shared_ptr<GradNode> node) const {
  if (meta_ == nullptr) throw Error("Tensor::rebase_history: " + str() + " has no autograd identity to rebase");
  meta_->grad_fn = std::move(node);
  meta_->output_nr = 0;
  meta_->requires_grad = true;
}

void Tensor::set_view_base() const {
  if (meta_ == nullptr) throw Error("Tensor::set_view_base: " + str() + " has no autograd identity");
  meta_->view = std::make_unique<ViewInfo>();
  meta_->view->version = storage_->version();
}

Tensor Tensor::view_base() const {
  if (!is_view_ || base_meta_ == nullptr) return {};
  Tensor base;
  base.storage_ = storage_;
  base.sizes_ = base_meta_->geometry.sizes;
  base.strides_ = base_meta_->geometry.strides;
  base.contiguous_ = contiguous_layout(base.sizes_, base.strides_);
  base.offset_ = base_meta_->geometry.offset;
  base.dtype_ = dtype_;  // no view op changes the dtype
  base.device_ = device_;
  base.meta_ = base_meta_;
  return base;
}

std::shared_ptr<GradNode> Tensor::recorded_view_grad_fn() const {
  AutogradMeta& meta = *meta_;
  ViewInfo& view = *meta.view;
  const std::lock_guard<std::mutex> held(view.lock);  // Note [Views and their base's history]
  const uint32_t now = storage_->version();
  if (view.version == now) [[likely]]
    return meta.grad_fn;
  // PyTorch's rule: a view with no history over a base that needs none has nothing to regenerate.
  const Tensor base = view_base();
  if (meta.grad_fn == nullptr && !base.requires_grad()) return nullptr;
  view.version = now;
  if (tensor_detail::g_view_grad_fn == nullptr || !base.defined()) return meta.grad_fn;
  if (std::shared_ptr<GradNode> node = tensor_detail::g_view_grad_fn(*this, base)) {
    meta.grad_fn = std::move(node);
    meta.output_nr = 0;
    // A recorded view requires grad already; writing the same value would race with readers that hold
    // no lock (requires_grad() on the dispatcher's path).
    if (!meta.requires_grad) meta.requires_grad = true;
  }
  return meta.grad_fn;
}

std::shared_ptr<GradNode> Tensor::unrecorded_view_grad_fn() const {
  if (!unrecorded_view_requires_grad() || storage_->version() == view_version_) return nullptr;
  if (tensor_detail::g_view_grad_fn == nullptr) return nullptr;
  return tensor_detail::g_view_grad_fn(*this, view_base());
}

Tensor Tensor::without_autograd() const {
  Tensor t = *this;
  t.meta_ = nullptr;
  t.base_meta_ = nullptr;
  return t;
}

Tensor Tensor::without_identity() const {
  Tensor t = *this;
  t.meta_ = nullptr;
  return t;
}

Tensor Tensor::grad() const { return meta_ ? meta_->grad : Tensor(); }

void Tensor::set_grad(Tensor grad) const {
  if (meta_ == nullptr) throw Error("Tensor::set_grad: " + str() + " has no autograd identity to keep a .grad on");
  meta_->grad = std::move(grad);
}

std::string Tensor::str() const {
  return "[" + sizes_.str() + "] " + std::string(dtype_name(dtype_)) + " " + device_.str();
}

}  // namespace strata
