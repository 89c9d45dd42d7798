// CUPTI record conversion (layers/device/cupti) fed hand-built records of the real CUPTI 13 structs:
// kernels with and without latency timestamps, API records from both domains with the launch cbids of
// CUDA 13, external correlation, memory and overhead records. Launch resolution and graph-node origins over
// plain structs: launch_resolution_test.cpp; the notes about drops: tests/reports/figures_test.cpp.
#include <doctest/doctest.h>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "layers/device/cupti/cupti_trace.h"
#include "tests/device/cupti/cupti_records.h"

using namespace strata;
using namespace strata::test;

TEST_CASE("a CONCURRENT_KERNEL record becomes a KernelRecord with every field, names demangled") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  const auto k = kernel_record("_Z11relu_kernelIfEvPKT_PS0_l", 5000, 9000, 77, /*queued=*/4100, /*submitted=*/4200);
  CHECK(convert.add(&k));
  REQUIRE(trace.kernels.size() == 1);
  const KernelRecord& r = trace.kernels[0];
  CHECK(r.name == "void relu_kernel<float>(float const*, float*, long)");
  CHECK(r.start_ns == 5000);
  CHECK(r.end_ns == 9000);
  CHECK(r.queued_ns == 4100);
  CHECK(r.submitted_ns == 4200);
  CHECK(r.correlation_id == 77);
  CHECK(r.context_id == 1);
  CHECK(r.stream_id == 13);
  CHECK(r.grid[0] == 8);
  CHECK(r.grid[1] == 4);
  CHECK(r.grid[2] == 1);
  CHECK(r.block[0] == 256);
  CHECK(r.registers_per_thread == 96);
  CHECK(r.static_shared_bytes == 1024);
  CHECK(r.dynamic_shared_bytes == 49152);
  CHECK(r.graph_node_id == 0);
}

TEST_CASE("kernel names that are not mangled (cuBLAS's) are kept as they are") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  const auto k = kernel_record("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32", 1, 2, 1);
  convert.add(&k);
  CHECK(trace.kernels.at(0).name == "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32");
}

// Note [A kernel's name is copied when its record is read]: CUPTI's name belongs to the kernel's module;
// after a cuModuleUnload the same address may hold another kernel's name, or garbage. Each record's name is
// its own copy, read from the text, never from a cache keyed by the address.
TEST_CASE("a kernel name is copied from its text: an address reused for another name gives that name") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  char module_names[64] = "fused_add_relu";  // one module's name, at one address
  const auto first = kernel_record(module_names, 1, 2, 1);
  convert.add(&first);
  std::snprintf(module_names, sizeof(module_names), "%s", "fused_pow_mul_tanh");  // unloaded; another loaded there
  const auto second = kernel_record(module_names, 3, 4, 2);
  convert.add(&second);
  std::snprintf(module_names, sizeof(module_names), "%s", "\x9f\x9f freed");  // and then freed
  REQUIRE(trace.kernels.size() == 2);
  CHECK(trace.kernels[0].name == "fused_add_relu");
  CHECK(trace.kernels[1].name == "fused_pow_mul_tanh");
}

TEST_CASE("a kernel record with no name is named so") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  const auto k = kernel_record(nullptr, 1, 2, 1);
  convert.add(&k);
  CHECK(trace.kernels.at(0).name == "(unnamed kernel)");
}

TEST_CASE("latency timestamps CUPTI did not collect are -1, not 0") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  const auto k = kernel_record("k", 100, 200, 1);  // queued/submitted = CUPTI_TIMESTAMP_UNKNOWN
  convert.add(&k);
  CHECK(trace.kernels.at(0).queued_ns == -1);
  CHECK(trace.kernels.at(0).submitted_ns == -1);
}

TEST_CASE("kernel, API and overhead records CUPTI could not time (start = end = 0) are left out and counted") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  const auto untimed_kernel = kernel_record("k", 0, 0, 1);
  const auto untimed_api = driver_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 0, 0, 1);
  const auto backwards = kernel_record("k", 500, 400, 2);  // end before start: no usable interval either
  const auto timed = kernel_record("k", 100, 200, 3);
  CUpti_ActivityOverhead3 untimed_overhead{};
  untimed_overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  untimed_overhead.overheadKind = CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING;
  CHECK_FALSE(convert.add(&untimed_kernel));
  CHECK_FALSE(convert.add(&untimed_api));
  CHECK_FALSE(convert.add(&backwards));
  CHECK_FALSE(convert.add(&untimed_overhead));
  CHECK(convert.add(&timed));
  CHECK(trace.untimed_records == 4);
  CHECK(convert.ignored() == 0);  // a kind strata uses, not an ignored one
  REQUIRE(trace.kernels.size() == 1);
  CHECK(trace.kernels[0].correlation_id == 3);
  CHECK(trace.api_calls.empty());
  CHECK(trace.overhead.empty());
}

