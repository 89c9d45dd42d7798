#include "reports/model/report.h"

namespace strata::reports {

void TraceReport::describe(RowKind kind, const std::string& key, const std::string& what) {
  steady.describe(kind, key, what);
  cold.describe(kind, key, what);
}

void TraceReport::describe_na(RowKind kind, const std::string& na_reason) {
  steady.describe_na(kind, na_reason);
  cold.describe_na(kind, na_reason);
}

void add_rate_figures(TraceReport& rep) {
  const double wall = rep.steady.wall.median;
  if (wall <= 0) return;
  if (rep.flops > 0) rep.figures.set("achieved_flops_per_s", rep.flops / (wall * 1e-9), "FLOP/s");
  if (rep.bytes_moved > 0) rep.figures.set("achieved_bytes_per_s", rep.bytes_moved / (wall * 1e-9), "bytes/s");
}

}  // namespace strata::reports

namespace strata::reports {

double PeerReport::in_no_row_ns() const {
  double sum = 0;
  for (const LayerRow& r : rows) sum += r.ns.median;
  return rows_wall.median - sum;
}

}  // namespace strata::reports
