// From CUPTI records to breakdown rows, without a GPU: hand-built records of the real CUPTI structs go
// through the real conversion (layers/device/cupti), land in a Timeline next to hand-built host spans, and
// reports::compute_breakdown joins them: API calls to ops through EXTERNAL_CORRELATION, kernels to launch
// calls through the correlation id, never by cbid. Overlapping kernels, launches from both domains in one
// op, and missing records on either side; and the Chrome trace written from them.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "layers/device/cupti/cupti_trace.h"
#include "reports/model/breakdown.h"
#include "reports/formats/chrome_trace.h"
#include "reports/checker/chrome_trace_check.h"
#include "tests/device/cupti/cupti_records.h"
#include "tests/reports/steady_clock.h"

using namespace strata;
using namespace strata::test;

namespace {

const reports::BreakdownRow& row(const reports::LayerBreakdown& b, const std::string& layer) {
  for (const reports::BreakdownRow& r : b.rows)
    if (reports::row_kind_name(r.kind) == layer) return r;
  FAIL("no row " << layer);
  static reports::BreakdownRow none;
  return none;
}

// Op 1: matmul through cuBLAS, one driver launch (cuLaunchKernelEx), one kernel.
//   binding [1000, 3000] > CUDA [1100, 2900] > matmul (cuda) [1200, 2800] > cublasGemmEx [1500, 2700]
//   cuLaunchKernelEx [1600, 2600]  ->  kernel [3500, 13500]
// Op 2: linear, a cuBLAS driver launch and a strata runtime launch whose kernels overlap on the GPU.
//   binding [20000, 24000] > linear (cuda) [20100, 23900]
//   cuLaunchKernelEx [20200, 20700] -> kernel A [25000, 30000];  __cudaLaunchKernel [21000, 21400] ->
//   kernel B [28000, 33000]; cudaGetLastError [21500, 21510] (tagged, not a launch)
// Op 3: records missing on both sides: a launch whose kernel record is lost, a kernel whose launch is.
//   binding [40000, 41000] > relu (cuda) [40100, 40900]; launch [40200, 40300] (no kernel);
//   kernel [42000, 43000] (no launch record)
// Op 4: launch and kernel whose EXTERNAL_CORRELATION record was dropped; the launch callback saw it.
// Plus a kernel of an op that is not being reported (op 9), which must not leak into any row.
Timeline build_timeline() {
  Timeline t;
  {
    const int32_t b = t.add_span(Layer::kBinding, "matmul", 1000, 3000, -1, 1);
    const int32_t d = t.add_span(Layer::kDispatch, "CUDA", 1100, 2900, b, 1);
    const int32_t l = t.add_span(Layer::kLibrary, "matmul (cuda)", 1200, 2800, d, 1);
    t.add_span(Layer::kLibrary, "cublasGemmEx", 1500, 2700, l, 1);
  }
  {
    const int32_t b = t.add_span(Layer::kBinding, "linear", 20000, 24000, -1, 2);
    t.add_span(Layer::kLibrary, "linear (cuda)", 20100, 23900, b, 2);
  }
  {
    const int32_t b = t.add_span(Layer::kBinding, "relu", 40000, 41000, -1, 3);
    t.add_span(Layer::kLibrary, "relu (cuda)", 40100, 40900, b, 3);
  }
  {
    const int32_t b = t.add_span(Layer::kBinding, "relu", 50000, 51000, -1, 4);
    t.add_span(Layer::kLibrary, "relu (cuda)", 50100, 50900, b, 4);
  }

  cupti::RecordConverter convert(t.device);
  const auto ext1 = external_record(100, 1);
  const auto launch1 = driver_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 1600, 2600, 100);
  const auto kernel1 = kernel_record("sm90_xmma_gemm_f32f32", 3500, 13500, 100, 2700, 2900);

