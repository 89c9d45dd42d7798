// Role: model.
// Published dense peak throughput of the GPUs strata knows (NVIDIA datasheets), for the "% of peak" the
// table prints. The runtime gives the device's properties; this turns them into the datasheet figure.
#pragma once

#include <string>

#include "lib/dtype.h"

namespace strata::reports {

struct PeakFlops {
  double flops = 0;    // dense, per second; 0 when unknown
  std::string source;  // where the figure comes from, in words
};

// Dense peak of the device for math in `dtype` (tf32 = f32 inputs on TF32 tensor cores), from NVIDIA's
// published datasheet figures for the GPUs strata knows, scaled down when the device has fewer SMs than
// the full part (a MIG slice); 0 with the reason otherwise.
PeakFlops published_peak(const std::string& device_name, int cc_major, int cc_minor, int sm_count, DType dtype,
                         bool tf32);

}  // namespace strata::reports
