// Role: format.
// The picture of a sweep, as a self-contained SVG (no scripts, no fonts beyond the generic sans-serif):
// top, wall, compute and host overhead per call against size, log-log; bottom, the host-overhead share of
// the wall against size (log x); the crossovers marked on both. Why strata draws it itself rather than
// through gnuplot or matplotlib: docs/decisions.md.
#pragma once

#include <string>

#include "reports/model/sweep.h"

namespace strata::reports {

std::string sweep_svg(const SweepReport& report);

}  // namespace strata::reports
