// The measurement loop (apps/strata/harness.cpp): call numbering, automatic sizing, interruption at a
// call boundary, and the memory it holds at once, which must stay within what the frontend checked.
#include "apps/strata/harness.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "apps/strata/device_session.h"
#include "layers/frontend/frontend.h"
#include "lib/error.h"
#include "lib/storage.h"

using namespace strata;
using namespace strata::app;

namespace {

// Wraps the CPU allocator and tracks the bytes alive and their peak.
class CountingAllocator final : public Allocator {
 public:
  std::shared_ptr<Storage> allocate(size_t nbytes, Device device) override {
    void* data = std::aligned_alloc(
        kCpuAlignment, (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment + kCpuAlignment);
    live += nbytes;
    peak = std::max(peak, live);
    return std::make_shared<Storage>(
        data, nbytes, device,
        [](void* self, void* p, size_t n) {
          static_cast<CountingAllocator*>(self)->live -= n;
          std::free(p);
        },
        this);
  }
  void copy_to_host(void*, const void*, size_t, Device) override {}
  void copy_from_host(void*, const void*, size_t, Device) override {}
  size_t live = 0, peak = 0;
};

// Installs the counting allocator for the CPU for one scope.
struct CountingScope {
  CountingAllocator counter;
  CountingScope() { register_allocator(DeviceType::kCPU, &counter); }
  ~CountingScope() { register_allocator(DeviceType::kCPU, &cpu_allocator()); }
};

frontend::PreparedCall prepare(const char* op, const char* dims) {
  return frontend::prepare_call(frontend::parse_op_spec(op, dims), DType::kF32, kCPU, 1, false,
                                frontend::available_host_bytes());
}

}  // namespace

TEST_CASE("one cold call, then the timed calls, numbered in order") {
  const frontend::PreparedCall call = prepare("matmul", "8");
  HarnessOptions o;
  o.warmup = 2;
  o.repeat = 5;
  Timeline t;
  DeviceSession session;
  HarnessResult r = run_harness(call, o, t, session);
  CHECK(r.cold_ids == std::vector<uint32_t>{1});
  CHECK(r.timed_ids == std::vector<uint32_t>{2, 3, 4, 5, 6});
  CHECK(r.untraced_ns.size() == 5);
  CHECK(r.repeat == 5);
  CHECK(r.warmup == 2);
  CHECK_FALSE(r.repeat_auto);
  CHECK(r.last_result.tensor().sizes() == Shape{8, 8});
  // Warm-ups and untraced calls leave no spans; every traced call does.
  for (const Span& s : t.spans()) CHECK((s.op_id >= 1 && s.op_id <= 6));
}

TEST_CASE("automatic repeat stays between 10 and 10000 calls") {
  const frontend::PreparedCall call = prepare("relu", "16");
  HarnessOptions o;
  o.warmup = 0;
  o.repeat = 0;
  o.budget_s = 1e-9;  // far less than one call: the floor applies
  Timeline t;
  DeviceSession session;
  HarnessResult r = run_harness(call, o, t, session);
  CHECK(r.repeat_auto);
  CHECK(r.repeat == 10);
  CHECK(r.timed_ids.size() == 10);
}

TEST_CASE("an automatic repeat ends at twice --budget when the calls turn slower than the warm-ups") {
  const frontend::PreparedCall call = prepare("relu", "16");
  HarnessOptions o;
  o.warmup = 2;
  o.repeat = 0;
  o.budget_s = 0.05;
  // The cold call and the warm-ups are fast; every later call sleeps 2 ms (a machine that got busy): the
  // run is sized for thousands of calls and must stop once 0.1 s have passed.
  int calls = 0;
  o.invoke = [&] {
    if (++calls > 3) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return call.op->call(call.args);
  };
  Timeline t;
  DeviceSession session;
  const auto begin = std::chrono::steady_clock::now();
  HarnessResult r = run_harness(call, o, t, session);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  CHECK(r.repeat_auto);
  CHECK(r.planned_repeat > 100);
  CHECK(r.repeat < r.planned_repeat);
  CHECK(r.repeat >= 10);
  CHECK(r.timed_ids.size() == size_t(r.repeat));
  CHECK(seconds < 2.0);  // each timed call is two calls of ~2 ms: 0.1 s plus one iteration, with room for load
}

TEST_CASE("an interrupt stops the run at the next call boundary with exit code 130") {
  const frontend::PreparedCall call = prepare("matmul", "8");
  HarnessOptions o;
  o.warmup = 0;
  o.repeat = 1000000;
  Timeline t;
  DeviceSession session;
  g_interrupted.store(true);
  try {
    run_harness(call, o, t, session);
    FAIL("the harness ran to the end despite the interrupt");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kInterrupted);
    CHECK(std::string(e.what()).find("interrupted") != std::string::npos);
  }
  g_interrupted.store(false);
  // Only the cold call ran: the flag is checked before every later call.
  uint32_t max_op = 0;
  for (const Span& s : t.spans()) max_op = std::max(max_op, s.op_id);
  CHECK(max_op <= 1);
}

TEST_CASE("the harness never holds more tensor memory than the frontend checked for") {
  // required_bytes counts the inputs and ONE output. The harness must free a call's result before the
  // next call makes another, or a size that passed the check needs a second output's worth of memory
  // (matmul 2147483647x1x1 passed the check and was then killed by the OOM killer).
  for (const char* op : {"matmul", "linear", "relu", "add"}) {
    CAPTURE(op);
    CountingScope counting;
    const frontend::OpSpec spec = frontend::parse_op_spec(
        op, std::string(op) == "relu" || std::string(op) == "add" ? "4096" : "16x32x8");
    const frontend::PreparedCall call =
        frontend::prepare_call(spec, DType::kF32, kCPU, 1, false, frontend::available_host_bytes());
    HarnessOptions o;
    o.warmup = 2;
    o.repeat = 3;
    Timeline t;
    DeviceSession session;
    HarnessResult r = run_harness(call, o, t, session);
    CHECK(counting.counter.peak <= frontend::required_bytes(spec, DType::kF32));
    CHECK(counting.counter.peak > 0);
  }
}
