// The measurement loop: one cold call, W untraced warm-ups, then R timed calls, each traced into the
// timeline under its own op id and each preceded by the same call untraced (interleaved, so both see
// the same machine state) to show what tracing itself costs.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "apps/strata/device_session.h"
#include "layers/frontend/frontend.h"
#include "lib/timeline.h"

namespace strata::app {

// Set by the SIGINT/SIGTERM handler; the harness stops at the next call boundary.
extern std::atomic<bool> g_interrupted;
// Throws Error with ExitCode::kInterrupted once the flag is set (see docs/errors.md).
void stop_if_interrupted();

struct HarnessOptions {
  int64_t warmup = 3;
  int64_t repeat = 0;          // 0 = auto: as many as fit in `budget_s`, at least 10, at most 10000
  double budget_s = 1.0;
  bool untraced_comparison = true;
  uint32_t first_op_id = 1;  // where this run's op ids start (a sweep runs many into one timeline)
  // 0 = run every planned call. Otherwise the timed loop ends once this many seconds have passed (after
  // at least 10 calls): the automatic repeat is sized from the FASTEST warm call, and on a loaded machine
  // the median call can be 30x slower than that, which made one sweep size run 20 s on a 0.5 s budget.
  double stop_after_s = 0;
  // How one call is made. Empty: `call.op->call(call.args)` from C++ (--frontend cli). --frontend python
  // calls strata.<op>(...) in the embedded interpreter (Note [The Python module]); each timed call runs
  // it the same way, traced and untraced.
  std::function<binding::IValue()> invoke;

  // Every call is followed by y.sum().backward() (--backward): the seed's sum and each node the engine
  // runs get op ids of their own. See Note [Backward in the harness] in harness.cpp.
  bool backward = false;
};

// The backward half of the timed calls, when HarnessOptions::backward is set.
struct BackwardIds {
  std::vector<uint32_t> seed;                // the sum of each timed call
  std::vector<std::vector<uint32_t>> nodes;  // nodes[k][i]: node k of the walk in timed call i
  std::vector<const char*> walk;             // the walk's node names (the same in every call)
  uint32_t cold_first = 0, cold_last = 0;    // op ids of the cold call's seed and backward nodes
};

struct HarnessResult {
  std::vector<uint32_t> cold_ids;
  std::vector<uint32_t> timed_ids;
  std::vector<double> untraced_ns;  // wall of each untraced call
  binding::IValue last_result;
  int64_t warmup = 0;
  int64_t repeat = 0;
  bool repeat_auto = false;
  BackwardIds backward;
};

HarnessResult run_harness(const frontend::PreparedCall& call, const HarnessOptions& options, Timeline& timeline,
                          DeviceSession& session);

// Measured cost of one zone (open + close) on this machine, in ns.
double measure_probe_cost_ns();

}  // namespace strata::app