  const auto ext2a = external_record(200, 2), ext2b = external_record(201, 2), ext2c = external_record(202, 2);
  const auto launch2a = driver_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 20200, 20700, 200);
  const auto launch2b = runtime_record(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 21000, 21400, 201);
  const auto error2 = runtime_record(CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020, 21500, 21510, 202);
  const auto kernel2a = kernel_record("gemm", 25000, 30000, 200);
  auto kernel2b = kernel_record("_Z16bias_rows_kernelIfEvPKT_PS0_ll", 28000, 33000, 201);
  kernel2b.streamId = 14;

  const auto ext3a = external_record(300, 3), ext3b = external_record(301, 3);
  const auto launch3 = runtime_record(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 40200, 40300, 300);
  const auto kernel3 = kernel_record("relu", 42000, 43000, 301);

  const auto launch4 = runtime_record(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 50200, 50400, 400);
  const auto kernel4 = kernel_record("relu", 52000, 52500, 400);

  const auto ext9 = external_record(900, 9);
  const auto launch9 = runtime_record(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 60000, 60100, 900);
  const auto kernel9 = kernel_record("other", 61000, 62000, 900);

  // CUPTI delivers records grouped by buffer, not in time order; the joins must not care.
  for (const void* r : std::initializer_list<const void*>{
           &kernel2b, &kernel1, &ext1, &launch1, &ext2a, &ext2b, &ext2c, &launch2a, &launch2b, &error2, &kernel2a,
           &kernel3, &ext3a, &ext3b, &launch3, &launch4, &kernel4, &ext9, &launch9, &kernel9}) {
    REQUIRE(convert.add(r));
  }
  CHECK(cupti::merge_callback_correlations(t.device, {{400, 4}, {100, 1}}) == 1);
  t.device.enabled = true;
  return t;
}

}  // namespace

TEST_CASE("the clock is pinned to steady_clock, so span ticks are the records' nanoseconds") {
  REQUIRE(test::steady_clock_in_use());
}

TEST_CASE("one op, one driver launch, one kernel: launch, queue and gpu rows, and library minus the launch") {
  const Timeline t = build_timeline();
  const std::vector<uint32_t> ops{1};
  const reports::LayerBreakdown b = reports::compute_breakdown(t, ops);
  CHECK(b.has_device_records);
  CHECK(row(b, "launch").ns.median == 1000);
  CHECK(row(b, "launch").names == std::vector<std::string>{"cuLaunchKernelEx"});
  CHECK(row(b, "queue").ns.median == 3500 - 1600);
  CHECK(row(b, "gpu").ns.median == 10000);
  CHECK(row(b, "gpu").names == std::vector<std::string>{"sm90_xmma_gemm_f32f32"});
  // matmul (cuda) self 400 + cublasGemmEx self 1200, of which 1000 was the launch call.
  CHECK(row(b, "library").ns.median == 600);
  CHECK(row(b, "binding").ns.median == 200);
  CHECK(b.wall.median == 13500 - 1000);
  REQUIRE(b.kernels.size() == 1);
  CHECK(b.kernels[0].grid[0] == 8);
  CHECK(b.kernels[0].shared_bytes == 1024 + 49152);
  CHECK(b.unmatched_launches == 0);
  CHECK(b.unmatched_kernels == 0);
}

TEST_CASE("launches from both domains in one op add up and overlapping kernels count once in gpu") {
  const Timeline t = build_timeline();
  const std::vector<uint32_t> ops{2};
  const reports::LayerBreakdown b = reports::compute_breakdown(t, ops);
  CHECK(row(b, "launch").ns.median == 500 + 400);  // cudaGetLastError is tagged with the op, but not a launch
  CHECK(row(b, "launch").names == std::vector<std::string>{"cuLaunchKernelEx", "__cudaLaunchKernel"});
  CHECK(row(b, "gpu").ns.median == 33000 - 25000);  // union of [25000, 30000] and [28000, 33000]
  CHECK(row(b, "queue").ns.median == 25000 - 20200);  // first kernel start - its own launch call's begin
  CHECK(b.wall.median == 33000 - 20000);
  REQUIRE(b.kernels.size() == 2);
  const auto bias = std::find_if(b.kernels.begin(), b.kernels.end(),
                                 [](const reports::KernelSummary& k) { return k.stream_id == 14; });
  REQUIRE(bias != b.kernels.end());
  CHECK(bias->name == "void bias_rows_kernel<float>(float const*, float*, long, long)");
}

TEST_CASE("missing records are counted, not guessed: a launch without kernel, a kernel without launch") {
  const Timeline t = build_timeline();
  const std::vector<uint32_t> ops{3};
  const reports::LayerBreakdown b = reports::compute_breakdown(t, ops);
  CHECK(b.unmatched_launches == 1);
  REQUIRE(b.unmatched_launch_examples.size() == 1);
  CHECK(b.unmatched_launch_examples[0].find("(correlation 300, ") != std::string::npos);
  CHECK(b.unmatched_kernels == 1);
  CHECK(row(b, "launch").ns.median == 100);
  CHECK(row(b, "gpu").ns.median == 0);
  CHECK(row(b, "queue").ns.median == 0);
  CHECK(b.wall.median == 1000);  // an unjoined kernel does not stretch the wall
}

