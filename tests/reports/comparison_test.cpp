// The eager-vs-replay arithmetic, the verdict and graph-node attribution, on hand-built timelines.
#include <doctest/doctest.h>

#include <sstream>

#include "reports/model/comparison.h"
#include "reports/formats/table.h"
#include "tests/reports/steady_clock.h"

using namespace strata;
using namespace strata::reports;

namespace {

// One eager op: binding [b, b+100) > dispatch CPU [b+10, b+90) > library [b+20, b+80).
void add_eager_op(Timeline& t, uint32_t op, uint64_t b) {
  int32_t bind = t.add_span(Layer::kBinding, "matmul", b, b + 100, -1, op);
  int32_t disp = t.add_span(Layer::kDispatch, "CPU", b + 10, b + 90, bind, op);
  t.add_span(Layer::kLibrary, "cblas_sgemm", b + 20, b + 80, disp, op);
}

}  // namespace

TEST_CASE("eager figures are per op: round totals divided by K, median over rounds") {
  REQUIRE(test::kSteadyClockPinned);
  Timeline t;
  REQUIRE(test::steady_clock_in_use());
  // Two rounds of K = 2 ops each.
  add_eager_op(t, 1, 1000);
  add_eager_op(t, 2, 1200);
  add_eager_op(t, 3, 2000);
  add_eager_op(t, 4, 2200);
  ModeFigures f = mode_figures("eager", t, {{1, 2}, {3, 4}}, {300.0, 500.0}, 2);
  CHECK(f.binding == doctest::Approx(20.0));   // 100 - 80 per op
  CHECK(f.dispatch == doctest::Approx(20.0));  // 80 - 60
  CHECK(f.library == doctest::Approx(60.0));
  CHECK(f.runtime == doctest::Approx(0.0));
  CHECK(f.rounds == 2);
  CHECK(f.wall == doctest::Approx(150.0));      // nearest-rank median of {150, 250}
  CHECK(f.wall_p90 == doctest::Approx(250.0));
  CHECK_FALSE(f.has_device);
}

TEST_CASE("replay figures: one replay of K ops, its runtime loop and kernels divided by K") {
  REQUIRE(test::kSteadyClockPinned);
  Timeline t;
  // One replay (op 7) of K = 4: a runtime zone of 100 ns holding four library calls of 20 ns.
  int32_t rt = t.add_span(Layer::kRuntime, "plan replay", 0, 100, -1, 7);
  for (uint64_t i = 0; i < 4; ++i) t.add_span(Layer::kLibrary, "cblas_sgemm", 10 + 20 * i, 25 + 20 * i, rt, 7);
  ModeFigures f = mode_figures("plan replay", t, {{7}}, {120.0}, 4);
  CHECK(f.binding == 0);
  CHECK(f.dispatch == 0);
  CHECK(f.library == doctest::Approx(15.0));   // 4 x 15 / 4
  CHECK(f.runtime == doctest::Approx(10.0));   // (100 - 60) / 4
  CHECK(f.wall == doctest::Approx(30.0));
}

TEST_CASE("GPU idle between consecutive kernels of a round, per op") {
  REQUIRE(test::kSteadyClockPinned);
  Timeline t;
  t.device.enabled = true;
  int32_t rt = t.add_span(Layer::kRuntime, "cudaGraphLaunch", 0, 50, -1, 1);
  (void)rt;
  ApiCallRecord launch;
  launch.name = "cudaGraphLaunch";
  launch.start_ns = 5;
  launch.end_ns = 45;
  launch.correlation_id = 10;
  launch.is_launch = true;
  t.device.api_calls.push_back(launch);
  t.device.external.push_back({10, 1});
  // Three kernels of one graph launch: [100,200) [250,300) [290,400): gaps 50 and none (overlap).
  for (auto [s, e] : std::vector<std::pair<int64_t, int64_t>>{{100, 200}, {250, 300}, {290, 400}}) {
    KernelRecord k;
    k.name = "gemm";
    k.start_ns = s;
    k.end_ns = e;
    k.correlation_id = 10;
    k.graph_node_id = 1;
    t.device.kernels.push_back(k);
  }
  ModeFigures f = mode_figures("CUDA Graph", t, {{1}}, {400.0}, 2);
  CHECK(f.has_device);
  CHECK(f.gpu_idle == doctest::Approx(25.0));   // 50 ns of gaps / 2 ops
  CHECK(f.gpu == doctest::Approx(125.0));       // union 100 + 150 = 250 / 2
  CHECK(f.launch == doctest::Approx(20.0));     // 40 / 2
  CHECK(f.queue == doctest::Approx(47.5));      // (100 - 5) / 2
  CHECK(f.runtime == doctest::Approx(5.0));     // (50 - 40 inside the zone) / 2
}

