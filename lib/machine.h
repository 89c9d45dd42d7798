// Facts about the host that reports name in their environment section.
#pragma once

#include <string>

namespace strata {

// The CPU's model name from /proc/cpuinfo, or "unknown".
std::string cpu_model();

}  // namespace strata
