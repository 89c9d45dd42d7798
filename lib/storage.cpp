#include "lib/storage.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "lib/error.h"

namespace strata {
namespace {

// Freed blocks of 256 KiB and more are kept and handed out again for the same size. A fresh large malloc
// is an mmap whose pages fault in on first touch (a 4 MiB matmul output: 1024 faults, about half a
// millisecond here), which every call would otherwise pay and the raw-BLAS baseline, writing into one
// preallocated buffer, never does. strata repeats one call with one set of shapes, so exact-size reuse
// hits every time after the first. At most kMaxCached bytes wait; past that, blocks are freed.
class LargeBlockCache {
 public:
  static constexpr size_t kMinBytes = size_t{256} << 10;
  static constexpr size_t kMaxCached = size_t{1} << 30;

  void* take(size_t bytes) {
    std::lock_guard lock(mutex_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* block = it->second.back();
    it->second.pop_back();
    cached_ -= bytes;
    return block;
  }
  void give(void* block, size_t bytes) {
    {
      std::lock_guard lock(mutex_);
      if (cached_ + bytes <= kMaxCached) {
        free_[bytes].push_back(block);
        cached_ += bytes;
        return;
      }
    }
    std::free(block);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

LargeBlockCache& large_blocks() {
  static LargeBlockCache* cache = new LargeBlockCache();  // never destroyed: storages may outlive statics
  return *cache;
}

class CpuAllocator final : public Allocator {
 public:
  std::shared_ptr<Storage> allocate(size_t nbytes, Device device) override {
    // malloc plus manual alignment, not aligned_alloc: glibc's aligned_alloc takes ~85 ns for a 1 KiB
    // block on this machine against ~9 ns for malloc, and output allocation is on every call's path
    // (bench/overhead_bench). The original pointer rides in the Storage's context for the deleter.
    if (nbytes > SIZE_MAX - kCpuAlignment) {
      throw UnavailableError("out of host memory: cannot allocate " + format_bytes(double(nbytes)));
    }
    const size_t bytes = nbytes + kCpuAlignment;
    const bool large = bytes >= LargeBlockCache::kMinBytes;
    void* raw = large ? large_blocks().take(bytes) : nullptr;
    if (raw == nullptr) raw = std::malloc(bytes);
    if (raw == nullptr) {
      throw UnavailableError("out of host memory: could not allocate " + format_bytes(double(nbytes)));
    }
    auto aligned = (reinterpret_cast<uintptr_t>(raw) + kCpuAlignment) & ~uintptr_t{kCpuAlignment - 1};
    Storage::Deleter deleter = large ? [](void* original, void*, size_t n) { large_blocks().give(original, n + kCpuAlignment); }
                                     : [](void* original, void*, size_t) { std::free(original); };
    return std::make_shared<Storage>(reinterpret_cast<void*>(aligned), nbytes, device, deleter, raw);
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