TEST_CASE("verdict: overhead-bound vs compute-bound, and noise") {
  Comparison c;
  c.eager.label = "eager";
  c.replay.label = "plan replay";
  c.eager.binding = 300;
  c.eager.dispatch = 300;
  c.eager.library = 400;
  c.eager.wall = 1000;
  c.eager.wall_p90 = 1010;
  c.replay.library = 400;
  c.replay.wall = 450;
  c.replay.wall_p90 = 460;
  CHECK(c.speedup() == doctest::Approx(1000.0 / 450.0));
  CHECK(c.bound() == "overhead-bound");
  CHECK(c.compute_share() == doctest::Approx(0.4));
  std::string v = c.verdict();
  CHECK(v.find("overhead-bound") == 0);
  CHECK(v.find("cuts wall per op") != std::string::npos);

  c.eager.binding = 10;
  c.eager.dispatch = 10;
  c.eager.library = 960;
  c.eager.wall = 1000;
  c.replay.wall = 995;  // inside the 10 ns spread
  CHECK(c.bound() == "compute-bound");
  v = c.verdict();
  CHECK(v.find("compute-bound") == 0);
  CHECK(v.find("no difference beyond noise") != std::string::npos);

  // On a GPU the compute is the GPU's time per op, against the same wall.
  c.eager.has_device = true;
  c.eager.gpu = 800;
  CHECK(c.bound() == "compute-bound");
  CHECK(c.verdict().find("compute-bound: the GPU's") == 0);
  c.eager.gpu = 1;
  CHECK(c.bound() == "overhead-bound");
}

// The figures of `compare matmul 8 --frontend python` that were called compute-bound: the host rows are
// under half of the wall, but so is the library, and the rest fell in no row (the interpreter between
// zones). Time in no row is overhead, not compute.
TEST_CASE("verdict: time that falls in no row counts against compute") {
  Comparison c;
  c.eager.label = "eager";
  c.replay.label = "plan replay";
  c.eager.python = 250;
  c.eager.binding = 80;
  c.eager.dispatch = 70;
  c.eager.library = 230;
  c.eager.wall = 1000;
  c.eager.wall_p90 = 1100;
  c.replay.wall = 240;
  c.replay.wall_p90 = 250;
  CHECK(c.eager.host() / c.eager.wall < 0.5);  // what the old rule looked at alone
  CHECK(c.compute_share() == doctest::Approx(0.23));
  CHECK(c.bound() == "overhead-bound");
  const std::string v = c.verdict();
  CHECK(v.find("overhead-bound") == 0);
  CHECK(v.find("in no row 37.0%") != std::string::npos);
}

TEST_CASE("replayed kernels are attributed to the op that created their graph node") {
  DeviceTrace d;
  d.graph_nodes = {{101, 1, GraphNodeSource::kResourceCallback},
                   {102, 2, GraphNodeSource::kCaptureInfo},
                   {103, 3, GraphNodeSource::kResourceCallback},
                   {101, 9, GraphNodeSource::kCaptureInfo}};  // a duplicate: the first record wins
  KernelRecord eager_kernel;  // not from a graph
  d.kernels.push_back(eager_kernel);
  for (uint64_t node : {101, 102, 103, 999}) {
    KernelRecord k;
    k.graph_node_id = node;
    d.kernels.push_back(k);
  }
  GraphAttribution a = attribute_graph_kernels(d);
  CHECK(a.replayed_kernels == 4);
  CHECK(a.attributed == 3);
  CHECK(a.attributed_by_capture_info == 1);
  REQUIRE(a.op_of_kernel.size() == 5);
  CHECK(a.op_of_kernel[0] == 0);
  CHECK(a.op_of_kernel[1] == 1);
  CHECK(a.op_of_kernel[2] == 2);
  CHECK(a.op_of_kernel[3] == 3);
  CHECK(a.op_of_kernel[4] == 0);  // a node nobody recorded: reported as unattributed, never guessed
}

TEST_CASE("the comparison table marks host-timed cells under twice one probe's cost, and only those") {
  Comparison c;
  c.eager.label = "eager";
  c.replay.label = "plan replay";
  c.eager.binding = 30, c.eager.dispatch = 55, c.eager.library = 4000, c.eager.wall = 4100;
  c.replay.library = 4000, c.replay.runtime = 12, c.replay.wall = 4020;
  c.probe_ns = 20;
  std::ostringstream out;
  print_comparison_table("compare matmul", c, out);
  const std::string text = out.str();
  CHECK(text.find("0.03 us*") != std::string::npos);   // eager binding: 30 < 40
  CHECK(text.find("0.06 us*") == std::string::npos);   // eager dispatch: 55 >= 40
  CHECK(text.find("0.01 us*") != std::string::npos);   // replay runtime: 12 < 40
  CHECK(text.find("(eager binding, plan replay runtime)") != std::string::npos);
  CHECK(text.find("under twice the cost of one probe (0.02 us)") != std::string::npos);

  // On a GPU, launch/queue/gpu are CUPTI's figures: never marked against the host probe.
  c.eager.has_device = true;
  c.eager.gpu = 5, c.replay.gpu = 5, c.eager.launch = 3;
  std::ostringstream device_out;
  print_comparison_table("compare relu", c, device_out);
  CHECK(device_out.str().find("0.01 us*") != std::string::npos);  // still the replay runtime
  CHECK(device_out.str().find("(eager binding, plan replay runtime)") != std::string::npos);

  // No probe measured: nothing marked, no note.
  c.probe_ns = 0;
  std::ostringstream plain;
  print_comparison_table("compare matmul", c, plain);
  CHECK(plain.str().find('*') == std::string::npos);
  CHECK(plain.str().find("probe") == std::string::npos);
}
