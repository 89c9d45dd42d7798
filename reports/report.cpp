#include "reports/report.h"

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
