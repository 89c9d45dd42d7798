// strata_gpu_shaped_trace OUT.json: a GPU run's Chrome trace without a GPU. Hand-built records of the real
// CUPTI structs go through strata's real record conversion (layers/device/cupti) into a Timeline beside
// hand-built host spans, and strata's ChromeTraceWriter writes the file, as `strata trace --device cuda
// --chrome-trace` does after a CUDA run. tests/reports/hta_test.py loads it into Holistic Trace Analysis.
//
// Five matmul calls, 100 us apart; call 1 is the cold call, calls 2..5 are one ProfilerStep each. In each:
//   binding [0, 64] > dispatch CUDA [0.5, 63.5] > library "matmul (cuda)" [1, 62]
//     > "cublasGemmEx" [2, 12] > cuLaunchKernel [3, 8]       -> gemm kernel [15, 45] on stream 7
//     > cudaLaunchKernel [13, 17]                             -> bias kernel [45.5, 50] on stream 7
//     > cudaMemcpyAsync [18, 21]                              -> DtoH copy of 1 MiB [50.5, 60] on stream 7
//     > cudaStreamSynchronize [22, 61]                           (no GPU work; waits for the copy)
// (microseconds from the call's start), so the GPU is busy 44 us of every 100 and idle between calls.
#include <cupti.h>

#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "layers/device/cupti/cupti_trace.h"
#include "reports/formats/chrome_trace.h"
#include "tests/device/cupti/cupti_records.h"
#include "tests/reports/steady_clock.h"

using namespace strata;
using namespace strata::test;

namespace {

constexpr uint64_t kCallPeriodNs = 100'000;
constexpr uint64_t kStartNs = 1'000'000'000;  // any positive start: the writer subtracts the earliest event
constexpr uint32_t kStream = 7;
constexpr int kCalls = 5;

CUpti_ActivityMemcpy6 memcpy_record(uint64_t start, uint64_t end, uint32_t correlation, uint64_t bytes) {
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  m.bytes = bytes;
  m.start = start;
  m.end = end;
  m.deviceId = 0;
  m.contextId = 1;
  m.streamId = kStream;
  m.correlationId = correlation;
  return m;
}

// One call's host spans and CUPTI records (op id `op`, starting at `t`), converted as CUPTI delivers them.
void add_call(Timeline& t, cupti::RecordConverter& convert, uint32_t op, uint64_t t0) {
  auto at = [t0](double us) { return t0 + static_cast<uint64_t>(us * 1000); };
  const int32_t b = t.add_span(Layer::kBinding, "matmul", at(0), at(64), -1, op);
  const int32_t d = t.add_span(Layer::kDispatch, "CUDA", at(0.5), at(63.5), b, op);
  const int32_t l = t.add_span(Layer::kLibrary, "matmul (cuda)", at(1), at(62), d, op);
  t.add_span(Layer::kLibrary, "cublasGemmEx", at(2), at(12), l, op);

  const uint32_t c = op * 10;  // four correlation ids per call: c, c + 1, c + 2, c + 3
  auto launch = driver_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, at(3), at(8), c);
  auto gemm = kernel_record("sm90_xmma_gemm_f32f32_tn_n", at(15), at(45), c, at(8.5), at(14));
  gemm.streamId = kStream;
  auto bias_launch = runtime_record(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, at(13), at(17), c + 1);
  auto bias = kernel_record("_Z16bias_rows_kernelIfEvPKT_PS0_ll", at(45.5), at(50), c + 1);
  bias.streamId = kStream;
  bias.gridX = 64, bias.gridY = 1;
  bias.registersPerThread = 16, bias.staticSharedMemory = 0, bias.dynamicSharedMemory = 0;
  const auto copy_call =
      runtime_record(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, at(18), at(21), c + 2);
  const auto copy = memcpy_record(at(50.5), at(60), c + 2, 1 << 20);
  const auto sync =
      runtime_record(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, at(22), at(61), c + 3);
  std::vector<CUpti_ActivityExternalCorrelation> ext;
  for (uint32_t i = 0; i < 4; ++i) ext.push_back(external_record(c + i, op));
  // CUPTI delivers records grouped by buffer, not in time order.
  for (const void* r :
       std::initializer_list<const void*>{&gemm, &bias, &copy, &launch, &bias_launch, &copy_call, &sync,
                                          &ext[0], &ext[1], &ext[2], &ext[3]}) {
    if (!convert.add(r)) throw std::runtime_error("a synthetic CUPTI record was not converted");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
    return 2;
  }
  if (!steady_clock_in_use()) {
    std::fprintf(stderr,
                 "the host clock is not pinned to steady_clock: span ticks would not be nanoseconds\n");
    return 1;
  }
  Timeline t;
  cupti::RecordConverter convert(t.device);
  reports::TraceMetadata meta;
  for (int i = 0; i < kCalls; ++i) {
    const auto op = static_cast<uint32_t>(i + 1);
    add_call(t, convert, op, kStartNs + i * kCallPeriodNs);
    if (op > 1) meta.steps.push_back({op});  // the cold call (op 1) is no step
  }
  t.device.enabled = true;
  meta.gpus.push_back({0, "NVIDIA H100 80GB HBM3 (synthetic records)", 132, 9, 0, 85'520'809'984ULL});
  meta.unix_minus_host_ns = 1'795'000'000'000'000'000LL;  // a fixed epoch offset: the file is reproducible
  reports::ChromeTraceWriter writer;
  writer.add_timeline(t, "eager");
  writer.add_metadata("op", "matmul 1024 (synthetic CUPTI records, tests/device/cupti/gpu_shaped_trace.cpp)");
  writer.set_trace_metadata(meta);
  std::ofstream out(argv[1]);
  out << writer.str();
  if (!out.good()) {
    std::fprintf(stderr, "could not write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
