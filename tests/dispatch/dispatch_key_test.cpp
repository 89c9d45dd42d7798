#include <doctest/doctest.h>

#include "layers/dispatch/dispatch.h"

using namespace strata;

TEST_CASE("the highest set bit wins: wrapper keys run before backend keys") {
  DispatchKeySet ks = DispatchKeySet(DispatchKey::kCPU).add(DispatchKey::kAutograd);
  CHECK(ks.highest_priority() == DispatchKey::kAutograd);
  CHECK(ks.remove(DispatchKey::kAutograd).highest_priority() == DispatchKey::kCPU);
  CHECK(ks.add(DispatchKey::kAutocast).highest_priority() == DispatchKey::kAutocast);
  CHECK(DispatchKeySet().highest_priority() == DispatchKey::kUndefined);
  CHECK(DispatchKeySet(DispatchKey::kCUDA).add(DispatchKey::kCPU).highest_priority() == DispatchKey::kCUDA);
}
