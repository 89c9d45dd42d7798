// Named figures (reports/figures.*) and the notes rendered from them (reports/notes.*): the cold-call
// figures come from zone kinds, not zone names, and every note reads only figures.
#include "reports/model/figures.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "reports/formats/json_report.h"
#include "reports/formats/notes.h"
#include "reports/model/report.h"
#include "tests/reports/steady_clock.h"

using namespace strata;
using namespace strata::reports;

TEST_CASE("Figures: set keeps the first-set order and replaces a figure of the same name") {
  Figures f;
  f.set("b.count", 1, "count");
  f.set("a.ns", 2.5, "ns");
  f.set("b.count", 3, "count");
  REQUIRE(f.all().size() == 2);
  CHECK(f.all()[0].name == "b.count");
  CHECK(f.all()[0].value == 3);
  CHECK(f.find("a.ns")->unit == "ns");
  CHECK(f.find("missing") == nullptr);
  CHECK(f.value_or("missing", -1) == -1);
}

TEST_CASE("cold-call figures count zones by kind, whatever their names, and module loading inside the call") {
  REQUIRE(test::steady_clock_in_use());
  Timeline t;
  // The cold call (op 1): a handle, a search and two allocations under names no report knows.
  const int32_t b = t.add_span(Layer::kBinding, "matmul", 1000, 101000, -1, 1);
  t.add_span(Layer::kLibrary, "someLibCreate", 2000, 42000, b, 1, ZoneKind::kHandleCreation);
  t.add_span(Layer::kLibrary, "someLibTune", 50000, 60000, b, 1, ZoneKind::kAlgorithmSearch);
  t.add_span(Layer::kRuntime, "alloc", 70000, 71000, b, 1, ZoneKind::kDeviceMalloc);
  t.add_span(Layer::kRuntime, "alloc", 72000, 74000, b, 1, ZoneKind::kDeviceMalloc);
  // A handle created by another op does not count.
  t.add_span(Layer::kLibrary, "someLibCreate", 200000, 300000, -1, 2, ZoneKind::kHandleCreation);
  t.device.enabled = true;
  t.device.overhead.push_back({"lazy function loading", 80000, 90000});
  t.device.overhead.push_back({"module loading", 95000, 120000});      // clipped to the call: 6000
  t.device.overhead.push_back({"CUPTI buffer flush", 80000, 90000});  // not loading
  Figures f;
  add_device_trace_figures(f, t.device);
  add_cold_call_figures(f, t, 1, 5e6);
  CHECK(f.value_or("cold.host_ns", 0) == 100000);
  CHECK(f.value_or("cold.handle_creation_ns", 0) == 40000);
  CHECK(f.value_or("cold.algorithm_search_ns", 0) == 10000);
  CHECK(f.value_or("cold.cuda_malloc_ns", 0) == 3000);
  CHECK(f.value_or("cold.cuda_mallocs", 0) == 2);
  CHECK(f.value_or("cold.module_loading_ns", 0) == 16000);
  CHECK(f.value_or("cold.module_loads", 0) == 2);
  CHECK(cold_call_note(f) ==
        "cold call 100.00 us (host spans): cuBLAS/cuDNN handle creation 40.00 us, kernel module loading 16.00 us "
        "(2 CUPTI overhead records), algorithm search 10.00 us, cudaMalloc 3.00 us (2 blocks); context creation "
        "(5.00 ms) happened at session start and is not included");

  Figures none;
  add_cold_call_figures(none, t, 7, 0);  // no span of op 7
  CHECK(none.all().empty());
  CHECK(cold_call_note(none).empty());
}

TEST_CASE("the cold-call note without CUPTI says module loading is unknown") {
  Figures f;
  f.set("device_timing.enabled", 0, "bool");
  f.set("cold.host_ns", 2000, "ns");
  f.set("cold.context_creation_ns", 1000, "ns");
  CHECK(cold_call_note(f) == "cold call 2.00 us (host spans): no handle creation, module loading, search or "
                             "allocation seen; module loading unknown without CUPTI; context creation (1.00 us) "
                             "happened at session start and is not included");
}

