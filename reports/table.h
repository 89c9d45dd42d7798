// The breakdown table: the terminal view of a TraceReport. Knows column widths and units; the layers
// know neither.
#pragma once

#include <ostream>

#include "reports/comparison.h"
#include "reports/report.h"

namespace strata::reports {

void print_trace_table(const TraceReport& report, std::ostream& out);

// The eager-vs-replay table of `strata compare`; `header` is the op line.
void print_comparison_table(const std::string& header, const Comparison& comparison, std::ostream& out);

}  // namespace strata::reports
