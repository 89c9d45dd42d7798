// The reports tests build timelines by hand with Timeline::add_span, whose begin/end are raw host-clock
// ticks. With the TSC as the source, ticks_to_ns would rescale them; pinning the steady clock makes
// ticks nanoseconds, so expectations can be written as plain numbers. The environment variable is read
// once, by the first Timeline (host_clock::calibrate), which runs after static initialisation.
#pragma once

#include <cstdlib>
#include <string_view>

#include "lib/host_clock.h"

namespace strata::test {
inline const bool kSteadyClockPinned = (setenv("STRATA_CLOCK", "steady", 1), true);

inline bool steady_clock_in_use() { return host_clock::info().source == std::string_view("steady_clock"); }
}  // namespace strata::test