TEST_CASE("a launch that returned an error is a failed launch, not a lost kernel record") {
  // cuDNN's algorithm search tries configurations the device refuses: the launch call returns an error
  // and puts nothing on the GPU. Its host time is launch time; the missing kernel is expected.
  Timeline t;
  const int32_t b = t.add_span(Layer::kBinding, "conv2d", 1000, 9000, -1, 1);
  t.add_span(Layer::kLibrary, "conv2d (cuda)", 1100, 8900, b, 1);
  cupti::RecordConverter convert(t.device);
  const auto ext_a = external_record(100, 1), ext_b = external_record(101, 1);
  auto refused = runtime_record(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 1200, 1500, 100);
  refused.returnValue = 9;  // cudaErrorInvalidConfiguration
  const auto launched = runtime_record(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 2000, 2300, 101);
  const auto kernel = kernel_record("implicit_convolve_sgemm", 4000, 7000, 101);
  for (const void* r : std::initializer_list<const void*>{&ext_a, &ext_b, &refused, &launched, &kernel})
    REQUIRE(convert.add(r));
  t.device.enabled = true;
  REQUIRE(t.device.api_calls.size() == 2);
  CHECK(t.device.api_calls[0].return_value == 9);
  const reports::LayerBreakdown br = reports::compute_breakdown(t, std::vector<uint32_t>{1});
  CHECK(br.failed_launches == 1);
  CHECK(br.unmatched_launches == 0);
  CHECK(br.unmatched_kernels == 0);
  CHECK(row(br, "launch").ns.median == 300 + 300);
}

TEST_CASE("a dropped EXTERNAL_CORRELATION record is made good by the launch callback's tag") {
  const Timeline t = build_timeline();
  const std::vector<uint32_t> ops{4};
  const reports::LayerBreakdown b = reports::compute_breakdown(t, ops);
  CHECK(row(b, "launch").ns.median == 200);
  CHECK(row(b, "gpu").ns.median == 500);
  CHECK(row(b, "queue").ns.median == 52000 - 50200);
}

TEST_CASE("timestamp checks: launches outside their op's zones, kernels before their launch, latency order") {
  const Timeline t = build_timeline();
  const std::vector<uint32_t> clean{1};
  const reports::TimestampChecks one = reports::compute_breakdown(t, clean).timestamps;
  CHECK(one.launches_outside_zones == 0);
  CHECK(one.kernels_before_launch == 0);
  CHECK(one.kernels_without_latency == 0);  // queued 2700 <= submitted 2900 <= start 3500
  CHECK(one.kernels_latency_disordered == 0);
  const std::vector<uint32_t> linear{2};
  CHECK(reports::compute_breakdown(t, linear).timestamps.kernels_without_latency == 2);
  // Op 9's launch has no host zone at all: on strata's clock every launch runs inside one.
  const std::vector<uint32_t> unzoned{9};
  CHECK(reports::compute_breakdown(t, unzoned).timestamps.launches_outside_zones == 1);

  // A clock that is not strata's: the launch lands after the op's zones, the kernel before the launch,
  // and the kernel was submitted before it was queued.
  Timeline skewed;
  const int32_t b = skewed.add_span(Layer::kBinding, "relu", 1000, 2000, -1, 1);
  skewed.add_span(Layer::kLibrary, "relu (cuda)", 1100, 1900, b, 1);
  cupti::RecordConverter convert(skewed.device);
  const auto ext = external_record(10, 1);
  const auto launch = runtime_record(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 5000, 5100, 10);
  const auto kernel = kernel_record("relu", 4000, 4500, 10, /*queued=*/3900, /*submitted=*/3800);
  for (const void* r : std::initializer_list<const void*>{&ext, &launch, &kernel}) REQUIRE(convert.add(r));
  skewed.device.enabled = true;
  const std::vector<uint32_t> ops{1};
  const reports::LayerBreakdown sb = reports::compute_breakdown(skewed, ops);
  CHECK(sb.timestamps.launches_outside_zones == 1);
  CHECK(sb.timestamps.kernels_before_launch == 1);
  CHECK(sb.timestamps.kernels_without_latency == 0);
  CHECK(sb.timestamps.kernels_latency_disordered == 1);

  reports::TimestampChecks sum = one;
  sum += sb.timestamps;
  sum += sb.timestamps;
  CHECK(sum.launches_outside_zones == 2);
  CHECK(sum.kernels_latency_disordered == 2);
}

