#include "lib/host_clock.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>

namespace strata::host_clock {
namespace detail {

bool g_use_tsc = false;

int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace detail

namespace {

struct Calibration {
  uint64_t anchor_ticks = 0;
  int64_t anchor_ns = 0;
  double ns_per_tick = 1.0;
  double read_cost_ns = 0.0;
  double steady_read_cost_ns = 0.0;
};
Calibration g_cal;
std::once_flag g_once;

bool cpu_has_invariant_tsc() {
#if defined(__x86_64__)
  // The kernel sets both flags only when the TSC ticks at a constant rate through P- and C-states; that
  // is what makes it usable as a clock (and it is what Linux itself checks before using the TSC).
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      return line.find(" constant_tsc") != std::string::npos &&
             line.find(" nonstop_tsc") != std::string::npos;
    }
  }
#endif
  return false;
}

template <typename F>
double cost_per_call_ns(F read) {
  constexpr int kReads = 20000;
  double best = 1e9;
  for (int round = 0; round < 5; ++round) {
    int64_t t0 = detail::steady_ns();
    uint64_t sink = 0;
    for (int i = 0; i < kReads; ++i) sink += static_cast<uint64_t>(read());
    int64_t t1 = detail::steady_ns();
    asm volatile("" : : "r"(sink));
    best = std::min(best, double(t1 - t0) / kReads);
  }
  return best;
}

void do_calibrate() {
  g_cal.steady_read_cost_ns = cost_per_call_ns([] { return detail::steady_ns(); });
  const char* forced = std::getenv("STRATA_CLOCK");
  bool want_tsc = cpu_has_invariant_tsc() && !(forced && std::strcmp(forced, "steady") == 0);
#if defined(__x86_64__)
  if (want_tsc) {
    double tsc_cost = cost_per_call_ns([] { return __rdtsc(); });
    // Only worth it when measurably cheaper (Note [One host clock]); otherwise keep the simpler clock.
    if (tsc_cost < g_cal.steady_read_cost_ns * 0.8) {
      // Pair (ticks, ns) readings 20 ms apart; take the tightest-bracketed pair at each end.
      auto pair = [] {
        uint64_t best_ticks = 0;
        int64_t best_ns = 0, best_gap = INT64_MAX;
        for (int i = 0; i < 50; ++i) {
          int64_t a = detail::steady_ns();
          uint64_t t = __rdtsc();
          int64_t b = detail::steady_ns();
          if (b - a < best_gap) {
            best_gap = b - a;
            best_ticks = t;
            best_ns = a + (b - a) / 2;
          }
        }
        return std::pair{best_ticks, best_ns};
      };
      auto [t0, n0] = pair();
      int64_t until = n0 + 20'000'000;
      while (detail::steady_ns() < until) {
      }
      auto [t1, n1] = pair();
      if (t1 > t0) {
        g_cal.ns_per_tick = double(n1 - n0) / double(t1 - t0);
        g_cal.anchor_ticks = t0;
        g_cal.anchor_ns = n0;
        g_cal.read_cost_ns = tsc_cost;
        detail::g_use_tsc = true;
        return;
      }
    }
  }
#endif
  g_cal.read_cost_ns = g_cal.steady_read_cost_ns;
}

}  // namespace

void calibrate() { std::call_once(g_once, do_calibrate); }

int64_t ticks_to_ns(uint64_t ticks) noexcept {
  if (!detail::g_use_tsc) return static_cast<int64_t>(ticks);
  // Signed difference: ticks read before the anchor (there are none in practice) still map correctly.
  double delta = double(static_cast<int64_t>(ticks - g_cal.anchor_ticks)) * g_cal.ns_per_tick;
  return g_cal.anchor_ns + static_cast<int64_t>(delta);
}

Info info() {
  calibrate();
  return Info{detail::g_use_tsc ? "tsc" : "steady_clock", g_cal.ns_per_tick, g_cal.read_cost_ns,
              g_cal.steady_read_cost_ns};
}

}  // namespace strata::host_clock