TEST_CASE("notes rendered from figures: graph replay, unmatched records, the allocator") {
  Figures f;
  CHECK(graph_replay_note(f, false).empty());
  f.set("device_timing.enabled", 1, "bool");
  f.set("graph_replay.replayed_kernels", 0, "count");
  CHECK(graph_replay_note(f, false) == "graph replay: CUPTI reported no replayed kernels with graph node ids");
  CHECK(graph_replay_note(f, true).empty());
  f.set("graph_replay.replayed_kernels", 8, "count");
  f.set("graph_replay.attributed_kernels", 8, "count");
  CHECK(graph_replay_note(f, false) == "graph replay: 8 of 8 replayed kernels attributed to the op that created their graph node");
  f.set("graph_replay.attributed_kernels", 6, "count");
  CHECK(graph_replay_note(f, false) ==
        "graph replay: 6 of 8 replayed kernels attributed to the op that created their graph node (the rest: no node record)");
  f.set("graph_replay.attributed_by_capture_info", 2, "count");
  CHECK(graph_replay_note(f, false) ==
        "graph replay: 6 of 8 replayed kernels attributed to the op that created their graph node, 2 through the "
        "capture-info fallback (the rest: no node record)");
  f.set("graph_replay.attributed_by_capture_info", 6, "count");
  CHECK(graph_replay_note(f, false).find(", all through the capture-info fallback (no CUPTI node callbacks)") !=
        std::string::npos);

  CHECK(timestamp_note(f).empty());
  f.set("steady.launches_outside_zones", 0, "count");
  f.set("steady.kernels_before_launch", 0, "count");
  f.set("steady.kernels_latency_disordered", 0, "count");
  CHECK(timestamp_note(f).empty());
  f.set("steady.kernels_before_launch", 3, "count");
  CHECK(timestamp_note(f) == "CUPTI's timestamps disagree with strata's host clock (3 kernels starting before their "
                             "launch call): the launch and queue rows are not trustworthy (a sign that CUPTI's "
                             "host-clock timestamp callback is not in effect)");
  f.set("steady.launches_outside_zones", 2, "count");
  f.set("steady.kernels_latency_disordered", 1, "count");
  const std::string both = timestamp_note(f);
  CHECK(both.find("(2 launch calls in no host zone of their op, 3 kernels starting before their launch call)") !=
        std::string::npos);
  CHECK(both.find("; 1 kernels have queued/submitted timestamps out of order") != std::string::npos);

  CHECK(unmatched_launches_note(f).empty());
  f.set("steady.unmatched_launches", 0, "count");
  CHECK(unmatched_launches_note(f).empty());
  f.set("steady.unmatched_launches", 3, "count");
  f.set("steady.unmatched_kernels", 2, "count");
  CHECK(unmatched_launches_note(f) ==
        "3 launch calls of the timed calls returned success but have no kernel record (dropped records?)");
  CHECK(failed_launches_note(f).empty());
  f.set("steady.failed_launches", 4, "count");
  CHECK(failed_launches_note(f).rfind("4 launch calls of the timed calls returned an error", 0) == 0);
  CHECK(unmatched_kernels_note(f) == "2 kernels of the timed calls have no launch record; they count in no row");

  CHECK(allocator_note(f).empty());
  f.set("allocator.cuda_mallocs", 2, "count");
  f.set("allocator.bytes_reserved", 4 * 1024 * 1024, "bytes");
  f.set("allocator.cache_hits", 40, "count");
  CHECK(allocator_note(f).find("caching allocator: 2 cudaMalloc in this run (") == 0);
  CHECK(allocator_note(f).find(" reserved), 40 allocations served from the cache") != std::string::npos);
}

