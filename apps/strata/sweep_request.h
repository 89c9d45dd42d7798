// What `strata sweep` was asked for (sweep_command.cpp, docs/sweep.md).
#pragma once

#include <cstdint>
#include <string>

#include "apps/strata/trace_request.h"

namespace strata::app {

struct SweepOptions {
  TraceOptions trace;            // trace.spec holds the range pattern; trace.budget_s is per size
  double sweep_budget_s = 20.0;  // the whole sweep; per-size budgets shrink to fit it
  bool sweep_budget_given = false;
  bool compare = false;
  int64_t ops_per_graph = 8;
  bool ops_per_graph_given = false;  // refused without --compare, which alone reads it
  std::string plot_path, csv_path;
};

}  // namespace strata::app
