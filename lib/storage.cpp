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

// Note [Small blocks kept per thread]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Freed blocks up to 64 KiB are kept, a few per power-of-two class, in the freeing thread's lists and
// handed out again for any size of their class. glibc keeps only blocks up to 1032 bytes per thread; a
// 16x16 f32 output (1 KiB plus the alignment slack) went through its shared bins, freeing and
// consolidating: ~350 instructions of the ~2,000 a matmul 16 call spends outside the BLAS (callgrind,
// bench/overhead_bench --calls-only). PyTorch's CPU allocator calls the system's; this is strata's
// difference, and the overhead figures count it. The lists are plain data that a thread never destroys;
// an object with a destructor frees them when the thread exits and marks them closed, after which blocks
// go straight to free (a storage can outlive its thread's lists).
class SmallBlocks {
 public:
  static constexpr size_t kMaxBytes = size_t{64} << 10;
  static constexpr int kClasses = 11;  // 64 B << 0 .. 10
  static constexpr int kPerClass = 4;

  static int class_of(size_t bytes) {
    int c = 0;
    while ((size_t{64} << c) < bytes) ++c;
    return c;
  }
  static size_t class_bytes(int c) { return size_t{64} << c; }

  static void* take(int c) {
    Lists& l = lists();
    if (l.closed || l.count[c] == 0) return nullptr;
    return l.blocks[c][--l.count[c]];
  }
  static void give(void* block, int c) {
    Lists& l = lists();
    if (l.closed || l.count[c] == kPerClass) {
      std::free(block);
      return;
    }
    l.blocks[c][l.count[c]++] = block;
  }

 private:
  struct Lists {
    void* blocks[kClasses][kPerClass];
    int count[kClasses];
    bool closed;
  };
  struct Closer {
    ~Closer() {
      Lists& l = t_lists;
      for (int c = 0; c < kClasses; ++c)
        for (int i = 0; i < l.count[c]; ++i) std::free(l.blocks[c][i]);
      l = Lists{};
      l.closed = true;
    }
  };
  static Lists& lists() {
    thread_local Closer closer;  // constructed on a thread's first use; its destructor runs at the thread's exit
    (void)closer;
    return t_lists;
  }
  static thread_local Lists t_lists;  // zero-initialised, never destroyed
};
thread_local SmallBlocks::Lists SmallBlocks::t_lists{};

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
    const bool large = bytes >= LargeBlockCache::kMinBytes, small = bytes <= SmallBlocks::kMaxBytes;
    void* raw = nullptr;
    if (large) {
      raw = large_blocks().take(bytes);
      if (raw == nullptr) raw = std::malloc(bytes);
    } else if (small) {  // Note [Small blocks kept per thread]
      const int c = SmallBlocks::class_of(bytes);
      raw = SmallBlocks::take(c);
      if (raw == nullptr) raw = std::malloc(SmallBlocks::class_bytes(c));
    } else {
      raw = std::malloc(bytes);
    }
    if (raw == nullptr) {
      throw UnavailableError("out of host memory: could not allocate " + format_bytes(double(nbytes)));
    }
    auto aligned = (reinterpret_cast<uintptr_t>(raw) + kCpuAlignment) & ~uintptr_t{kCpuAlignment - 1};
    Storage::Deleter deleter =
        large   ? [](void* original, void*, size_t n) { large_blocks().give(original, n + kCpuAlignment); }
        : small ? [](void* original, void*, size_t n) { SmallBlocks::give(original, SmallBlocks::class_of(n + kCpuAlignment)); }
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
