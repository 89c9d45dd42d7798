// The datasheet peak table (reports/model/peak_table.cpp): known GPUs, MIG slices, and a reason for the rest.
#include "reports/model/peak_table.h"

#include <doctest/doctest.h>

#include <string>

using namespace strata;
using namespace strata::reports;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("published peaks: datasheet figures for known GPUs, 0 with the reason for the rest") {
  auto peak = [](const char* name, int major, int minor, DType dtype, bool tf32 = false, int sms = 132) {
    return published_peak(name, major, minor, sms, dtype, tf32);
  };
  CHECK(peak("NVIDIA H200", 9, 0, DType::kF32).flops == doctest::Approx(67e12));
  CHECK(peak("NVIDIA H200", 9, 0, DType::kF32, true).flops == doctest::Approx(494.7e12));
  CHECK(peak("NVIDIA H200", 9, 0, DType::kBF16).flops == doctest::Approx(989.4e12));
  CHECK(peak("NVIDIA H200", 9, 0, DType::kF16).flops == doctest::Approx(989.4e12));
  CHECK(peak("NVIDIA H200", 9, 0, DType::kF64).flops == doctest::Approx(67e12));
  CHECK(peak("NVIDIA H200 NVL", 9, 0, DType::kF32).flops == doctest::Approx(60e12));
  CHECK(peak("NVIDIA H100 80GB HBM3", 9, 0, DType::kBF16).flops == doctest::Approx(989.4e12));
  CHECK(peak("NVIDIA H100 PCIe", 9, 0, DType::kF16, false, 114).flops == doctest::Approx(756.5e12));
  CHECK(peak("NVIDIA A100-SXM4-80GB", 8, 0, DType::kF32, true, 108).flops == doctest::Approx(156e12));
  const PeakFlops h200 = peak("NVIDIA H200", 9, 0, DType::kF32);
  CHECK(contains(h200.source, "NVIDIA datasheet"));
  CHECK(contains(h200.source, "H200 SXM"));
  CHECK(contains(h200.source, "dense"));

  const PeakFlops unknown = peak("NVIDIA GeForce RTX 4090", 8, 9, DType::kF32);
  CHECK(unknown.flops == 0);
  CHECK(contains(unknown.source, "unknown"));
  CHECK(contains(unknown.source, "RTX 4090"));
  // A name that matches but a compute capability that does not: a different part, no figure.
  CHECK(peak("NVIDIA H200", 8, 0, DType::kF32).flops == 0);
  // A MIG slice (the parent's name, 16 of 132 SMs) gets the figure scaled, and says so.
  const PeakFlops slice = peak("NVIDIA H200", 9, 0, DType::kBF16, false, 16);
  CHECK(slice.flops == doctest::Approx(989.4e12 * 16 / 132));
  CHECK(contains(slice.source, "16 of the 132 SMs"));
  // More SMs than the part in the table: not that part, no figure.
  CHECK(peak("NVIDIA H100 PCIe", 9, 0, DType::kF16, false, 132).flops == 0);
}
