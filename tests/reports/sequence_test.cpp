// Sequence figures (reports/model/sequence.cpp) on hand-built timelines with known times: the op log from the
// spans, each step's breakdown, the forward as rows summed over its steps, host tax against compute, and
// on a GPU (synthetic CUPTI-like records) the idle time between kernels, the launch share and the verdict.
#include "reports/formats/sequence_table.h"
#include "reports/model/sequence.h"

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "reports/model/report.h"
#include "tests/reports/steady_clock.h"

using namespace strata;
using namespace strata::reports;

namespace {

const BreakdownRow& row(const LayerBreakdown& b, RowKind kind, const std::string& key = "") {
  for (const BreakdownRow& r : b.rows)
    if (r.kind == kind && r.key == key) return r;
  FAIL("no row " << std::string(row_kind_name(kind)) << "/" << std::string(key));
  static BreakdownRow none;
  return none;
}

const char* kOps[] = {"linear", "relu", "linear"};
const char* kLibs[] = {"cblas_sgemm", "relu (cpu loop)", "cblas_sgemm"};

// Forward i, step j (op id 1 + 3i + j) starts at i * period + j * 200:
//   binding [0, 100] > dispatch `key` [10, 90] > library [20, 80]: self 20, 20, 60.
// On a GPU each step also launches one kernel ([30, 50] inside the library zone) that runs
// `kernel_ns` from `kernel_at(i, j)`.
struct Synthetic {
  Timeline t;
  std::vector<uint32_t> ids;
  Synthetic(size_t forwards, int64_t period, bool gpu, int64_t kernel_ns, int64_t kernel_gap) {
    REQUIRE(test::steady_clock_in_use());
    uint32_t corr = 100;
    if (gpu) t.device.enabled = true;
    for (size_t i = 0; i < forwards; ++i) {
      for (size_t j = 0; j < 3; ++j) {
        const uint32_t op = static_cast<uint32_t>(1 + 3 * i + j);
        ids.push_back(op);
        const auto t0 = static_cast<uint64_t>(int64_t(i) * period + int64_t(j) * 200);
        const int32_t b = t.add_span(Layer::kBinding, kOps[j], t0, t0 + 100, -1, op);
        const int32_t d = t.add_span(Layer::kDispatch, gpu ? "CUDA" : "CPU", t0 + 10, t0 + 90, b, op);
        t.add_span(Layer::kLibrary, gpu ? "cublasGemmEx" : kLibs[j], t0 + 20, t0 + 80, d, op);
        if (!gpu) continue;
        ++corr;
        t.device.external.push_back({corr, op});
        ApiCallRecord api;
        api.name = "cuLaunchKernelEx";
        api.start_ns = int64_t(t0) + 30;
        api.end_ns = int64_t(t0) + 50;
        api.correlation_id = corr;
        api.is_launch = true;
        t.device.api_calls.push_back(api);
        KernelRecord k;
        k.name = j == 1 ? "relu_kernel" : "gemm_kernel";
        k.start_ns = int64_t(i) * period + 100 + int64_t(j) * (kernel_ns + kernel_gap);
        k.end_ns = k.start_ns + kernel_ns;
        k.correlation_id = corr;
        t.device.kernels.push_back(k);
      }
    }
  }
};

}  // namespace

TEST_CASE("CPU sequence: op log from the spans, per-step rows, the forward summed, overhead-bound") {
  Synthetic s(4, 1000, false, 0, 0);
  const SequenceFigures f = compute_sequence(s.t, s.ids, 3, {"linear a", "relu b", "linear c"});
  CHECK(f.steps == 3);
  CHECK(f.forwards == 4);
  REQUIRE(f.per_step.size() == 3);
  for (size_t j = 0; j < 3; ++j) {
    CAPTURE(j);
    CHECK(f.per_step[j].op == kOps[j]);
    CHECK(f.per_step[j].keys == "CPU");
    CHECK(f.per_step[j].backend == kLibs[j]);
    CHECK(f.per_step[j].breakdown.calls == 4);
    CHECK(row(f.per_step[j].breakdown, RowKind::kLibrary).ns.median == 60);
    CHECK(f.per_step[j].breakdown.wall.median == 100);
  }
  CHECK(f.per_step[1].description == "relu b");
  // The forward: every row summed over its three steps, forward by forward.
  CHECK(row(f.total, RowKind::kBinding).ns.samples == std::vector<double>(4, 60));
  CHECK(row(f.total, RowKind::kDispatch, "CPU").ns.median == 60);
  CHECK(row(f.total, RowKind::kLibrary).ns.median == 180);
  CHECK(row(f.total, RowKind::kLibrary).names == std::vector<std::string>{"cblas_sgemm", "relu (cpu loop)"});
  CHECK_FALSE(row(f.total, RowKind::kGpu).applicable);
  // Wall: step 1's binding begin (0) to step 3's end (400 + 100).
  CHECK(f.forward_wall.samples == std::vector<double>(4, 500));
  CHECK(f.total.wall.median == 500);
  CHECK(f.host_tax.median == 120);  // (20 + 20) x 3
  CHECK(f.compute.median == 180);   // the library rows
  CHECK(f.outside.median == 200);   // 500 - 120 - 180: the gaps between the calls
  CHECK_FALSE(f.on_gpu);
  CHECK(f.compute_share == doctest::Approx(0.36));
  CHECK(f.verdict == "overhead-bound");
  CHECK(f.verdict_reason.find("36.0%") != std::string::npos);
  std::ostringstream out;
  print_sequence_table(f, out);
  CHECK(out.str().find("op log (one forward, 3 ops") != std::string::npos);
  CHECK(out.str().find("profile: overhead-bound") != std::string::npos);
}

