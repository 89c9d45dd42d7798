// Role: format.
// The views of a sweep (reports/model/sweep.h): the table `strata sweep` prints, its JSON and its
// CSV. The SVG plot is reports/formats/sweep_plot.h.
#pragma once

#include <ostream>
#include <string>

#include "reports/model/sweep.h"

namespace strata::reports {

void print_sweep_table(const SweepReport& report, std::ostream& out);
std::string sweep_json(const SweepReport& report);
std::string sweep_csv(const SweepReport& report);

}  // namespace strata::reports
