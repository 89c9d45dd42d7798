// Published dense peak throughput of the GPUs strata knows, from NVIDIA's datasheets (boost clock, no
// structured sparsity: the datasheets print sparse figures for tensor cores, which are twice these).
// A table and not a formula because the tensor-core rates per SM differ between SKUs of one architecture
// (H100 PCIe vs SXM) and are not queryable; a GPU that is not listed gets 0 and says so, never a guess.
// It lives in reports, not in the runtime: the runtime says what the device is, the report what that
// device's datasheet promises.
#include <cstdio>

#include "reports/model/peak_table.h"

namespace strata::reports {
namespace {

struct PeakEntry {
  const char* match;     // substring of cudaDeviceProp::name; the first matching entry wins
  const char* product;   // how the datasheet names it
  int cc_major, cc_minor;
  int sms;                           // SMs of the full part, which the figures are for
  double f64, f32, tf32, f16, bf16;  // TFLOP/s, dense; f64 = FP64 tensor core (what DGEMM uses)
};

// Most specific names first: "H200 NVL" before "H200", "H100 PCIe" before "H100".
constexpr PeakEntry kPeaks[] = {
    {"H200 NVL", "H200 NVL", 9, 0, 132, 60.0, 60.0, 417.5, 835.5, 835.5},
    {"H200", "H200 SXM", 9, 0, 132, 67.0, 67.0, 494.7, 989.4, 989.4},  // also GH200 (same GPU and clocks)
    {"H100 NVL", "H100 NVL", 9, 0, 132, 60.0, 60.0, 417.5, 835.5, 835.5},
    {"H100 PCIe", "H100 PCIe", 9, 0, 114, 51.2, 51.2, 378.0, 756.5, 756.5},
    {"H100", "H100 SXM", 9, 0, 132, 67.0, 67.0, 494.7, 989.4, 989.4},
    {"A100", "A100", 8, 0, 108, 19.5, 19.5, 156.0, 312.0, 312.0},
};

}  // namespace

PeakFlops published_peak(const std::string& device_name, int cc_major, int cc_minor, int sm_count, DType dtype,
                         bool tf32) {
  for (const PeakEntry& e : kPeaks) {
    if (device_name.find(e.match) == std::string::npos || e.cc_major != cc_major || e.cc_minor != cc_minor) continue;
    if (sm_count > e.sms) {
      return {0, "unknown: " + device_name + " has " + std::to_string(sm_count) + " SMs, more than the " +
                     std::to_string(e.sms) + " of the " + e.product + " in strata's table of published peaks"};
    }
    double tflops = 0;
    const char* what = "";
    switch (dtype) {
      case DType::kF64:
        tflops = e.f64;
        what = "f64 (FP64 tensor core)";
        break;
      case DType::kF32:
        tflops = tf32 ? e.tf32 : e.f32;
        what = tf32 ? "tf32 tensor core" : "f32 (CUDA cores)";
        break;
      case DType::kF16:
        tflops = e.f16;
        what = "f16 tensor core, f32 accumulate";
        break;
      case DType::kBF16:
        tflops = e.bf16;
        what = "bf16 tensor core, f32 accumulate";
        break;
    }
    char buf[320];
    std::snprintf(buf, sizeof buf, "NVIDIA datasheet, %s: %.1f TFLOP/s %s, dense, boost clock", e.product, tflops, what);
    std::string source = buf;
    // A MIG slice reports the parent's name with a fraction of its SMs; the peak scales with the SMs.
    if (sm_count > 0 && sm_count < e.sms) {
      std::snprintf(buf, sizeof buf, "; scaled to this device's %d of the %d SMs (a MIG slice?): %.1f TFLOP/s", sm_count,
                    e.sms, tflops * sm_count / e.sms);
      source += buf;
      tflops = tflops * sm_count / e.sms;
    }
    return {tflops * 1e12, source};
  }
  return {0, "unknown: strata's table of published peaks has no entry for " + device_name + " (compute capability " +
                 std::to_string(cc_major) + "." + std::to_string(cc_minor) + ")"};
}

}  // namespace strata::reports
