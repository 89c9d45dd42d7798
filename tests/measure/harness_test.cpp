// The measurement loop (measure/harness.cpp): call numbering, automatic sizing, interruption at a
// call boundary, and the memory it holds at once, which must stay within what the frontend checked.
#include "measure/harness.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "layers/dispatch/autocast.h"
#include "layers/frontend/frontend.h"
#include "layers/frontend/sequence.h"
#include "lib/error.h"
#include "lib/storage.h"
#include "measure/device_session.h"

using namespace strata;
using namespace strata::measure;

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
    CAPTURE(std::string(op));
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

// Note [Peak bytes of a call]: the memory checks count what a call holds at once, temporaries included:
// autocast's casts beside the f32 inputs, and on the CPU the f32 copies half types are widened to. The
// count is set against the peak the allocator saw over a cold call, warm-ups and timed calls: never
// below it, and for one op no looser than a quarter above it (the count is the peak, not a guess).
TEST_CASE("peak_bytes covers the measured peak of half-precision and autocast calls") {
  struct Case {
    const char* op;
    const char* dims;
    DType given;
    std::optional<DType> autocast;
  };
  const Case cases[] = {{"matmul", "64", DType::kF32, std::nullopt},   {"matmul", "64", DType::kBF16, std::nullopt},
                        {"matmul", "64", DType::kF32, DType::kBF16},   {"linear", "16x32x8", DType::kF16, std::nullopt},
                        {"linear", "16x32x8", DType::kF32, DType::kF16}, {"conv", "1x2x8x8", DType::kBF16, std::nullopt},
                        {"relu", "4096", DType::kBF16, std::nullopt}};
  for (const Case& c : cases) {
    CAPTURE(std::string(c.op));
    CAPTURE(dtype_name(c.given));
    CAPTURE(c.autocast.has_value());
    const frontend::OpSpec spec = frontend::parse_op_spec(c.op, c.dims);
    const DType computed = c.autocast.value_or(c.given);
    const size_t counted = frontend::peak_bytes(spec, c.given, computed, kCPU);
    CountingScope counting;
    {
      std::optional<AutocastGuard> autocast;
      if (c.autocast) autocast.emplace(*c.autocast);
      const frontend::PreparedCall call =
          frontend::prepare_call(spec, c.given, kCPU, 1, false, frontend::available_host_bytes(), computed);
      CHECK(call.bytes == counted);
      HarnessOptions o;
      o.warmup = 1;
      o.repeat = 2;
      Timeline t;
      DeviceSession session;
      run_harness(call, o, t, session);
    }
    CHECK(counting.counter.peak <= counted);
    // conv's columns are a std::vector the allocator does not see; the rest is its tensors.
    size_t workspace = spec.call.workspace_dims.empty() ? 0 : sizeof(float);  // f32: computed is f32 or widened
    for (int64_t d : spec.call.workspace_dims) workspace *= static_cast<size_t>(d);
    CHECK(4 * counted <= 5 * counting.counter.peak + 4 * workspace);
  }
}

TEST_CASE("peak_bytes of a sequence covers the measured peak in bf16 and under autocast") {
  const frontend::SequenceSpec spec = frontend::parse_sequence_spec("mlp", "8x32x64x16");
  const std::pair<DType, std::optional<DType>> cases[] = {
      {DType::kF32, std::nullopt}, {DType::kBF16, std::nullopt}, {DType::kF32, DType::kBF16}};
  for (const auto& c : cases) {  // not a structured binding: clang 14 (the lint stage) cannot capture one
    const DType given = c.first;
    const std::optional<DType> cast = c.second;
    CAPTURE(dtype_name(given));
    CAPTURE(cast.has_value());
    const DType computed = cast.value_or(given);
    const size_t counted = frontend::peak_bytes(spec, given, computed, kCPU);
    CountingScope counting;
    {
      std::optional<AutocastGuard> autocast;
      if (cast) autocast.emplace(*cast);
      frontend::Sequence seq = frontend::prepare_sequence(spec, given, kCPU, 1, /*requires_grad=*/true, SIZE_MAX, computed);
      CHECK(seq.bytes == counted);
      HarnessOptions o;
      o.warmup = 1;
      o.repeat = 2;
      Timeline t;
      DeviceSession session;
      run_harness(seq, o, t, session);
    }
    CHECK(counting.counter.peak <= counted);
    CHECK(counting.counter.peak > 0);
  }
  // The widened copies are counted: bf16 needs more than its own tensors, which are half of f32's.
  CHECK(frontend::peak_bytes(spec, DType::kBF16, DType::kBF16, kCPU) > frontend::required_bytes(spec, DType::kBF16));
}
