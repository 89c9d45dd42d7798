// Role: model (the vocabulary of figures). How a figure is written: durations, rates, bandwidths, percentages, numbers, and
// table cells padded to a width. Every view uses these, and so do the words the model attaches to its
// figures (verdicts, crossovers), so that one figure reads the same everywhere: it sits with the model so
// that the model's words need no format.
#pragma once

#include <cstddef>
#include <string>

namespace strata::reports {

// "41.70 ms", "0.09 us": a duration in ns with a unit that keeps 3-4 significant digits.
std::string format_ns(double ns);
// The note under a table whose cells `marked` ("eager binding, plan replay runtime") carry a '*': under
// twice `probe_ns`, one probe's cost, so below what the host timers resolve (compare, sweep).
std::string marked_cells_note(const std::string& marked, double probe_ns);
std::string format_rate(double flops_per_s);  // "52.1 GFLOP/s"
std::string format_percent(double share);   // 0.123 -> "12.3%"
std::string format_number(double v);       // six significant digits, %g style: 0.000123457, 1.5e+09
std::string format_bandwidth(double bytes_per_s);  // "12.3 GB/s" (10^9 bytes)
// Table cells: `s` padded with spaces on the right (pad) or the left (lpad) to `width` characters.
std::string pad(std::string s, size_t width);
std::string lpad(std::string s, size_t width);

}  // namespace strata::reports
