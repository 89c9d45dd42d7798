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

void describe_python_rows(TraceReport& rep) {
  std::vector<std::string> functions, entries;  // "strata.matmul"; "_strata._op"
  for (const BreakdownRow& row : rep.steady.rows) {
    if (row.kind == RowKind::kPython) functions = row.names;
    if (row.kind == RowKind::kPybind11) entries = row.names;
  }
  rep.describe(RowKind::kPython, "", (functions.size() == 1 ? functions[0] + "()" : std::string("the frontend")) +
                                         ": type checks, to the extension call");
  std::string what;
  for (const std::string& e : entries) {
    if (!what.empty()) what += " + ";
    what += e == "_strata.call" ? "pybind11 dispatch into _strata.call" : e;
  }
  rep.describe(RowKind::kPybind11, "", (what.empty() ? std::string("the extension call") : what) +
                                           ": boxing, result to Python");
}

void mark_rows_below_resolution(TraceReport& rep, const ProbeCost& cost) {
  std::string unresolved;
  for (BreakdownRow& row : rep.steady.rows) {
    const bool from_python = row.kind == RowKind::kPython || row.kind == RowKind::kPybind11;
    const double probe = from_python && cost.python_ns > 0 ? cost.python_ns : cost.zone_ns;
    row.below_resolution = row.applicable && row.ns.median < 2 * probe * cost.spans_per_row;
    if (row.below_resolution) unresolved += (unresolved.empty() ? "" : ", ") + row.id();
  }
  if (unresolved.empty()) return;
  char text[96];
  if (cost.python_ns > 0) {
    std::snprintf(text, sizeof text, "%.0f ns; a Python probe's, for python and pybind11: %.0f ns", cost.zone_ns,
                  cost.python_ns);
  } else {
    std::snprintf(text, sizeof text, "%.0f ns", cost.zone_ns);
  }
  rep.notes.push_back("rows marked * (" + unresolved + ") have medians under twice the cost of one probe (" + text +
                      ")" + cost.scope +
                      ": below what the host timers resolve; read them as 'about that or less', not as measured");
}

void describe_cpu_device_rows(TraceReport& rep) {
  rep.describe_na(RowKind::kLaunch, "n/a on the CPU: no launch, the library call computes in place");
  rep.describe_na(RowKind::kQueue, "n/a on the CPU: nothing is queued");
  rep.describe_na(RowKind::kGpu, "n/a on the CPU: the compute is inside the library row");
}

void add_rate_figures(TraceReport& rep) {
  const double wall = rep.steady.wall.median;
  if (wall <= 0) return;
  if (rep.flops > 0) rep.figures.set("achieved_flops_per_s", rep.flops / (wall * 1e-9), "FLOP/s");
  if (rep.bytes_moved > 0) rep.figures.set("achieved_bytes_per_s", rep.bytes_moved / (wall * 1e-9), "bytes/s");
}

}  // namespace strata::reports
