// Breakdown arithmetic (reports/model/breakdown.cpp) on hand-built timelines with known times: self time is a
// span minus its children, one dispatch row per key, wall from the first span to the last span or kernel,
// percentiles by nearest rank, and the device rows from synthetic CUPTI-like records.
#include "reports/model/breakdown.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "layers/binding/binding.h"
#include "layers/frontend/frontend.h"
#include "reports/model/report.h"
#include "tests/reports/steady_clock.h"

using namespace strata;
using namespace strata::reports;

namespace {

const BreakdownRow& row(const LayerBreakdown& b, const std::string& layer, const std::string& key = "") {
  for (const BreakdownRow& r : b.rows)
    if (row_kind_name(r.kind) == layer && r.key == key) return r;
  FAIL("no row " << layer << "/" << key);
  static BreakdownRow none;
  return none;
}

std::vector<std::string> row_ids(const LayerBreakdown& b) {
  std::vector<std::string> ids;
  for (const BreakdownRow& r : b.rows) ids.push_back(r.id());
  return ids;
}

// One call with op id `op` starting at `t0`, every layer's self time 10 * scale ns:
//   binding [0, 100s]  > Autograd [10s, 90s] > CPU [20s, 80s] > library [30s, 70s] > sgemm [40s, 60s]
// self: binding 20s, Autograd 20s, CPU 20s, library 20s + 20s = 40s; wall 100s.
void add_call(Timeline& t, uint32_t op, uint64_t t0, uint64_t s) {
  const int32_t b = t.add_span(Layer::kBinding, "matmul", t0, t0 + 100 * s, -1, op);
  const int32_t ag = t.add_span(Layer::kDispatch, "Autograd", t0 + 10 * s, t0 + 90 * s, b, op);
  const int32_t cpu = t.add_span(Layer::kDispatch, "CPU", t0 + 20 * s, t0 + 80 * s, ag, op);
  const int32_t lib = t.add_span(Layer::kLibrary, "matmul (cpu)", t0 + 30 * s, t0 + 70 * s, cpu, op);
  t.add_span(Layer::kLibrary, "cblas_sgemm", t0 + 40 * s, t0 + 60 * s, lib, op);
}

}  // namespace

TEST_CASE("the clock is pinned to steady_clock, so ticks are nanoseconds") {
  REQUIRE(test::steady_clock_in_use());
  Timeline t;
  CHECK(t.ns(12345) == 12345);
}

TEST_CASE("Distribution::of: nearest-rank median and p90, min, max, mean") {
  Distribution d = Distribution::of({5, 1, 3, 2, 4});
  CHECK(d.median == 3);
  CHECK(d.p90 == 5);  // rank ceil(0.9 * 5) = 5
  CHECK(d.min == 1);
  CHECK(d.max == 5);
  CHECK(d.mean == 3);
  CHECK(d.samples == std::vector<double>{5, 1, 3, 2, 4});  // call order is kept
  d = Distribution::of({10, 1, 9, 2, 8, 3, 7, 4, 6, 5});
  CHECK(d.median == 5);  // rank 5 of 10: the lower middle, a value that was measured
  CHECK(d.p90 == 9);     // rank 9 of 10
  d = Distribution::of({7});
  CHECK((d.median == 7 && d.p90 == 7 && d.min == 7 && d.max == 7 && d.mean == 7));
  d = Distribution::of({});
  CHECK(d.count() == 0);
  CHECK(d.median == 0);
}

TEST_CASE("spread_note: silent for an ordinary spread, names the figures and the context for a wide one") {
  // Ten calls around 100 us with a p90 under 1.5x the median: nothing to say.
  CHECK(spread_note(Distribution::of({100e3, 101e3, 99e3, 102e3, 100e3, 98e3, 103e3, 100e3, 140e3, 145e3}), "load").empty());
  CHECK(spread_note(Distribution::of({}), "").empty());
  CHECK(spread_note(Distribution::of({1e3}), "").empty());  // one sample has no spread
  // Two of ten calls 3x slower: p90 (rank 9) is 300 us against a 100 us median.
  std::string note = spread_note(Distribution::of({100e3, 100e3, 100e3, 100e3, 100e3, 100e3, 100e3, 100e3, 300e3, 300e3}),
                                 "load average 3.00 over the last minute on 2 CPUs");
  CHECK(note.find("3.0x") != std::string::npos);
  CHECK(note.find("300.00 us") != std::string::npos);
  CHECK(note.find("100.00 us") != std::string::npos);
  CHECK(note.find("load average 3.00") != std::string::npos);
  // The threshold is a parameter: exactly at the ratio counts as wide.
  CHECK(spread_note(Distribution::of({1e3, 1e3, 1e3, 1e3, 1e3, 1e3, 1e3, 1e3, 2e3, 2e3}), "", 2.5).empty());
  CHECK_FALSE(spread_note(Distribution::of({1e3, 1e3, 1e3, 1e3, 1e3, 1e3, 1e3, 1e3, 2e3, 2e3}), "", 2.0).empty());
}

