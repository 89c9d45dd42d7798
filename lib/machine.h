// Facts about the host that reports name in their environment section.
#pragma once

#include <string>

namespace strata {

// The CPU's model name from /proc/cpuinfo, or "unknown".
std::string cpu_model();

// What the machine was doing around a run, for the notes on spread and noise: the 1-minute load average
// (/proc/loadavg; negative when unreadable), and it in words against the CPU count ("" when unreadable).
// A load above the CPU count means timed calls shared cores with other work.
double load_average();
std::string load_context(double one_minute);
// Whether `one_minute` says other work competed for the cores (above the CPU count).
bool overloaded(double one_minute);

}  // namespace strata
