// Role: format.
// The sequence's own section of `strata trace`, printed from SequenceFigures.
#pragma once

#include <ostream>
#include <string>

#include "reports/model/sequence.h"

namespace strata::reports {

// Op log, per-step table, totals and verdict. `what` names one iteration: "forward", or "backward" (the
// seed's sum, then the engine's nodes).
void print_sequence_table(const SequenceFigures& figures, std::ostream& out, const std::string& what = "forward");

}  // namespace strata::reports
