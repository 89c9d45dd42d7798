// Storage is the memory behind tensors; an Allocator per device type makes it. The CPU allocator lives
// here; the CUDA caching allocator lives in layers/runtime/cuda and registers itself when a device is
// first initialised (runtime::cuda::init_device), so lib never depends on a layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "lib/device.h"

namespace strata {

class Storage {
 public:
  using Deleter = void (*)(void* context, void* data, size_t nbytes);

  Storage(void* data, size_t nbytes, Device device, Deleter deleter, void* context)
      : data_(data), nbytes_(nbytes), device_(device), deleter_(deleter), context_(context) {}
  ~Storage() {
    if (deleter_ != nullptr) deleter_(context_, data_, nbytes_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Note [Version counter]
  // How many in-place writes this memory has had: every in-place operator (relu_, add_, mul_) bumps it,
  // and a tensor saved for backward records it at save time, so a backward that would read a saved
  // tensor changed since fails (PyTorch's VariableVersion) instead of computing a wrong gradient. It lives
  // here because the Storage is exactly what a tensor and all its views share in strata (Note [Views
  // share storage]): a write through any view is a write to every tensor over this memory, which is the
  // sharing PyTorch gets by giving a view its base's VariableVersion. (Two tensors over one storage that
  // do not overlap share the count too: conservative, never a missed write.) Python's x.detach() keeps the
  // storage, so a detached tensor shares the count, as torch's does. Not atomic: a graph is recorded and
  // run by one thread (Note [The autograd graph]). A view's grad_fn is regenerated when it moved (Note
  // [Views and their base's history] in lib/tensor.h).
  uint32_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  uint32_t version_ = 0;
  void* data_;
  size_t nbytes_;
  Device device_;
  Deleter deleter_;
  void* context_;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual std::shared_ptr<Storage> allocate(size_t nbytes, Device device) = 0;
  // Copies between this allocator's device and host memory (blocking). The CPU allocator never sees these.
  virtual void copy_to_host(void* host_dst, const void* device_src, size_t nbytes, Device device) = 0;
  virtual void copy_from_host(void* device_dst, const void* host_src, size_t nbytes, Device device) = 0;
};

// 64-byte aligned (a cache line, and the widest AVX-512 load), so kernels can use aligned vector loads.
inline constexpr size_t kCpuAlignment = 64;

Allocator& cpu_allocator();
void register_allocator(DeviceType type, Allocator* allocator);
Allocator& allocator_for(Device device);  // throws UnavailableError if none is registered

}  // namespace strata
