// PerDevice (layers/runtime/cuda/per_device.h) without a GPU: one value per device index, made once even
// when threads race, retried after a maker that throws, refused out of range. See Note [Per-device state].
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "layers/runtime/cuda/per_device.h"
#include "lib/error.h"

using namespace strata;
namespace rt = strata::runtime::cuda;

namespace {
struct Counted {
  int made_for = -1;
};
}  // namespace

TEST_CASE("PerDevice makes one value per device, on first use, and find() never makes one") {
  rt::PerDevice<Counted> values("test state");
  CHECK(values.find(0) == nullptr);
  int makes = 0;
  Counted& a = values.get(3, [&](Counted& c) { c.made_for = 3, ++makes; });
  Counted& b = values.get(3, [&](Counted& c) { c.made_for = -2, ++makes; });
  CHECK(&a == &b);
  CHECK(a.made_for == 3);
  CHECK(makes == 1);
  CHECK(values.find(3) == &a);
  CHECK(values.find(2) == nullptr);
  CHECK(&values.get(2) != &a);  // default-made, its own value
  CHECK(values.find(2) != nullptr);
}

TEST_CASE("PerDevice: racing threads see one value, made once") {
  rt::PerDevice<Counted> values("test state");
  std::atomic<int> makes{0};
  std::vector<Counted*> seen(8, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&, i] {
      seen[i] = &values.get(0, [&](Counted& c) {
        ++makes;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // widen the window for a second maker
        c.made_for = 0;
      });
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(makes.load() == 1);
  for (Counted* p : seen) CHECK(p == seen[0]);
  CHECK(seen[0]->made_for == 0);
}

TEST_CASE("PerDevice: a maker that throws leaves nothing, and the next call tries again") {
  rt::PerDevice<Counted> values("test state");
  CHECK_THROWS_AS(values.get(1, [](Counted&) { throw std::runtime_error("handle creation failed"); }),
                  std::runtime_error);
  CHECK(values.find(1) == nullptr);
  CHECK(values.get(1, [](Counted& c) { c.made_for = 1; }).made_for == 1);
}

// (No brackets in test names: doctest_discover_tests would split the name into a CMake list.)
TEST_CASE("PerDevice refuses an index below 0 or from kMaxDevices on, naming what it holds") {
  rt::PerDevice<Counted> values("cuBLAS");
  CHECK(rt::PerDevice<Counted>::in_range(0));
  CHECK(rt::PerDevice<Counted>::in_range(rt::kMaxDevices - 1));
  CHECK_FALSE(rt::PerDevice<Counted>::in_range(rt::kMaxDevices));
  CHECK_FALSE(rt::PerDevice<Counted>::in_range(-1));
  CHECK(values.find(-1) == nullptr);
  CHECK(values.find(rt::kMaxDevices) == nullptr);
  try {
    values.get(rt::kMaxDevices);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "cuBLAS: no device cuda:" + std::to_string(rt::kMaxDevices));
  }
}