TEST_CASE("span_self_ns subtracts direct children only") {
  REQUIRE(test::steady_clock_in_use());
  Timeline t;
  add_call(t, 1, 1000, 1);
  CHECK(span_self_ns(t) == std::vector<double>{20, 20, 20, 20, 20});
}

TEST_CASE("host rows: self time per layer, one dispatch row per key, wall, over several calls") {
  REQUIRE(test::steady_clock_in_use());
  Timeline t;
  add_call(t, 1, 1000, 1);
  add_call(t, 2, 5000, 3);
  add_call(t, 3, 9000, 2);
  add_call(t, 4, 20000, 50);  // not asked for: must not leak into the figures
  t.add_span(Layer::kHarness, "outside any op", 0, 100000, -1, 0);
  const std::vector<uint32_t> ids = {1, 2, 3};
  const LayerBreakdown b = compute_breakdown(t, ids);
  CHECK(b.calls == 3);
  CHECK(row_ids(b) == std::vector<std::string>{"binding", "dispatch/Autograd", "dispatch/CPU", "library",
                                               "launch", "queue", "gpu"});
  CHECK(row(b, "binding").ns.samples == std::vector<double>{20, 60, 40});
  CHECK(row(b, "binding").ns.median == 40);
  CHECK(row(b, "binding").ns.p90 == 60);
  CHECK(row(b, "dispatch", "Autograd").ns.samples == std::vector<double>{20, 60, 40});
  CHECK(row(b, "dispatch", "CPU").ns.samples == std::vector<double>{20, 60, 40});
  CHECK(row(b, "library").ns.samples == std::vector<double>{40, 120, 80});
  CHECK(row(b, "library").names == std::vector<std::string>{"matmul (cpu)", "cblas_sgemm"});
  CHECK(row(b, "binding").names == std::vector<std::string>{"matmul"});
  CHECK(b.wall.samples == std::vector<double>{100, 300, 200});
  // Without device records the device rows exist but are not applicable.
  CHECK_FALSE(b.has_device_records);
  CHECK_FALSE(row(b, "launch").applicable);
  CHECK_FALSE(row(b, "gpu").applicable);
  CHECK(b.kernels.empty());
}

TEST_CASE("the rows of one call add up to its wall time exactly") {
  REQUIRE(test::steady_clock_in_use());
  Timeline t;
  add_call(t, 1, 1000, 7);
  const std::vector<uint32_t> ids = {1};
  const LayerBreakdown b = compute_breakdown(t, ids);
  double sum = 0;
  for (const BreakdownRow& r : b.rows)
    if (r.applicable) sum += r.ns.median;
  CHECK(sum == b.wall.median);
  CHECK(b.wall.median == 700);
}

// A call made from Python (Note [The python and pybind11 rows]): python [0, 200s] > pybind11 [20s, 190s]
// > the C++ call of add_call at 50s (100s long). Self: python 20s + 10s = 30s, pybind11 30s + 40s = 70s.
void add_python_call(Timeline& t, uint32_t op, uint64_t t0, uint64_t s) {
  const int32_t py = t.add_span(Layer::kPython, "strata.matmul", t0, t0 + 200 * s, -1, op);
  const int32_t pb = t.add_span(Layer::kPybind11, "_strata.call", t0 + 20 * s, t0 + 190 * s, py, op);
  const int32_t b = t.add_span(Layer::kBinding, "matmul", t0 + 50 * s, t0 + 150 * s, pb, op);
  const int32_t cpu = t.add_span(Layer::kDispatch, "CPU", t0 + 60 * s, t0 + 140 * s, b, op);
  t.add_span(Layer::kLibrary, "cblas_sgemm", t0 + 70 * s, t0 + 130 * s, cpu, op);
}

