// Note [One host clock]
// ~~~~~~~~~~~~~~~~~~~~~
// Every timestamp strata prints comes from ONE clock: host zones, CUDA API records and GPU kernel records
// alike. Zones read raw ticks (the invariant TSC through rdtsc where the CPU has one and it is measurably
// cheaper than steady_clock, steady_clock nanoseconds otherwise). ticks_to_ns() maps ticks onto the
// steady_clock (CLOCK_MONOTONIC) nanosecond axis with a calibration taken once per process, and the CUPTI
// layer registers the same mapping as CUPTI's timestamp source, so GPU records land on the same axis
// without any after-the-fact skew fitting. The calibration and the cost of one read are reported with
// every trace, so users can judge the instrument.
#pragma once

#include <cstdint>
#include <string_view>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace strata::host_clock {

namespace detail {
extern bool g_use_tsc;
int64_t steady_ns() noexcept;
}  // namespace detail

// Chooses the source and calibrates it; idempotent and thread-safe. Timeline's constructor calls it, so
// any zone that records has a calibrated clock.
void calibrate();

// Raw ticks of the chosen source: the cheapest read we have, meant for zones.
inline uint64_t ticks() noexcept {
#if defined(__x86_64__)
  if (detail::g_use_tsc) return __rdtsc();
#endif
  return static_cast<uint64_t>(detail::steady_ns());
}

int64_t ticks_to_ns(uint64_t ticks) noexcept;  // on the steady_clock axis
inline int64_t now_ns() noexcept { return ticks_to_ns(ticks()); }
// Nanoseconds from a ticks() reading until now.
inline double elapsed_ns(uint64_t since) noexcept { return double(now_ns() - ticks_to_ns(since)); }

struct Info {
  std::string_view source;    // "tsc" or "steady_clock"
  double ns_per_tick;         // 1.0 for steady_clock
  double read_cost_ns;        // measured cost of one ticks() call
  double steady_read_cost_ns; // measured cost of one steady_clock::now(), for comparison
};
Info info();

}  // namespace strata::host_clock
