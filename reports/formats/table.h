// Role: format.
// The breakdown table: the terminal view of a TraceReport. Knows column widths and units; the layers
// know neither.
#pragma once

#include <ostream>

#include "reports/model/comparison.h"
#include "reports/model/report.h"

namespace strata::reports {

void print_trace_table(const TraceReport& report, std::ostream& out);
// The backward half (report.backward), which print_trace_table prints when it ran: the walk, then each
// node's rows. For other commands that run backward passes too.
void print_backward_table(const TraceReport& report, std::ostream& out);

// The eager-vs-replay table of `strata compare`; `header` is the op line.
void print_comparison_table(const std::string& header, const Comparison& comparison, std::ostream& out);

}  // namespace strata::reports