TEST_CASE("python and pybind11 rows: self times first, only for calls that came from Python") {
  REQUIRE(test::steady_clock_in_use());
  Timeline t;
  add_python_call(t, 1, 1000, 1);
  add_python_call(t, 2, 5000, 2);
  add_call(t, 3, 9000, 1);
  const LayerBreakdown b = compute_breakdown(t, std::vector<uint32_t>{1, 2});
  CHECK(row_ids(b) == std::vector<std::string>{"python", "pybind11", "binding", "dispatch/CPU", "library", "launch",
                                               "queue", "gpu"});
  CHECK(row(b, "python").ns.samples == std::vector<double>{30, 60});
  CHECK(row(b, "pybind11").ns.samples == std::vector<double>{70, 140});
  CHECK(row(b, "binding").ns.samples == std::vector<double>{20, 40});
  CHECK(row(b, "python").names == std::vector<std::string>{"strata.matmul"});
  CHECK(row(b, "pybind11").names == std::vector<std::string>{"_strata.call"});
  CHECK(b.wall.samples == std::vector<double>{200, 400});  // from the python entry
  double sum = 0;
  for (const BreakdownRow& r : b.rows)
    if (r.applicable) sum += r.ns.samples[0];
  CHECK(sum == b.wall.samples[0]);  // every layer of the call, nothing counted twice
  CHECK(b.total(RowKind::kPython) == 90);
  CHECK(std::string(row_kind_name(RowKind::kPybind11)) == "pybind11");
  // A call from C++ has no python layer, not a zero-cost one.
  const LayerBreakdown c = compute_breakdown(t, std::vector<uint32_t>{3});
  CHECK(row_ids(c).front() == "binding");
  CHECK(c.total(RowKind::kPython) == 0);
}

TEST_CASE("device rows: launch, queue, gpu (union of overlapping kernels), unmatched records") {
  REQUIRE(test::steady_clock_in_use());
  Timeline t;
  // Op 1: binding [100, 200] > library [120, 190]; its launch call is inside the library zone.
  const int32_t b1 = t.add_span(Layer::kBinding, "matmul", 100, 200, -1, 1);
  t.add_span(Layer::kLibrary, "cublasGemmEx", 120, 190, b1, 1);
  // Op 2: binding [1000, 1100] > library [1010, 1090].
  const int32_t b2 = t.add_span(Layer::kBinding, "matmul", 1000, 1100, -1, 2);
  t.add_span(Layer::kLibrary, "cublasGemmEx", 1010, 1090, b2, 2);

  DeviceTrace& d = t.device;
  d.enabled = true;
  d.external = {{11, 1}, {12, 1}, {13, 1}, {21, 2}};
  auto api = [](const char* name, uint32_t corr, int64_t s, int64_t e, bool launch) {
    ApiCallRecord r;
    r.name = name;
    r.correlation_id = corr;
    r.start_ns = s;
    r.end_ns = e;
    r.is_launch = launch;
    return r;
  };
  d.api_calls = {api("cuLaunchKernelEx", 11, 150, 160, true),
                 api("cuLaunchKernelEx", 12, 170, 175, true),        // no kernel: an unmatched launch
                 api("cudaStreamSynchronize", 11, 176, 180, false),  // not a launch: not in the launch row
                 api("cuLaunchKernelEx", 21, 1050, 1070, true)};
  auto kernel = [](const char* name, uint32_t corr, int64_t s, int64_t e) {
    KernelRecord k;
    k.name = name;
    k.correlation_id = corr;
    k.start_ns = s;
    k.end_ns = e;
    k.grid[0] = 8;
    k.block[0] = 256;
    k.stream_id = 7;
    return k;
  };
  d.kernels = {kernel("gemm_a", 11, 300, 400),  // op 1: two overlapping kernels and one apart:
               kernel("gemm_b", 11, 350, 450),  //   union = [300, 450] + [500, 520] = 170
               kernel("gemm_a", 11, 500, 520),
               kernel("orphan", 13, 600, 700),  // op 1's correlation, but no launch: unmatched kernel
               kernel("other", 99, 0, 5000),    // belongs to no op of this breakdown: ignored
               kernel("gemm_a", 21, 1200, 1300)};
  const std::vector<uint32_t> ids = {1, 2};
  const LayerBreakdown b = compute_breakdown(t, ids);
  CHECK(b.has_device_records);
  CHECK(row(b, "launch").applicable);
  CHECK(row(b, "launch").ns.samples == std::vector<double>{15, 20});  // 10 + 5, and 20
  CHECK(row(b, "launch").names == std::vector<std::string>{"cuLaunchKernelEx"});
  CHECK(row(b, "queue").ns.samples == std::vector<double>{150, 150});  // 300 - 150, 1200 - 1050
  CHECK(row(b, "gpu").ns.samples == std::vector<double>{170, 100});
  CHECK(row(b, "gpu").names == std::vector<std::string>{"gemm_a", "gemm_b"});
  // Launch calls run inside the library zone: their time moves from library to launch.
  CHECK(row(b, "library").ns.samples == std::vector<double>{70 - 15, 80 - 20});
  CHECK(row(b, "binding").ns.samples == std::vector<double>{30, 20});
  // Wall runs to the end of the last kernel.
  CHECK(b.wall.samples == std::vector<double>{520 - 100, 1300 - 1000});
  CHECK(b.unmatched_launches == 1);
  CHECK(b.unmatched_kernels == 1);
  REQUIRE(b.kernels.size() == 2);
  CHECK(b.kernels[0].name == "gemm_a");
  CHECK(b.kernels[0].ns.samples == std::vector<double>{100, 20, 100});
  CHECK(b.kernels[0].grid[0] == 8);
  CHECK(b.kernels[0].block[0] == 256);
  CHECK(b.kernels[0].stream_id == 7);
  CHECK(b.kernels[1].ns.samples == std::vector<double>{100});
}

