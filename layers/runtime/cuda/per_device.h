// Part of layers/runtime/cuda's public interface (cuda_runtime_layer.h includes it); plain C++, no CUDA.
//
// Note [Per-device state]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Streams, allocator pools and library handles exist once per device and are made when a device is
// first used, so that their cost lands in the first (cold) call of that device and a device nobody asks
// for costs nothing. Two threads may ask at once; exactly one makes the value, and the other waits for
// it. A maker that throws leaves nothing behind, so the next call tries again (std::call_once's rule).
// Values are never moved once made: callers keep pointers into them (a Storage's release context).
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "lib/error.h"

namespace strata::runtime::cuda {

// The most devices one strata process addresses; a device index at or above it is refused.
inline constexpr int kMaxDevices = 64;

// One lazily made T per device index. See Note [Per-device state].
template <typename T>
class PerDevice {
 public:
  // `what` names the state in the refusal of an index out of range ("cuBLAS: no device cuda:70").
  explicit PerDevice(const char* what) : what_(what) {}
  PerDevice(const PerDevice&) = delete;
  PerDevice& operator=(const PerDevice&) = delete;
  ~PerDevice() {
    for (Slot& slot : slots_) delete slot.value.load(std::memory_order_acquire);
  }

  // Device `index`'s value; the first call for the index default-constructs it and passes it to
  // `make(T&)`, which finishes it (creates handles, streams). Throws Error for an index out of range.
  template <typename Make>
  T& get(int index, Make&& make) {
    Slot& slot = slot_for(index);
    std::call_once(slot.once, [&] {
      auto value = std::make_unique<T>();
      make(*value);
      slot.value.store(value.release(), std::memory_order_release);
    });
    return *slot.value.load(std::memory_order_acquire);
  }
  T& get(int index) {
    return get(index, [](T&) {});
  }

  // Device `index`'s value if it was made, else nullptr (also for an index out of range). Never waits.
  T* find(int index) const noexcept {
    if (!in_range(index)) return nullptr;
    return slots_[static_cast<size_t>(index)].value.load(std::memory_order_acquire);
  }

  static bool in_range(int index) noexcept { return index >= 0 && index < kMaxDevices; }

 private:
  struct Slot {
    std::once_flag once;
    std::atomic<T*> value{nullptr};
  };

  Slot& slot_for(int index) {
    if (!in_range(index)) throw Error(std::string(what_) + ": no device cuda:" + std::to_string(index));
    return slots_[static_cast<size_t>(index)];
  }

  const char* what_;
  std::array<Slot, kMaxDevices> slots_;
};

}  // namespace strata::runtime::cuda
