#include "lib/storage.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "lib/error.h"

namespace strata {
namespace {

class CpuAllocator final : public Allocator {
 public:
  std::shared_ptr<Storage> allocate(size_t nbytes, Device device) override {
    // aligned_alloc wants a size that is a multiple of the alignment; never ask for 0 bytes.
    size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    if (rounded == 0) rounded = kCpuAlignment;
    void* data = std::aligned_alloc(kCpuAlignment, rounded);
    if (data == nullptr) {
      throw UnavailableError("out of host memory: could not allocate " + format_bytes(double(nbytes)));
    }
    return std::make_shared<Storage>(data, nbytes, device, [](void*, void* p, size_t) { std::free(p); },
                                     nullptr);
  }
  void copy_to_host(void* dst, const void* src, size_t nbytes, Device) override {
    std::memcpy(dst, src, nbytes);
  }
  void copy_from_host(void* dst, const void* src, size_t nbytes, Device) override {
    std::memcpy(dst, src, nbytes);
  }
};

Allocator* g_allocators[2] = {&cpu_allocator(), nullptr};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

void register_allocator(DeviceType type, Allocator* allocator) {
  g_allocators[static_cast<int>(type)] = allocator;
}

Allocator& allocator_for(Device device) {
  Allocator* allocator = g_allocators[static_cast<int>(device.type)];
  if (allocator == nullptr) {
    throw UnavailableError("no allocator for device " + device.str() +
                           " (this build has no CUDA support, or the CUDA backend is not initialised)");
  }
  return *allocator;
}

}  // namespace strata