TEST_CASE("distributions over several ops without another op's kernels leaking in") {
  const Timeline t = build_timeline();
  const std::vector<uint32_t> ops{1, 2, 3, 4};
  const reports::LayerBreakdown b = reports::compute_breakdown(t, ops);
  CHECK(row(b, "launch").ns.samples == std::vector<double>{1000, 900, 100, 200});
  CHECK(row(b, "gpu").ns.samples == std::vector<double>{10000, 8000, 0, 500});
  for (const auto& k : b.kernels) CHECK(k.name != "other");
  CHECK(b.unmatched_launches == 1);
  CHECK(b.unmatched_kernels == 1);
}

TEST_CASE("without device records the launch, queue and gpu rows say they are not applicable") {
  Timeline t = build_timeline();
  t.device.enabled = false;
  t.device.unavailable_reason = "no CUDA driver (cudaErrorInsufficientDriver)";
  const std::vector<uint32_t> ops{1};
  const reports::LayerBreakdown b = reports::compute_breakdown(t, ops);
  CHECK_FALSE(b.has_device_records);
  CHECK_FALSE(row(b, "launch").applicable);
  CHECK_FALSE(row(b, "queue").applicable);
  CHECK_FALSE(row(b, "gpu").applicable);
  CHECK(row(b, "library").ns.median == 1600);  // nothing is subtracted without launch records
}

// The same converted records, written as a Chrome trace: the fields HTA joins on (Note [Kineto trace
// layout]) come from the CUPTI records themselves, and every invariant holds.
TEST_CASE("the Chrome trace of converted records: correlation, cbid, External id, stream, steps, ac2g") {
  const Timeline t = build_timeline();
  reports::ChromeTraceWriter w;
  reports::TraceMetadata meta;
  meta.gpus.push_back({0, "NVIDIA H100 80GB HBM3", 132, 9, 0, 85'029'158'912ull});
  meta.steps = {{1}, {2}, {3}, {4}};
  meta.unix_minus_host_ns = 0;
  w.set_trace_metadata(meta);
  w.add_timeline(t, "eager");
  const std::string text = w.str();
  const std::vector<std::string> errors = reports::check_chrome_trace(text);
  for (const std::string& e : errors) FAIL_CHECK(e);
  const auto doc = nlohmann::json::parse(text);
  CHECK(doc["deviceProperties"][0]["numSms"] == 132);

  std::map<int64_t, nlohmann::json> api;  // correlation -> CUDA API event
  std::vector<nlohmann::json> kernels, steps;
  int flows = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat == "cuda_runtime" || cat == "cuda_driver") api[e["args"]["correlation"].get<int64_t>()] = e;
    if (cat == "kernel") kernels.push_back(e);
    if (cat == "user_annotation") steps.push_back(e);
    flows += e["ph"] == "s";
  }
  REQUIRE(api.count(100) == 1);
  CHECK(api[100]["cat"] == "cuda_driver");
  CHECK(api[100]["args"]["cbid"] == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx);
  CHECK(api[100]["args"]["External id"] == 1);
  CHECK(api[201]["cat"] == "cuda_runtime");
  CHECK(api[201]["args"]["cbid"] == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000);
  CHECK(api[400]["args"]["External id"] == 4);  // from the launch callback, the external record lost
  REQUIRE(kernels.size() == 6);
  for (const auto& k : kernels) {
    INFO(k.dump());
    CHECK(k["args"]["stream"].get<int64_t>() > 0);
    CHECK(k["args"]["stream"] == k["tid"]);
    CHECK(k["args"]["device"] == 0);
    const int64_t correlation = k["args"]["correlation"].get<int64_t>();
    if (correlation == 301) continue;  // its launch record was lost: no API event, no External id join
    REQUIRE(api.count(correlation) == 1);
    CHECK(k["args"]["External id"] == api[correlation]["args"]["External id"]);
  }
  const auto gemm = std::find_if(kernels.begin(), kernels.end(), [](const auto& k) { return k["args"]["correlation"] == 100; });
  REQUIRE(gemm != kernels.end());
  const auto& g = (*gemm)["args"];
  CHECK(g["grid"] == nlohmann::json::array({8, 4, 1}));
  CHECK(g["block"] == nlohmann::json::array({256, 1, 1}));
  CHECK(g["registers per thread"] == 96);
  CHECK(g["shared memory"] == 1024 + 49152);
  CHECK(g["context"] == 1);
  CHECK(g["queued"] == 1.7);  // 2700 ns; the trace's base is the first span, 1000 ns
  CHECK(g["submitted"] == 1.9);
  CHECK(g["blocks per SM"] == doctest::Approx(32.0 / 132));
  CHECK(g["warps per SM"] == doctest::Approx(32.0 / 132 * 8));
  // A step per op (op 9 is no step), each holding its op's spans and launch calls.
  REQUIRE(steps.size() == 4);
  CHECK(steps[0]["name"] == "ProfilerStep#1");
  CHECK(steps[0]["ts"] == 0.0);
  CHECK(steps[0]["dur"] == 2.0);
  // Launch calls with a kernel record: ops 1, 2 (two), 4 and 9; op 3's launch lost its kernel.
  CHECK(flows == 5);
}

