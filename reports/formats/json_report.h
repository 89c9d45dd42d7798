// Role: format.
// The --json report: every figure of a TraceReport (all samples, not just the summary) and the
// environment, for scripts and for comparing runs.
#pragma once

#include <string>

#include "reports/model/comparison.h"
#include "reports/model/report.h"
#include "reports/model/sequence.h"

namespace strata::reports {

std::string trace_report_json(const TraceReport& report);

// `strata trace mlp --json`: the trace report of the whole forward plus a "sequence" object: the op log,
// each step's breakdown, host tax, compute and the verdict (docs/sequences.md).
// With --backward, `backward` (the seed and every node as a sequence of its own) is "backward_sequence".
std::string sequence_report_json(const TraceReport& report, const SequenceFigures& sequence,
                                 const SequenceFigures* backward = nullptr);

// `strata compare --json`: both modes' per-op figures, the one-time costs, the verdict, and `context`
// (the op, device and environment, as in the trace report).
std::string comparison_json(const Comparison& comparison, const TraceReport& context);

}  // namespace strata::reports
