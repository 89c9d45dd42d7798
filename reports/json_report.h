// The --json report: every figure of a TraceReport (all samples, not just the summary) and the
// environment, for scripts and for comparing runs.
#pragma once

#include <string>

#include "reports/report.h"

namespace strata::reports {

std::string trace_report_json(const TraceReport& report);

}  // namespace strata::reports
