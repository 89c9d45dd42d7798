// The report builder (measure/report_builder.h): the words every front end's report carries, written
// once (Note [One report builder]). Rows are made by hand here, as the reports' own tests make them.
#include <doctest/doctest.h>

#include <string>

#include "lib/timeline.h"
#include "measure/report_builder.h"

namespace strata::measure {
namespace {

using reports::BreakdownRow;
using reports::Distribution;
using reports::RowKind;
using reports::TraceReport;

BreakdownRow row(RowKind kind, const std::string& key, double median_ns) {
  return {kind, key, {key.empty() ? "zone" : key}, Distribution::of({median_ns}), true, {}, {}};
}

const BreakdownRow& find(const reports::LayerBreakdown& breakdown, RowKind kind) {
  for (const BreakdownRow& r : breakdown.rows)
    if (r.kind == kind) return r;
  FAIL("no such row");
  return breakdown.rows.front();
}

TEST_CASE("the CPU's launch, queue and gpu rows are n/a with one reason each, in both breakdowns") {
  TraceReport report;
  for (RowKind kind : {RowKind::kLaunch, RowKind::kQueue, RowKind::kGpu}) {
    report.steady.rows.push_back({kind, "", {}, {}, false, {}, {}});
    report.cold.rows.push_back({kind, "", {}, {}, false, {}, {}});
  }
  describe_cpu_device_rows(report);
  CHECK(find(report.steady, RowKind::kLaunch).na_reason == "n/a on the CPU: no launch, the library call computes in place");
  CHECK(find(report.steady, RowKind::kQueue).na_reason == "n/a on the CPU: nothing is queued");
  CHECK(find(report.steady, RowKind::kGpu).na_reason == "n/a on the CPU: the compute is inside the library row");
  CHECK(find(report.cold, RowKind::kGpu).na_reason == find(report.steady, RowKind::kGpu).na_reason);
  describe_unrecorded_device_rows(report);
  CHECK(find(report.steady, RowKind::kLaunch).na_reason.rfind("not recorded: ", 0) == 0);
}

TEST_CASE("rows under twice the probe's cost are marked, and one note names exactly those") {
  TraceReport report;
  report.steady.rows = {row(RowKind::kBinding, "", 30), row(RowKind::kDispatch, "CPU", 39.9),
                        row(RowKind::kLibrary, "", 40), row(RowKind::kLaunch, "", 0)};
  report.steady.rows.back().applicable = false;  // an n/a row is never marked
  mark_rows_below_resolution(report, {.zone_ns = 20, .scope = ""});
  CHECK(report.steady.rows[0].below_resolution);
  CHECK(report.steady.rows[1].below_resolution);
  CHECK_FALSE(report.steady.rows[2].below_resolution);  // exactly twice: resolved
  CHECK_FALSE(report.steady.rows[3].below_resolution);
  REQUIRE(report.notes.size() == 1);
  CHECK(report.notes[0].rfind("rows marked * (binding, dispatch/CPU) have medians under twice the cost of one probe "
                              "(20 ns)", 0) == 0);

  SUBCASE("none marked: no note") {
    TraceReport fast;
    fast.steady.rows = {row(RowKind::kLibrary, "", 1000)};
    mark_rows_below_resolution(fast, {.zone_ns = 20, .scope = ""});
    CHECK(fast.notes.empty());
  }
  SUBCASE("the python rows against the Python probe, a sequence's rows per op") {
    TraceReport python;
    python.steady.rows = {row(RowKind::kPython, "", 90), row(RowKind::kBinding, "", 90)};
    mark_rows_below_resolution(python, {.zone_ns = 20, .python_ns = 50, .scope = ""});
    CHECK(python.steady.rows[0].below_resolution);        // 90 < 2 x 50
    CHECK_FALSE(python.steady.rows[1].below_resolution);  // 90 >= 2 x 20
    CHECK(python.notes.at(0).find("a Python probe's, for python and pybind11: 50 ns") != std::string::npos);
    TraceReport sequence;
    sequence.steady.rows = {row(RowKind::kBinding, "", 100)};
    mark_rows_below_resolution(sequence, {.zone_ns = 20, .spans_per_row = 3, .scope = " per op of the forward"});
    CHECK(sequence.steady.rows[0].below_resolution);  // 100 < 2 x 20 x 3
    CHECK(sequence.notes.at(0).find("(20 ns) per op of the forward: ") != std::string::npos);
  }
}

TEST_CASE("the wall row's words: where each front end starts and ends the call") {
  auto wall = [](Caller caller, WallEnd end, bool sequence = false) {
    TraceReport report;
    describe_wall_row(report, caller, end, sequence);
    return report.steady.wall_what;
  };
  CHECK(wall(Caller::kCpp, WallEnd::kLibrary) == "binding begin -> library end");
  CHECK(wall(Caller::kCpp, WallEnd::kKernel) == "binding begin -> last kernel end");
  CHECK(wall(Caller::kPython, WallEnd::kLibrary) == "python entry -> return");
  CHECK(wall(Caller::kPython, WallEnd::kKernel) == "python entry -> return / last kernel end");
  CHECK(wall(Caller::kPython, WallEnd::kReturn) == "python entry -> return");  // strata.profile()
  CHECK(wall(Caller::kCpp, WallEnd::kLibrary, true) == "first binding begin -> last library end");
  CHECK(wall(Caller::kCpp, WallEnd::kKernel, true) == "first binding begin -> last kernel end");
}

TEST_CASE("binding and kernel rows are worded from the schema and the key") {
  TraceReport report;
  report.schema = "matmul(Tensor self, Tensor other) -> Tensor";
  report.steady.rows = {row(RowKind::kBinding, "", 10), row(RowKind::kDispatch, "CPU", 10)};
  describe_binding_row(report);
  describe_kernel_row(report, "CPU");
  CHECK(report.steady.rows[0].what == "schema matmul(Tensor self, Tensor other)");
  CHECK(report.steady.rows[1].what == "CPU kernel: key set + table lookup");
  describe_kernel_row(report, "CPU", /*all_ops=*/true);
  CHECK(report.steady.rows[1].what == "CPU kernels: key set + table lookup, all ops");
}

TEST_CASE("a backward breakdown: an empty binding row is n/a, not below resolution - the engine's rows are worded") {
  reports::LayerBreakdown breakdown;
  breakdown.rows = {row(RowKind::kBinding, "", 0), row(RowKind::kDispatch, "Autograd", 500),
                    row(RowKind::kDispatch, "engine", 10)};
  describe_backward_breakdown(breakdown, 20);
  CHECK_FALSE(breakdown.rows[0].applicable);
  CHECK_FALSE(breakdown.rows[0].below_resolution);  // n/a, not a measurement under the probe's cost
  CHECK(breakdown.rows[0].na_reason.rfind("n/a: the engine calls each operator's typed entry point", 0) == 0);
  CHECK(breakdown.rows[1].what == "Autograd: record SumBackward, redispatch");
  CHECK_FALSE(breakdown.rows[1].below_resolution);
  CHECK(breakdown.rows[2].what == "engine: walk, buffers, accumulate, free");
  CHECK(breakdown.rows[2].below_resolution);  // 10 < 2 x 20
}

TEST_CASE("the key path is the op's own dispatch spans, not the calls a wrapper kernel made") {
  Timeline timeline(16);
  timeline.add_span(Layer::kDispatch, "Autocast", 0, 10, -1, 1);
  timeline.add_span(Layer::kDispatch, "to_copy:CPU", 1, 2, 0, 1);
  timeline.add_span(Layer::kDispatch, "CPU", 3, 9, 0, 1);
  timeline.add_span(Layer::kDispatch, "CPU", 20, 30, -1, 2);  // another op's
  timeline.add_span(Layer::kLibrary, "cblas_sgemm", 4, 8, 2, 1);
  CHECK(key_path(timeline, 1) == "Autocast > CPU");
  CHECK(key_path(timeline, 2) == "CPU");
  CHECK(key_path(timeline, 3).empty());
}

TEST_CASE("the notes a front end adds say what its calls went through") {
  TraceReport report;
  add_python_probe_note(report, 51.6);
  add_cpp_beside_python_peer_note(report);
  add_python_frontend_note(report);
  REQUIRE(report.notes.size() == 3);
  CHECK(report.notes[0].find("costing about 52 ns per call together") != std::string::npos);
  CHECK(report.notes[1].find("add --frontend python to compare like with like") != std::string::npos);
  CHECK(report.notes[2].rfind("with --frontend python the wall row runs from", 0) == 0);
}

TEST_CASE("the Environment is the machine's, and the CPU is named with its threads and loops") {
  const reports::Environment env = host_environment();
  CHECK_FALSE(env.strata_version.empty());
  CHECK(env.cpu_threads > 0);
  CHECK(env.blas_threads > 0);
  CHECK_FALSE(env.clock_source.empty());
  CHECK(env.clock_ns_per_tick > 0);
  CHECK(env.intra_op_threads > 0);
  CHECK_FALSE(env.cpu_loops.empty());
  CHECK(cpu_device_name(env) == "cpu (" + std::to_string(env.intra_op_threads) +
                                    (env.intra_op_threads == 1 ? " intra-op thread, " : " intra-op threads, ") +
                                    env.cpu_loops + " loops, " + std::to_string(env.blas_threads) +
                                    (env.blas_threads == 1 ? " OpenBLAS thread)" : " OpenBLAS threads)"));
}

}  // namespace
}  // namespace strata::measure
