// Launch resolution and graph-node origins (layers/device/cupti, no cupti.h) over strata's own structs:
// the decisions finish_session makes once every CUPTI record is converted, on any machine.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "layers/device/cupti/graph_node_origins.h"
#include "layers/device/cupti/launch_resolution.h"

using namespace strata;

namespace {

ApiCallRecord launch_call(ApiDomain domain, int64_t start, int64_t end, uint32_t correlation, uint32_t thread = 1) {
  ApiCallRecord call;
  call.name = domain == ApiDomain::kRuntime ? "cudaLaunchKernel" : "cuLaunchKernel";
  call.domain = domain;
  call.start_ns = start;
  call.end_ns = end;
  call.correlation_id = correlation;
  call.thread_id = thread;
  call.is_launch = true;
  return call;
}

KernelRecord kernel_on(uint32_t correlation) {
  KernelRecord kernel;
  kernel.name = "k";
  kernel.correlation_id = correlation;
  return kernel;
}

}  // namespace

TEST_CASE("nested launches: of a runtime call and the driver call inside it, the one without work stops counting") {
  DeviceTrace trace;
  trace.api_calls = {launch_call(ApiDomain::kRuntime, 100, 200, 1), launch_call(ApiDomain::kDriver, 120, 180, 2),
                     launch_call(ApiDomain::kRuntime, 500, 600, 3), launch_call(ApiDomain::kDriver, 510, 590, 4),
                     // back to back, and on another thread at the same time: not nested
                     launch_call(ApiDomain::kDriver, 900, 950, 5), launch_call(ApiDomain::kDriver, 910, 940, 6, 7)};
  trace.kernels = {kernel_on(2), kernel_on(3), kernel_on(5), kernel_on(6)};
  CHECK(cupti::resolve_nested_launches(trace) == 2);
  const bool expected[] = {false, true, true, false, true, true};
  for (size_t i = 0; i < trace.api_calls.size(); ++i) {
    CAPTURE(i);
    CHECK(trace.api_calls[i].is_launch == expected[i]);
  }
}

TEST_CASE("internal launches count only where a kernel or memory record shares their correlation id") {
  DeviceTrace trace;
  for (uint32_t correlation : {1u, 2u, 3u}) {
    ApiCallRecord call = launch_call(ApiDomain::kDriver, 100 * correlation, 100 * correlation + 50, correlation);
    call.internal_launch = true;
    call.is_launch = false;
    trace.api_calls.push_back(call);
  }
  trace.kernels = {kernel_on(1)};
  trace.memory = {MemoryRecord{"memset", 64, 0, 1, 3, 0, 0}};
  cupti::resolve_launches(trace);
  CHECK(trace.api_calls[0].is_launch);
  CHECK_FALSE(trace.api_calls[1].is_launch);  // driver housekeeping: no work carries its id
  CHECK(trace.api_calls[2].is_launch);
}

TEST_CASE("graph node origins: first report wins, clones inherit their original's op, duplicates kept once") {
  using Source = GraphNodeSource;
  cupti::GraphNodeOrigins origins;
  CHECK(origins.add(100, 7, Source::kResourceCallback));
  CHECK(origins.add(101, 8, Source::kCaptureInfo));
  CHECK_FALSE(origins.add(100, 9, Source::kCaptureInfo));  // the fallback after the resource callback
  CHECK(origins.add_clone(200, 100));
  CHECK_FALSE(origins.add_clone(200, 100));  // the same clone reported twice
  CHECK_FALSE(origins.add_clone(200, 101));  // nor can a later report move it to another op
  CHECK_FALSE(origins.add_clone(300, 555));  // a clone of a node no op created stays unattributed
  CHECK(origins.add_clone(201, 200));        // a clone of a clone
  CHECK(origins.add_clone(202, 101));
  const std::vector<GraphNodeOrigin> nodes = origins.take();
  REQUIRE(nodes.size() == 5);
  const uint64_t ids[] = {100, 101, 200, 201, 202};
  const uint32_t ops[] = {7, 8, 7, 7, 8};
  const Source sources[] = {Source::kResourceCallback, Source::kCaptureInfo, Source::kResourceCallback,
                            Source::kResourceCallback, Source::kCaptureInfo};
  for (size_t i = 0; i < nodes.size(); ++i) {
    CAPTURE(i);
    CHECK(nodes[i].graph_node_id == ids[i]);
    CHECK(nodes[i].op_id == ops[i]);
    CHECK(nodes[i].source == sources[i]);
  }
  CHECK(origins.take().empty());
  CHECK(origins.add(100, 3, Source::kResourceCallback));  // take() emptied the index too
}

TEST_CASE("a clone keeps its original's step tag: a replayed kernel maps to its fused kernel") {
  cupti::GraphNodeOrigins origins;
  CHECK(origins.add(100, 7, GraphNodeSource::kResourceCallback, 12));
  CHECK(origins.add(101, 7, GraphNodeSource::kResourceCallback));  // created with no step pushed
  CHECK(origins.add_clone(200, 100));
  CHECK(origins.add_clone(201, 101));
  const std::vector<GraphNodeOrigin> nodes = origins.take();
  REQUIRE(nodes.size() == 4);
  const uint32_t tags[] = {12, 0, 12, 0};
  for (size_t i = 0; i < nodes.size(); ++i) {
    CAPTURE(i);
    CHECK(nodes[i].step_tag == tags[i]);
  }
}

TEST_CASE("op tags from the launch callbacks fill in only what external correlation records missed") {
  DeviceTrace trace;
  trace.external = {{10, 1}, {11, 1}};
  const size_t added = cupti::merge_callback_correlations(trace, {{10, 1}, {12, 2}, {12, 2}});
  CHECK(added == 1);
  REQUIRE(trace.external.size() == 3);
  CHECK(trace.external[2].correlation_id == 12);
  CHECK(trace.external[2].external_id == 2);
}

