// The seed of a test program's random inputs: fresh on every run (the tests print it with any
// failure, INFO("seed " << run_seed())), or STRATA_TEST_SEED's value to replay a failed run. One seed per
// program, shared by every file of it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>

namespace strata::testing {

inline uint64_t run_seed() {
  static const uint64_t kSeed = []() -> uint64_t {
    if (const char* s = std::getenv("STRATA_TEST_SEED")) return std::strtoull(s, nullptr, 10);
    return static_cast<uint64_t>(std::random_device{}()) << 32 | std::random_device{}();
  }();
  return kSeed;
}

}  // namespace strata::testing