TEST_CASE("CPU sequence: a library that fills the wall is compute-bound") {
  // One step per forward whose library zone takes 10 us of the 10.1 us wall.
  Timeline t;
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 3; ++i) {
    const uint64_t t0 = i * 100000;
    ids.push_back(i + 1);
    const int32_t b = t.add_span(Layer::kBinding, "linear", t0, t0 + 10100, -1, i + 1);
    const int32_t d = t.add_span(Layer::kDispatch, "CPU", t0 + 30, t0 + 10080, b, i + 1);
    t.add_span(Layer::kLibrary, "cblas_sgemm", t0 + 50, t0 + 10050, d, i + 1);
  }
  const SequenceFigures f = compute_sequence(t, ids, 1);
  CHECK(f.forwards == 3);
  CHECK(f.compute.median == 10000);
  CHECK(f.host_tax.median == 100);
  CHECK(f.verdict == "compute-bound");
}

TEST_CASE("GPU sequence: idle between kernels, launch share, host tax with the library's host work") {
  // Kernels of 50 ns, 150 ns apart: forward i has kernels at 100-150, 300-350, 500-550 (from i * 1000).
  Synthetic s(2, 1000, true, 50, 150);
  const SequenceFigures f = compute_sequence(s.t, s.ids, 3);
  REQUIRE(f.on_gpu);
  CHECK(f.kernels_per_forward == 3);
  CHECK(f.per_step[0].keys == "CUDA");
  CHECK(f.compute.median == 150);       // union of the three kernels
  CHECK(f.gpu_window.median == 450);    // 100 -> 550
  CHECK(f.kernel_idle.median == 300);   // the two 150 ns gaps
  CHECK(f.launch.median == 60);         // 3 launch calls of 20 ns
  CHECK(f.forward_wall.median == 550);  // first binding begin -> last kernel end
  // binding 20 + dispatch 20 + library (60 - the 20 ns launch inside it) 40 + launch 20, per step.
  CHECK(f.host_tax.median == 300);
  CHECK(row(f.total, RowKind::kLaunch).ns.median == 60);
  CHECK(f.launch_share == doctest::Approx(60.0 / 550));
  CHECK(f.idle_share == doctest::Approx(300.0 / 550));
  CHECK(f.verdict == "overhead-bound");
  CHECK(f.verdict_reason.find("idle") != std::string::npos);
  CHECK(f.total.kernels.size() == 3);  // each step's kernel summary, in step order
  std::ostringstream out;
  print_sequence_table(f, out);
  CHECK(out.str().find("GPU idle between kernels") != std::string::npos);
  CHECK(out.str().find("launch") != std::string::npos);
}

TEST_CASE("GPU sequence: kernels back to back that fill the wall are compute-bound") {
  // 3 us kernels with no gap: 9 us of kernels in a forward whose host part takes 500 ns.
  Synthetic s(3, 100000, true, 3000, 0);
  const SequenceFigures f = compute_sequence(s.t, s.ids, 3);
  REQUIRE(f.on_gpu);
  CHECK(f.compute.median == 9000);
  CHECK(f.kernel_idle.median == 0);
  CHECK(f.forward_wall.median == 9100);
  CHECK(f.verdict == "compute-bound");
}

TEST_CASE("a sequence with no complete forward yields no figures rather than a division by zero") {
  Synthetic s(1, 1000, false, 0, 0);
  const SequenceFigures f = compute_sequence(s.t, std::span<const uint32_t>(s.ids.data(), 2), 3);
  CHECK(f.forwards == 0);
  CHECK(f.per_step.empty());
}
