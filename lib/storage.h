// Storage is the memory behind tensors; an Allocator per device type makes it. The CPU allocator lives
// here; the CUDA caching allocator lives in layers/runtime/cuda and registers itself when a device is
// first initialised (runtime::cuda::init_device), so lib never depends on a layer.
#pragma once

#include <cstddef>
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

 private:
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
