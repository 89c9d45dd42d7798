#include "reports/model/units.h"

#include <cmath>
#include <cstdio>

namespace strata::reports {

std::string format_ns(double ns) {
  char buf[64];
  double a = std::fabs(ns);
  if (a < 1e6) std::snprintf(buf, sizeof buf, "%.2f us", ns / 1e3);
  else if (a < 1e9) std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
  else std::snprintf(buf, sizeof buf, "%.3f s", ns / 1e9);
  return buf;
}

std::string format_rate(double flops_per_s) {
  char buf[64];
  if (flops_per_s >= 1e12) std::snprintf(buf, sizeof buf, "%.1f TFLOP/s", flops_per_s / 1e12);
  else if (flops_per_s >= 1e9) std::snprintf(buf, sizeof buf, "%.1f GFLOP/s", flops_per_s / 1e9);
  else std::snprintf(buf, sizeof buf, "%.1f MFLOP/s", flops_per_s / 1e6);
  return buf;
}

std::string format_bandwidth(double bytes_per_s) {
  char buf[64];
  if (bytes_per_s >= 1e12) std::snprintf(buf, sizeof buf, "%.2f TB/s", bytes_per_s / 1e12);
  else std::snprintf(buf, sizeof buf, "%.1f GB/s", bytes_per_s / 1e9);
  return buf;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}
std::string lpad(std::string s, size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string format_percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * share);
  return buf;
}

std::string marked_cells_note(const std::string& marked, double probe_ns) {
  return "cells marked * (" + marked + ") are under twice the cost of one probe (" + format_ns(probe_ns) +
         "): below what the host timers resolve; read them as 'about that or less', not as measured";
}

}  // namespace strata::reports
