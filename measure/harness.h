// The measurement loop: one cold call, W untraced warm-ups, then R timed calls, each traced into the
// timeline under its own op id and each preceded by the same call untraced (interleaved, so both see
// the same machine state) to show what tracing itself costs.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "layers/frontend/frontend.h"
#include "layers/frontend/sequence.h"
#include "lib/timeline.h"
#include "measure/device_session.h"

namespace strata::measure {

// Set by the SIGINT/SIGTERM handler; the harness stops at the next call boundary.
extern std::atomic<bool> g_interrupted;
// Throws Error with ExitCode::kInterrupted once the flag is set (see docs/errors.md).
void stop_if_interrupted();

// Makes room for `repeats` x `spans_each` spans up front, so the buffer never grows while calls are timed.
// That buffer is memory too: a run whose spans alone would take more than half of the free host memory
// is refused (UsageError: "<what> would record N spans (...); <remedy>") rather than ended by bad_alloc
// or the OOM killer.
void reserve_spans(Timeline& timeline, size_t repeats, size_t spans_each, const std::string& what,
                   const std::string& remedy);

// Note [What the harness runs]: a workload of S steps per iteration, each a real call with its own op id
// (S = 1 for one op; a sequence's steps feed each other, Note [Sequences are not operators]). Templates
// over these, not a std::function or a virtual call: the single-op path compiles to exactly the loop it
// was, and its overhead is what strata measures (bench/overhead_bench, docs/performance.md).
// reset_grads() is zero_grad(set_to_none=True) over the leaves (--backward, Note [Backward in the harness]).
struct SingleCall {
  const frontend::PreparedCall& call;
  // --frontend python: strata.<op>(...) in the embedded interpreter (HarnessOptions::invoke); null: C++.
  const std::function<binding::IValue()>* invoke = nullptr;
  static constexpr size_t steps() { return 1; }
  binding::IValue run(size_t /*step*/, binding::IValue /*prev*/) const {
    return invoke != nullptr ? (*invoke)() : call.op->call(call.args);
  }
  void reset_grads() const {
    for (const binding::IValue& a : call.args)
      if (a.is_tensor() && a.tensor().autograd_meta() != nullptr) a.tensor().set_grad(Tensor());
  }
};
struct SequenceCall {
  frontend::Sequence& sequence;
  size_t steps() const { return sequence.steps.size(); }
  binding::IValue run(size_t step, binding::IValue prev) const { return sequence.run_step(step, std::move(prev)); }
  void reset_grads() const {
    for (const Tensor& p : sequence.parameters)
      if (p.autograd_meta() != nullptr) p.set_grad(Tensor());
  }
};

// One call of a whole graph per iteration: a compiled graph's run, or a replay (trace --mode compiled |
// graph). A std::function: what it calls costs microseconds, and its own zones say where they went.
struct GraphCall {
  const std::function<binding::IValue()>& call;
  static constexpr size_t steps() { return 1; }
  binding::IValue run(size_t /*step*/, binding::IValue /*prev*/) const { return call(); }
  void reset_grads() const {}
};

struct HarnessOptions {
  int64_t warmup = 3;
  int64_t repeat = 0;          // 0 = auto: as many as fit in `budget_s`, at least 10, at most 10000
  double budget_s = 1.0;
  bool untraced_comparison = true;
  uint32_t first_op_id = 1;  // where this run's op ids start (a sweep runs many into one timeline)
  // 0 = run every planned call; with an automatic repeat (repeat == 0) that means twice budget_s.
  // Otherwise the timed loop ends once this many seconds have passed (after at least 10 calls): the
  // automatic repeat is sized from the FASTEST warm call, and on a loaded machine the median call can be
  // 30x slower than that, which made one sweep size run 20 s on a 0.5 s budget. An explicit repeat with
  // no stop_after_s runs in full.
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
  // Op ids, iteration by iteration: each iteration is `steps` calls with consecutive ids (one for a single
  // op; one per step of a sequence, in order). Note [What the harness runs] in harness.cpp.
  std::vector<uint32_t> cold_ids;
  std::vector<uint32_t> timed_ids;
  size_t steps = 1;
  std::vector<double> untraced_ns;  // wall of each untraced call (a whole forward for a sequence)
  binding::IValue last_result;
  int64_t warmup = 0;
  int64_t repeat = 0;
  bool repeat_auto = false;
  int64_t planned_repeat = 0;  // what the run was sized for; more than `repeat` when the time limit ended it
  BackwardIds backward;
};

HarnessResult run_harness(const frontend::PreparedCall& call, const HarnessOptions& options, Timeline& timeline,
                          DeviceSession& session);

// A whole graph per iteration (GraphCall): `call` runs it once and returns its result.
HarnessResult run_harness(const std::function<binding::IValue()>& call, const HarnessOptions& options,
                          Timeline& timeline, DeviceSession& session);

// The same for a sequence: every iteration is one forward, a call per step feeding the next.
HarnessResult run_harness(frontend::Sequence& sequence, const HarnessOptions& options, Timeline& timeline,
                          DeviceSession& session);

}  // namespace strata::measure