TEST_CASE("a real traced call: every row non-negative and the rows add up to the wall time") {
  const frontend::OpSpec spec = frontend::parse_op_spec("linear", "8x16x4");
  const frontend::PreparedCall call =
      frontend::prepare_call(spec, DType::kF32, kCPU, 3, true, frontend::available_host_bytes());
  Timeline t;
  {
    tracing::ActiveScope scope(&t);
    t.set_op(1);
    call.op->call(call.args);
    t.set_op(0);
  }
  const std::vector<uint32_t> ids = {1};
  const LayerBreakdown b = compute_breakdown(t, ids);
#if STRATA_TRACING
  CHECK(row_ids(b) == std::vector<std::string>{"binding", "dispatch/Autograd", "dispatch/CPU", "library",
                                               "launch", "queue", "gpu"});
  double sum = 0;
  for (const BreakdownRow& r : b.rows) {
    if (!r.applicable) continue;
    CHECK(r.ns.median >= 0);
    sum += r.ns.median;
  }
  CHECK(sum == doctest::Approx(b.wall.median).epsilon(1e-9));
  CHECK(b.wall.median > 0);
#endif
}

TEST_CASE("rows are kinds: one id per row, one way to total a row, words set on both breakdowns") {
  REQUIRE(test::steady_clock_in_use());
  Timeline t;
  add_call(t, 1, 1000, 1);
  add_call(t, 2, 5000, 2);
  const std::vector<uint32_t> ids = {1, 2};
  TraceReport rep;
  rep.steady = compute_breakdown(t, ids);
  rep.cold = compute_breakdown(t, std::vector<uint32_t>{1});
  CHECK(row(rep.steady, "dispatch", "CPU").id() == "dispatch/CPU");
  CHECK(row(rep.steady, "binding").total() == 20 + 40);
  CHECK(rep.steady.total(RowKind::kDispatch) == 20 + 40 + 20 + 40);  // both keys, both calls
  CHECK(rep.steady.total(RowKind::kRuntime) == 0);                    // no such row
  CHECK(std::string(row_kind_name(RowKind::kWall)) == "wall");
  rep.describe(RowKind::kDispatch, "CPU", "CPU kernel");
  rep.describe_na(RowKind::kGpu, "n/a here");
  rep.describe(RowKind::kWall, "", "first -> last");
  CHECK(row(rep.steady, "dispatch", "CPU").what == "CPU kernel");
  CHECK(row(rep.cold, "dispatch", "CPU").what == "CPU kernel");
  CHECK(row(rep.steady, "dispatch", "Autograd").what.empty());
  CHECK(row(rep.steady, "gpu").na_reason == "n/a here");
  CHECK(rep.steady.wall_what == "first -> last");
}
