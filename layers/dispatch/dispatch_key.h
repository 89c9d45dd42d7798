// Dispatch keys (c10's DispatchKey / DispatchKeySet are the model, without the backend x functionality
// split or alias keys). The enum is ordered by priority: a higher value wins. A key set is one 64-bit
// word and the winning key is its highest set bit.
#pragma once

#include <bit>
#include <cstdint>

namespace strata {

enum class DispatchKey : uint8_t {
  kUndefined = 0,
  // Backend keys, lowest priority: whatever is left after the wrappers have run.
  kCPU = 1,
  kCUDA = 2,
  // Wrapper keys: do their work, then redispatch with themselves masked out.
  kAutograd = 3,  // records a backward node when an input requires grad
  kAutocast = 4,  // casts inputs to the autocast dtype before the backend sees them
  // Records the call into a graph (layers/compiler, Note [Capture is a dispatch key]) and redispatches
  // with itself excluded, so that the ops the call makes below it are not recorded twice. Highest: the
  // graph holds the program as the caller wrote it, before Autocast casts or Autograd records.
  kCapture = 5,
  kCount,
};
inline constexpr int kNumDispatchKeys = static_cast<int>(DispatchKey::kCount);

const char* dispatch_key_name(DispatchKey key);

class DispatchKeySet {
 public:
  constexpr DispatchKeySet() = default;
  constexpr explicit DispatchKeySet(DispatchKey key) : bits_(bit(key)) {}
  static constexpr DispatchKeySet from_bits(uint64_t bits) {
    DispatchKeySet s;
    s.bits_ = bits;
    return s;
  }

  constexpr bool has(DispatchKey key) const { return (bits_ & bit(key)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr uint64_t bits() const { return bits_; }
  constexpr DispatchKeySet add(DispatchKey key) const { return from_bits(bits_ | bit(key)); }
  constexpr DispatchKeySet remove(DispatchKey key) const { return from_bits(bits_ & ~bit(key)); }
  constexpr DispatchKeySet operator|(DispatchKeySet o) const { return from_bits(bits_ | o.bits_); }
  constexpr DispatchKeySet operator&(DispatchKeySet o) const { return from_bits(bits_ & o.bits_); }
  constexpr DispatchKeySet operator-(DispatchKeySet o) const { return from_bits(bits_ & ~o.bits_); }
  constexpr bool operator==(const DispatchKeySet&) const = default;

  // The key that runs next: the highest set bit (c10's indexOfHighestBit).
  constexpr DispatchKey highest_priority() const {
    return static_cast<DispatchKey>(63 - std::countl_zero(bits_ | 1));  // bit 0 = kUndefined
  }

 private:
  static constexpr uint64_t bit(DispatchKey key) { return (key == DispatchKey::kUndefined) ? 0 : uint64_t{1} << static_cast<int>(key); }
  uint64_t bits_ = 0;
};

}  // namespace strata