// Note [Launches without a kernel]: a launch into a capturing stream is accounted for (no kernel can
// follow it); an unmatched one is placed in its zone, counted apart when that zone is an algorithm search,
// and its example names the calls nested inside it. Kernels on two streams: both streams listed, their
// durations summed apart from the union.
TEST_CASE("launches without a kernel: captured ones apart, unmatched ones placed in their zone") {
  Timeline t;
  const int32_t b = t.add_span(Layer::kBinding, "conv2d", 1000, 30000, -1, 1);
  const int32_t l = t.add_span(Layer::kLibrary, "conv2d (cuda)", 1100, 29000, b, 1);
  t.add_span(Layer::kLibrary, "cudnnFindConvolutionForwardAlgorithmEx", 1200, 20000, l, 1, ZoneKind::kAlgorithmSearch);
  cupti::RecordConverter convert(t.device);
  std::vector<CUpti_ActivityExternalCorrelation> tags;
  for (uint32_t corr = 100; corr <= 107; ++corr) tags.push_back(external_record(corr, 1));
  const CUpti_CallbackId launch = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  const auto searched = runtime_record(launch, 1300, 1600, 100);  // no kernel, in the search
  const auto nested = driver_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1350, 1550, 101);
  const auto begin = runtime_record(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, 2000, 2100, 102);
  const auto captured = runtime_record(launch, 2200, 2400, 103);  // no kernel: captured
  const auto end = runtime_record(CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, 2500, 2600, 104);
  const auto first = runtime_record(launch, 3000, 3200, 105);
  auto kernel_a = kernel_record("fft2d_r2c_32x32", 4000, 6000, 105);
  const auto outside = runtime_record(launch, 21000, 21200, 106);  // no kernel, outside the search
  const auto second = runtime_record(launch, 22000, 22200, 107);
  auto kernel_b = kernel_record("fft2d_r2c_32x32", 5000, 8000, 107);
  kernel_b.streamId = 14;
  for (const auto& tag : tags) REQUIRE(convert.add(&tag));
  for (const void* r : std::initializer_list<const void*>{&searched, &nested, &begin, &captured, &end, &first,
                                                          &kernel_a, &outside, &second, &kernel_b})
    REQUIRE(convert.add(r));
  cupti::resolve_launches(t.device);
  t.device.enabled = true;
  const reports::LayerBreakdown br = reports::compute_breakdown(t, std::vector<uint32_t>{1});
  CHECK(br.captured_launches == 1);
  CHECK(br.unmatched_launches == 2);
  CHECK(br.unmatched_launches_in_search == 1);
  CHECK(br.unmatched_launch_zones ==
        std::map<std::string, uint64_t>{{"cudnnFindConvolutionForwardAlgorithmEx", 1}, {"conv2d (cuda)", 1}});
  REQUIRE(br.unmatched_launch_examples.size() == 2);
  CHECK(br.unmatched_launch_examples[0] ==
        "cudaLaunchKernel (correlation 100, thread 4242, 300 ns, in cudnnFindConvolutionForwardAlgorithmEx, "
        "encloses cuLaunchKernel (correlation 101), before cudaStreamBeginCapture)");
  CHECK(br.unmatched_launch_examples[1] ==
        "cudaLaunchKernel (correlation 106, thread 4242, 200 ns, in conv2d (cuda), after cudaLaunchKernel, "
        "before cudaLaunchKernel)");
  REQUIRE(br.kernels.size() == 1);
  CHECK(br.kernels[0].streams == std::vector<uint32_t>{13, 14});
  CHECK(br.kernel_sum.median == 2000 + 3000);
  CHECK(row(br, "gpu").ns.median == 8000 - 4000);  // the union: the two kernels overlapped by 1000 ns
}
