#include "reports/report.h"

#include <cstdio>

namespace strata::reports {

void TraceReport::describe(RowKind kind, const std::string& key, const std::string& what) {
  steady.describe(kind, key, what);
  cold.describe(kind, key, what);
}

void TraceReport::describe_na(RowKind kind, const std::string& na_reason) {
  steady.describe_na(kind, na_reason);
  cold.describe_na(kind, na_reason);
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

void add_rate_figures(TraceReport& rep) {
  const double wall = rep.steady.wall.median;
  if (wall <= 0) return;
  if (rep.flops > 0) rep.figures.set("achieved_flops_per_s", rep.flops / (wall * 1e-9), "FLOP/s");
  if (rep.bytes_moved > 0) rep.figures.set("achieved_bytes_per_s", rep.bytes_moved / (wall * 1e-9), "bytes/s");
}

}  // namespace strata::reports
