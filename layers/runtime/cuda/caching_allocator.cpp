// The caching device allocator. cudaMalloc costs tens of microseconds to milliseconds and synchronises
// the device, so a steady-state call that paid it would measure the allocator, not the op. Freed blocks
// wait in a per-device free list keyed by their rounded size and are handed out again as-is (no splitting:
// strata repeats one call with one set of shapes, so exact-size reuse hits every time after the first).
//
// Reuse without events is safe because every kernel strata runs on a device goes to that device's one
// stream (see stream()): a block freed by the host while a kernel still reads it can only be handed to work
// queued later on the same stream, which runs after that kernel. A second stream would need event fencing.
#include <mutex>
#include <unordered_map>
#include <vector>

#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"
#include "lib/zone.h"

namespace strata::runtime::cuda {
namespace {

constexpr size_t kSmallGranule = 512;
constexpr size_t kSmallLimit = size_t{1} << 20;
constexpr size_t kLargeGranule = size_t{2} << 20;

struct Pool {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // rounded size -> blocks
  AllocatorStats stats;
  // While a CUDA Graph is being captured, freed blocks go here instead of the free list: the graph keeps
  // reading and writing them at every replay, so no later allocation may be handed one (see HeldBlocks).
  std::vector<std::pair<void*, size_t>>* hold = nullptr;
};

class CachingAllocator final : public Allocator {
 public:
  std::shared_ptr<Storage> allocate(size_t nbytes, Device device) override {
    Pool& p = pool(device);
    const size_t size = rounded_allocation_size(nbytes);
    void* ptr = nullptr;
    {
      std::lock_guard lock(p.mutex);
      auto it = p.free_blocks.find(size);
      if (it != p.free_blocks.end() && !it->second.empty()) {
        ptr = it->second.back();
        it->second.pop_back();
        ++p.stats.cache_hits;
        p.stats.bytes_cached -= size;
      }
    }
    if (ptr == nullptr) ptr = malloc_block(p, device.index, size);
    return std::make_shared<Storage>(ptr, nbytes, device, &CachingAllocator::release, &p);
  }

  void copy_to_host(void* host_dst, const void* device_src, size_t nbytes, Device device) override {
    if (nbytes == 0) return;
    STRATA_ZONE(zone, Layer::kRuntime, "cudaMemcpyAsync DtoH");
    copy_and_wait(host_dst, device_src, nbytes, cudaMemcpyDeviceToHost, device.index);
  }

  void copy_from_host(void* device_dst, const void* host_src, size_t nbytes, Device device) override {
    if (nbytes == 0) return;
    STRATA_ZONE(zone, Layer::kRuntime, "cudaMemcpyAsync HtoD");
    copy_and_wait(device_dst, host_src, nbytes, cudaMemcpyHostToDevice, device.index);
  }

  AllocatorStats stats(int index) {
    Pool& p = pools_.get(index);
    std::lock_guard lock(p.mutex);
    return p.stats;
  }

 private:
  // On strata's stream, then waits: a device-to-host copy is read right after, and a pageable host source
  // may be freed or reused by the caller as soon as the copy returns.
  static void copy_and_wait(void* dst, const void* src, size_t nbytes, cudaMemcpyKind kind, int index) {
    set_current_device(index);
    const cudaStream_t s = stream(index);
    STRATA_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, s));
    STRATA_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  Pool& pool(Device device) {
    if (!device.is_cuda() || !PerDevice<Pool>::in_range(device.index)) {
      throw Error("the CUDA caching allocator got device " + device.str());
    }
    return pools_.get(device.index);
  }

  static void* malloc_block(Pool& p, int index, size_t size) {
    STRATA_ZONE_KIND(zone, Layer::kRuntime, "cudaMalloc", ZoneKind::kDeviceMalloc);
    set_current_device(index);
    void* ptr = nullptr;
    cudaError_t e = cudaMalloc(&ptr, size);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      // What the cache holds may be exactly what is missing: give it back to the driver and try once more.
      release_cached(p);
      e = cudaMalloc(&ptr, size);
      if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        size_t free = 0, total = 0;
        (void)cudaMemGetInfo(&free, &total);
        throw UnavailableError("out of device memory on cuda:" + std::to_string(index) + ": cudaMalloc of " +
                               format_bytes(double(size)) + " failed with " + format_bytes(double(free)) +
                               " free of " + format_bytes(double(total)));
      }
    }
    if (e != cudaSuccess) throw_cuda_error(static_cast<int>(e), "cudaMalloc(&ptr, size)", __FILE__, __LINE__);
    std::lock_guard lock(p.mutex);
    ++p.stats.cuda_mallocs;
    p.stats.bytes_reserved += size;
    return ptr;
  }

  static void release_cached(Pool& p) {
    std::lock_guard lock(p.mutex);
    // Not while a graph is being captured: cudaFree synchronises, which a capture may refuse, and a
    // refused free must not leave the figures saying the memory went back.
    if (p.hold != nullptr) return;
    for (auto& [size, blocks] : p.free_blocks) {
      std::vector<void*> kept;
      for (void* block : blocks) {
        if (cudaFree(block) == cudaSuccess) {
          p.stats.bytes_reserved -= size;
          p.stats.bytes_cached -= size;
        } else {
          (void)cudaGetLastError();
          kept.push_back(block);
        }
      }
      blocks.swap(kept);
    }
  }

  static void release(void* context, void* data, size_t nbytes) {
    Pool& p = *static_cast<Pool*>(context);
    const size_t size = rounded_allocation_size(nbytes);
    std::lock_guard lock(p.mutex);
    if (p.hold != nullptr) {
      p.hold->emplace_back(data, size);
      return;
    }
    p.free_blocks[size].push_back(data);
    p.stats.bytes_cached += size;
  }

 public:
  void hold_frees(int index, std::vector<std::pair<void*, size_t>>* sink) {
    Pool& p = pools_.get(index);
    std::lock_guard lock(p.mutex);
    p.hold = sink;
  }

  void give_back(int index, const std::vector<std::pair<void*, size_t>>& blocks) {
    Pool& p = pools_.get(index);
    std::lock_guard lock(p.mutex);
    for (auto [data, size] : blocks) {
      p.free_blocks[size].push_back(data);
      p.stats.bytes_cached += size;
    }
  }

 private:

  PerDevice<Pool> pools_{"the CUDA caching allocator"};
};

CachingAllocator& instance() {
  // Never destroyed: tensors released during static destruction must still find their pool, and
  // cudaFree after the runtime has shut down would only fail.
  static CachingAllocator* allocator = new CachingAllocator();
  return *allocator;
}

}  // namespace

size_t rounded_allocation_size(size_t nbytes) {
  if (nbytes <= kSmallLimit) return nbytes == 0 ? kSmallGranule : (nbytes + kSmallGranule - 1) / kSmallGranule * kSmallGranule;
  return (nbytes + kLargeGranule - 1) / kLargeGranule * kLargeGranule;
}

Allocator& caching_allocator() { return instance(); }

HeldBlocks::HeldBlocks(int index) : index_(index) { instance().hold_frees(index, &blocks_); }

void HeldBlocks::stop() {
  if (holding_) instance().hold_frees(index_, nullptr);
  holding_ = false;
}

HeldBlocks::~HeldBlocks() {
  stop();
  instance().give_back(index_, blocks_);
}

AllocatorStats allocator_stats(int index) {
  if (!PerDevice<Pool>::in_range(index)) throw Error("allocator_stats: no device cuda:" + std::to_string(index));
  return instance().stats(index);
}

}  // namespace strata::runtime::cuda