TEST_CASE("graph-replayed kernels keep their graph node and graph ids") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  auto k = kernel_record("k", 100, 200, 1);
  k.graphNodeId = 0x1234567890ull;
  k.graphId = 3;
  convert.add(&k);
  CHECK(trace.kernels.at(0).graph_node_id == 0x1234567890ull);
  CHECK(trace.kernels.at(0).graph_id == 3);
}

TEST_CASE("runtime and driver API records: domain, name without version suffix, launch flag") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  const auto rt_launch = runtime_record(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 10, 20, 1);
  const auto rt_sync = runtime_record(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 30, 40, 2);
  const auto drv_launch = driver_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 50, 60, 3);
  const auto drv_copy = driver_record(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, 70, 80, 4);
  for (const auto* r : {&rt_launch, &rt_sync, &drv_launch, &drv_copy}) CHECK(convert.add(r));
  REQUIRE(trace.api_calls.size() == 4);

  CHECK(trace.api_calls[0].domain == ApiDomain::kRuntime);
  CHECK(trace.api_calls[0].name == "__cudaLaunchKernel");
  CHECK(trace.api_calls[0].cbid == CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000);
  CHECK(trace.api_calls[0].is_launch);
  CHECK(trace.api_calls[0].start_ns == 10);
  CHECK(trace.api_calls[0].end_ns == 20);
  CHECK(trace.api_calls[0].correlation_id == 1);
  CHECK(trace.api_calls[0].thread_id == 4242);

  CHECK(trace.api_calls[1].name == "cudaStreamSynchronize");
  CHECK_FALSE(trace.api_calls[1].is_launch);

  CHECK(trace.api_calls[2].domain == ApiDomain::kDriver);
  CHECK(trace.api_calls[2].name == "cuLaunchKernelEx");
  CHECK(trace.api_calls[2].is_launch);

  CHECK(trace.api_calls[3].domain == ApiDomain::kDriver);
  CHECK(trace.api_calls[3].name == "cuMemcpyHtoD");
  CHECK_FALSE(trace.api_calls[3].is_launch);
}

TEST_CASE("every kernel and graph launch cbid of both domains is a launch but host functions and copies are not") {
  using cupti::is_launch_api;
  for (CUpti_CallbackId cbid :
       {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000}) {
    CAPTURE(cbid);
    CHECK(is_launch_api(ApiDomain::kRuntime, cbid));
  }
  for (CUpti_CallbackId cbid :
       {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz}) {
    CAPTURE(cbid);
    CHECK(is_launch_api(ApiDomain::kDriver, cbid));
  }
  CHECK_FALSE(is_launch_api(ApiDomain::kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000));
  CHECK_FALSE(is_launch_api(ApiDomain::kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020));
  CHECK_FALSE(is_launch_api(ApiDomain::kDriver, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize));
  // The same number means different calls in the two domains: the domain decides.
  CHECK_FALSE(is_launch_api(ApiDomain::kDriver, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000));
}

TEST_CASE("INTERNAL_LAUNCH_API records are launches only when a kernel or memory record shares their id") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  const auto with_kernel = api_record(CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API, 0, 10, 20, 9);
  const auto with_copy = api_record(CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API, 0, 30, 40, 10);
  const auto housekeeping = api_record(CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API, 0, 50, 60, 11);
  const auto kernel = kernel_record("k", 100, 200, 9);
  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.start = 300;
  set.end = 310;
  set.correlationId = 10;
  // A public launch whose kernel record was lost stays a launch: it is counted as unmatched, not hidden.
  const auto public_launch = driver_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 70, 80, 12);
  for (const void* r : std::initializer_list<const void*>{&with_kernel, &with_copy, &housekeeping, &kernel, &set,
                                                           &public_launch}) {
    CHECK(convert.add(r));
  }
  REQUIRE(trace.api_calls.size() == 4);
  CHECK(trace.api_calls[0].domain == ApiDomain::kDriver);
  CHECK(trace.api_calls[0].name == "driver-internal launch");
  CHECK(trace.api_calls[0].internal_launch);
  CHECK_FALSE(trace.api_calls[0].is_launch);  // undecided until every record is in

  CHECK(cupti::resolve_internal_launches(trace) == 2);
  CHECK(trace.api_calls[0].is_launch);
  CHECK(trace.api_calls[1].is_launch);
  CHECK_FALSE(trace.api_calls[2].is_launch);
  CHECK(trace.api_calls[3].is_launch);
  CHECK_FALSE(trace.api_calls[3].internal_launch);
}