TEST_CASE("compare's check note reads both modes' errors and the tolerance from figures") {
  Figures f;
  CHECK(compare_check_note(f, "CUDA Graph").empty());
  f.set("check.eager_relative_error", 2e-7, "ratio");
  f.set("check.replay_relative_error", 3e-7, "ratio");
  f.set("check.tolerance", 1e-5, "ratio");
  CHECK(compare_check_note(f, "CUDA Graph") ==
        "check: relative error vs float64 reference: eager 2e-07, CUDA Graph 3e-07 (tolerance 1e-05): PASS");
  f.set("check.replay_relative_error", 0.5, "ratio");
  CHECK(compare_check_note(f, "plan replay").find("plan replay 0.5 (tolerance 1e-05): FAIL") != std::string::npos);
}

TEST_CASE("the achieved rate is measured once, and the JSON carries every figure") {
  TraceReport r;
  r.flops = 2000;
  r.bytes_moved = 8000;
  r.steady.wall = Distribution::of({1000});
  add_rate_figures(r);
  CHECK(r.figures.value_or("achieved_flops_per_s", 0) == doctest::Approx(2e9));
  CHECK(r.figures.value_or("achieved_bytes_per_s", 0) == doctest::Approx(8e9));
  r.figures.set("cupti.dropped_records", 0, "count");
  const auto doc = nlohmann::json::parse(trace_report_json(r));
  CHECK(doc["figures"]["cupti.dropped_records"]["value"] == 0);
  CHECK(doc["figures"]["cupti.dropped_records"]["unit"] == "count");
  CHECK(doc["figures"]["achieved_bytes_per_s"]["unit"] == "bytes/s");
  CHECK(doc["achieved_bytes_per_s"].get<double>() == doctest::Approx(8e9));  // the old field stays

  TraceReport idle;  // no wall, no rate: nothing invented
  idle.flops = 2000;
  add_rate_figures(idle);
  CHECK(idle.figures.all().empty());
}

TEST_CASE("the steady join figures carry every timestamp check, and checks of several steps sum field by field") {
  LayerBreakdown steady;
  steady.unmatched_launches = 5;
  steady.unmatched_kernels = 6;
  steady.timestamps = {1, 2, 3, 4};
  TimestampChecks more{10, 20, 30, 40};
  more += steady.timestamps;
  CHECK(more.launches_outside_zones == 11);
  CHECK(more.kernels_before_launch == 22);
  CHECK(more.kernels_without_latency == 33);
  CHECK(more.kernels_latency_disordered == 44);

  Figures f;
  add_steady_join_figures(f, steady);
  CHECK(f.value_or("steady.unmatched_launches", -1) == 5);
  CHECK(f.value_or("steady.unmatched_kernels", -1) == 6);
  CHECK(f.value_or("steady.launches_outside_zones", -1) == 1);
  CHECK(f.value_or("steady.kernels_before_launch", -1) == 2);
  CHECK(f.value_or("steady.kernels_without_latency", -1) == 3);
  CHECK(f.value_or("steady.kernels_latency_disordered", -1) == 4);
}

TEST_CASE("the reader is told about dropped records and about GPU timing being off, never silently") {
  auto notes_for = [](const DeviceTrace& trace) {
    reports::Figures figures;
    reports::add_device_trace_figures(figures, trace);
    return reports::device_trace_notes(figures, trace.unavailable_reason);
  };
  DeviceTrace trace;
  trace.enabled = true;
  CHECK(notes_for(trace).empty());

  trace.dropped_records = 3;
  auto notes = notes_for(trace);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "CUPTI dropped 3 activity records (its buffers were full): launch, queue and gpu rows may miss calls");

  trace.dropped_records = 0;
  trace.untimed_records = 2;
  notes = notes_for(trace);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("2 kernel, API or overhead records without timestamps") != std::string::npos);

  DeviceTrace off;
  off.enabled = false;
  off.unavailable_reason = "Nsight Systems already holds CUPTI's one subscription";
  notes = notes_for(off);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("GPU timing unavailable: Nsight Systems already holds") != std::string::npos);
  CHECK(notes[0].find("host timers only") != std::string::npos);
  off.unavailable_reason.clear();
  CHECK(notes_for(off)[0].find("CUPTI was not started") != std::string::npos);
}
