// The breakdown table: the terminal view of a TraceReport. Knows column widths and units; the layers
// know neither.
#pragma once

#include <ostream>

#include "reports/report.h"

namespace strata::reports {

void print_trace_table(const TraceReport& report, std::ostream& out);

}  // namespace strata::reports