TEST_CASE("external correlation: strata's CUSTOM0 op and CUSTOM1 step tags are kept, other kinds ignored") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  const auto ours = external_record(41, 7);
  const auto openacc = external_record(42, 99, CUPTI_EXTERNAL_CORRELATION_KIND_OPENACC);
  const auto step = external_record(43, 98, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1);
  const auto custom2 = external_record(44, 97, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2);
  CHECK(convert.add(&ours));
  CHECK_FALSE(convert.add(&openacc));
  CHECK(convert.add(&step));
  CHECK_FALSE(convert.add(&custom2));
  REQUIRE(trace.external.size() == 1);
  CHECK(trace.external[0].correlation_id == 41);
  CHECK(trace.external[0].external_id == 7);
  REQUIRE(trace.step_tags.size() == 1);
  CHECK(trace.step_tags[0].correlation_id == 43);
  CHECK(trace.step_tags[0].external_id == 98);
  CHECK(convert.ignored() == 2);
}

TEST_CASE("memcpy, memset and overhead records") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.bytes = 4096;
  copy.start = 100;
  copy.end = 300;
  copy.deviceId = 1;
  copy.streamId = 14;
  copy.correlationId = 5;
  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.bytes = 512;
  set.start = 400;
  set.end = 450;
  set.correlationId = 6;
  CUpti_ActivityOverhead3 load{};
  load.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  load.overheadKind = CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING;
  load.start = 1000;
  load.end = 90000;
  CHECK(convert.add(&copy));
  CHECK(convert.add(&set));
  CHECK(convert.add(&load));
  REQUIRE(trace.memory.size() == 2);
  CHECK(trace.memory[0].kind == "HtoD");
  CHECK(trace.memory[0].bytes == 4096);
  CHECK(trace.memory[0].start_ns == 100);
  CHECK(trace.memory[0].end_ns == 300);
  CHECK(trace.memory[0].device_id == 1);
  CHECK(trace.memory[0].stream_id == 14);
  CHECK(trace.memory[0].correlation_id == 5);
  CHECK(trace.memory[1].kind == "memset");
  CHECK(trace.memory[1].bytes == 512);
  REQUIRE(trace.overhead.size() == 1);
  CHECK(trace.overhead[0].kind == "lazy function loading");
  CHECK(trace.overhead[0].start_ns == 1000);
  CHECK(trace.overhead[0].end_ns == 90000);
}

TEST_CASE("kinds strata does not use are counted and change nothing") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  CUpti_ActivityAPI marker{};
  marker.kind = CUPTI_ACTIVITY_KIND_MARKER;
  CHECK_FALSE(convert.add(&marker));
  CHECK(convert.ignored() == 1);
  CHECK(trace.api_calls.empty());
  CHECK(trace.kernels.empty());
}

TEST_CASE("a launch nested in another launch on the same thread counts once: the one that enqueued the kernel") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  // A runtime launch implemented by a driver launch, kernel tagged with the driver call's id...
  const auto outer1 = runtime_record(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 100, 200, 1);
  const auto inner1 = driver_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 120, 180, 2);
  const auto k1 = kernel_record("k1", 300, 400, 2);
  // ...and one whose kernel carries the runtime call's id.
  const auto outer2 = runtime_record(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 500, 600, 3);
  const auto inner2 = driver_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 510, 590, 4);
  const auto k2 = kernel_record("k2", 700, 800, 3);
  // Back-to-back launches and overlapping launches on another thread are not nested.
  const auto next = driver_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 900, 950, 5);
  const auto k3 = kernel_record("k3", 960, 990, 5);
  const auto other_thread = driver_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 910, 940, 6, /*thread=*/7);
  const auto k4 = kernel_record("k4", 995, 999, 6);
  for (const void* r : std::initializer_list<const void*>{&outer1, &inner1, &k1, &outer2, &inner2, &k2, &next, &k3,
                                                          &other_thread, &k4}) {
    convert.add(r);
  }
  CHECK(cupti::resolve_nested_launches(trace) == 2);
  auto launch = [&](uint32_t corr) {
    for (const ApiCallRecord& a : trace.api_calls)
      if (a.correlation_id == corr) return a.is_launch;
    FAIL("no record " << corr);
    return false;
  };
  CHECK_FALSE(launch(1));
  CHECK(launch(2));
  CHECK(launch(3));
  CHECK_FALSE(launch(4));
  CHECK(launch(5));
  CHECK(launch(6));
}

TEST_CASE("a nested launch that carries its outer call's correlation id counts once, as the outer call") {
  DeviceTrace trace;
  cupti::RecordConverter convert(trace);
  const auto outer = runtime_record(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 100, 200, 7);
  const auto inner = driver_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 120, 180, 7);
  const auto k = kernel_record("k", 300, 400, 7);
  for (const void* r : std::initializer_list<const void*>{&outer, &inner, &k}) convert.add(r);
  CHECK(cupti::resolve_nested_launches(trace) == 1);
  REQUIRE(trace.api_calls.size() == 2);
  for (const ApiCallRecord& a : trace.api_calls) CHECK(a.is_launch == (a.domain == ApiDomain::kRuntime));
}

TEST_CASE("api_name falls back to the domain and cbid when CUPTI has no name for it") {
  const std::string name = cupti::api_name(ApiDomain::kDriver, 999999);
  CHECK(name == "driver API cbid 999999");
}
