// A real CUPTI session (label gpu), in its own process because CUPTI is started once per process (Note
// [One CUPTI session]). The session starts before the CUDA context, ops run through the CUDA kernels under
// their op ids, and after the forced flush every launch is tagged with its op and joined to its kernel,
// all on strata's host clock.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "layers/device/cupti/cupti_trace.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/zone.h"
#include "reports/model/breakdown.h"

using namespace strata;
namespace rt = strata::runtime::cuda;

TEST_CASE("one session: tagged launches from cuBLAS, cuDNN and strata's kernels join to their kernels") {
  const std::string reason = cupti::start_session();
  if (!reason.empty()) {
    // Under Nsight Systems / Compute the subscription is taken: that is a reason, not a failure.
    MESSAGE("CUPTI unavailable, nothing to check: " << reason);
    CHECK(reason.find("subscription") != std::string::npos);
    return;
  }
  CHECK(cupti::session_active());
  for (const std::string& w : cupti::session_warnings()) MESSAGE("CUPTI warning: " << w);
  rt::init_device(0);
  const Device gpu{DeviceType::kCUDA, 0};
  const Tensor a = frontend::random_tensor({256, 256}, DType::kF32, gpu, 1);
  const Tensor b = frontend::random_tensor({256, 256}, DType::kF32, gpu, 2);
  const Tensor x = frontend::random_tensor({2, 8, 16, 16}, DType::kF32, gpu, 3);
  const Tensor w = frontend::random_tensor({8, 8, 3, 3}, DType::kF32, gpu, 4);
  const Tensor bias = frontend::random_tensor({8}, DType::kF32, gpu, 5);

  Timeline timeline;
  const int64_t before = host_clock::now_ns();
  std::vector<uint32_t> ops;
  for (uint32_t op = 1; op <= 12; ++op) {
    tracing::ActiveScope scope(&timeline);
    timeline.set_op(op);
    cupti::push_op(op);
    {
      STRATA_ZONE(zone, Layer::kBinding, "call");
      switch (op % 3) {
        case 0: (void)kernels::cuda::matmul(a, b); break;
        case 1: (void)kernels::cuda::conv2d(x, w, bias, {1}, {1}, {1}, 1); break;
        case 2: (void)kernels::cuda::relu(a); break;
      }
    }
    cupti::pop_op();
    timeline.set_op(0);
    rt::synchronize(0);
    ops.push_back(op);
  }
  const int64_t after = host_clock::now_ns();
  cupti::finish_session(timeline.device);
  const DeviceTrace& d = timeline.device;
  REQUIRE(d.enabled);
  CHECK(d.dropped_records == 0);
  CHECK_FALSE(d.kernels.empty());
  CHECK_FALSE(d.external.empty());
  const auto launches = std::count_if(d.api_calls.begin(), d.api_calls.end(), [](const ApiCallRecord& r) { return r.is_launch; });
  CHECK(launches >= 12);

  // One clock: every device record of the run lies between two host readings taken around it. GPU
  // timestamps reach the host axis through CUPTI's linear interpolation, hence a small allowance.
  constexpr int64_t kSlackNs = 100'000;
  for (const KernelRecord& k : d.kernels) {
    CHECK(k.start_ns >= before - kSlackNs);
    CHECK(k.end_ns <= after + kSlackNs);
    CHECK(k.end_ns >= k.start_ns);
    if (k.queued_ns >= 0) CHECK(k.queued_ns <= k.start_ns);
  }
  const bool latency = std::any_of(d.kernels.begin(), d.kernels.end(), [](const KernelRecord& k) { return k.queued_ns >= 0; });
  if (!latency) MESSAGE("no kernel carried queued/submitted timestamps");

  // Skip the first three ops: they carry handle creation and algorithm search (cold calls).
  const std::vector<uint32_t> steady(ops.begin() + 3, ops.end());
  const reports::LayerBreakdown br = reports::compute_breakdown(timeline, steady);
  CHECK(br.has_device_records);
  CHECK(br.unmatched_launches == 0);
  CHECK(br.unmatched_kernels == 0);
  for (const reports::BreakdownRow& r : br.rows) {
    using reports::RowKind;
    if (r.kind == RowKind::kLaunch || r.kind == RowKind::kGpu || r.kind == RowKind::kQueue) {
      CAPTURE(r.id());
      CHECK(r.ns.min > 0);
    }
    if (r.kind == RowKind::kLaunch) {
      std::string names;
      for (const auto& n : r.names) names += n + " ";
      MESSAGE("launch calls seen: " << names);
    }
  }
  for (const auto& k : br.kernels) MESSAGE("kernel: " << k.name << "  median " << k.ns.median << " ns");
  CHECK(cupti::start_session().find("one session per process") != std::string::npos);
}
