#include "measure/harness.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "layers/autograd/engine.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "lib/zone.h"

namespace strata::measure {

std::atomic<bool> g_interrupted{false};

void reserve_spans(Timeline& timeline, size_t repeats, size_t spans_each, const std::string& what,
                   const std::string& remedy) {
  // Saturating: a product past SIZE_MAX is as refused as one just past the memory.
  const size_t spans = spans_each != 0 && repeats > (SIZE_MAX - 64) / spans_each / sizeof(Span)
                           ? SIZE_MAX / sizeof(Span)
                           : repeats * spans_each + 64;
  const size_t span_bytes = spans * sizeof(Span);
  if (span_bytes > frontend::available_host_bytes() / 2) {
    throw UsageError(what + " would record " + std::to_string(spans) + " spans (" + format_bytes(double(span_bytes)) +
                     " of host memory, more than half of what is available); " + remedy);
  }
  timeline.reserve_more(spans, &stop_if_interrupted);  // a Ctrl-C while GiBs are touched stops it
}

void stop_if_interrupted() {
  if (g_interrupted.load(std::memory_order_relaxed)) {
    throw Error("interrupted: stopped before the measurement finished; no report written", ExitCode::kInterrupted);
  }
}

namespace {

// Note [Backward in the harness]
// With --backward each call is a training step's worth of autograd: the forward (its own op id, as
// without --backward), then y.sum() (an op id: the seed's reduction), then autograd::backward, whose
// every node gets an op id of its own as the engine reaches it (BackwardOptions::before_node), so each
// node's gradient ops form one "call" in the breakdown: rows per node, distributions over the timed
// calls. The leaves' .grad is reset before every call (zero_grad(set_to_none=True)), so each call does
// the same work and the last one's gradients are what --check compares. The device is synchronised
// after the forward and after the backward, outside any op id, so no node is charged for the wait.
namespace {

// Tags each node's work with the next op id, for the timeline and the device session.
struct NodeTagger {
  Timeline& timeline;
  DeviceSession& session;
  uint32_t& next_id;
  std::vector<uint32_t> ids;
  std::optional<OpCall> tag;
  static void before_node(void* context, size_t, const char*) {
    auto* t = static_cast<NodeTagger*>(context);
    t->tag.reset();
    const uint32_t id = t->next_id++;
    t->ids.push_back(id);
    t->timeline.set_op(id);
    t->tag.emplace(t->session, id);
  }
};

}  // namespace

// y.sum().backward() for the forward's output `out`, traced; ids into `ids` (seed, then nodes).
autograd::BackwardRecord traced_backward(const binding::IValue& out, Timeline& timeline, DeviceSession& session,
                                         uint32_t& next_id, uint32_t& seed_id, std::vector<uint32_t>& node_ids) {
  tracing::ActiveScope scope(&timeline);
  seed_id = next_id++;
  timeline.set_op(seed_id);
  Tensor root;
  {
    OpCall tag(session, seed_id);
    root = ops::sum(out.tensor());
  }
  NodeTagger tagger{timeline, session, next_id, {}, std::nullopt};
  autograd::BackwardOptions options;
  options.before_node = &NodeTagger::before_node;
  options.context = &tagger;
  autograd::BackwardRecord record = autograd::backward(root, Tensor(), options);
  tagger.tag.reset();
  timeline.set_op(0);
  session.synchronize();
  node_ids = std::move(tagger.ids);
  return record;
}

// One iteration, traced: step j under op id first_id + j (Note [What the harness runs]); one
// synchronisation at the end (a model does not wait for the GPU between its layers, and the idle time
// between its kernels is what a sequence shows).
template <typename Work>
binding::IValue traced_call(const Work& work, Timeline& timeline, DeviceSession& session, uint32_t first_id) {
  tracing::ActiveScope scope(&timeline);
  binding::IValue out;
  for (size_t j = 0; j < work.steps(); ++j) {
    const uint32_t op_id = first_id + static_cast<uint32_t>(j);
    timeline.set_op(op_id);
    OpCall tag(session, op_id);
    out = work.run(j, std::move(out));
  }
  session.synchronize();
  timeline.set_op(0);
  return out;
}

template <typename Work>
double untraced_call_ns(const Work& work, DeviceSession& session, bool backward) {
  if (backward) work.reset_grads();
  const uint64_t t0 = host_clock::ticks();
  binding::IValue out;
  for (size_t j = 0; j < work.steps(); ++j) out = work.run(j, std::move(out));
  session.synchronize();
  if (backward) {
    autograd::backward(ops::sum(out.tensor()));
    session.synchronize();
  }
  const uint64_t t1 = host_clock::ticks();
  return double(host_clock::ticks_to_ns(t1) - host_clock::ticks_to_ns(t0));
}

// Progress on stderr for long runs, only when a person is watching.
class Progress {
 public:
  explicit Progress(int64_t total) : total_(total), enabled_(isatty(STDERR_FILENO) && total > 0) {}
  void update(int64_t done, double elapsed_s) {
    if (!enabled_ || elapsed_s < 2.0) return;
    std::fprintf(stderr, "\r  measuring: %lld/%lld calls", static_cast<long long>(done), static_cast<long long>(total_));
    shown_ = true;
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\r%40s\r", "");
  }

 private:
  int64_t total_;
  bool enabled_;
  bool shown_ = false;
};

// The cold call: first use of the operator, its handles, lazily loaded code. Reported apart. Returns its
// wall; `next_id` moves past its op ids (and, with --backward, its backward's).
template <typename Work>
double cold_call(const Work& call, const HarnessOptions& options, Timeline& timeline, DeviceSession& session,
                 uint32_t& next_id, HarnessResult& r) {
  const auto steps = static_cast<uint32_t>(call.steps());
  for (uint32_t j = 0; j < steps; ++j) r.cold_ids.push_back(next_id + j);
  const uint64_t cold0 = host_clock::ticks();
  if (options.backward) call.reset_grads();
  r.last_result = traced_call(call, timeline, session, next_id);
  next_id += steps;
  if (options.backward) {
    uint32_t seed_id = 0;
    std::vector<uint32_t> node_ids;
    r.backward.walk = traced_backward(r.last_result, timeline, session, next_id, seed_id, node_ids).order;
    r.backward.cold_first = seed_id;
    r.backward.cold_last = next_id - 1;
    r.backward.nodes.resize(node_ids.size());
  }
  const double cold_ns = host_clock::elapsed_ns(cold0);
  // Note [One output at a time]: the frontend checked memory for the inputs and ONE output, so a
  // result is released before the next call makes another (the timed loop keeps the last one only).
  r.last_result = binding::IValue();
  return cold_ns;
}

// The untraced warm-ups, then how many timed calls: --repeat, or as many as fit in the budget, sized from
// the fastest warm call (or the cold one).
template <typename Work>
void plan_repeat(const Work& call, const HarnessOptions& options, DeviceSession& session, double cold_ns,
                 HarnessResult& r) {
  std::vector<double> warm;
  for (int64_t i = 0; i < options.warmup; ++i) {
    stop_if_interrupted();
    warm.push_back(untraced_call_ns(call, session, options.backward));
  }
  r.warmup = options.warmup;
  r.repeat = options.repeat;
  if (r.repeat == 0) {
    // Each timed call runs twice (traced + untraced).
    double per_call = warm.empty() ? cold_ns : *std::min_element(warm.begin(), warm.end());
    const double per_iteration = per_call * (options.untraced_comparison ? 2.0 : 1.0);
    r.repeat = std::clamp<int64_t>(static_cast<int64_t>(options.budget_s * 1e9 / std::max(per_iteration, 1.0)), 10,
                                   10000);
    r.repeat_auto = true;
    spdlog::debug("auto repeat: fastest warm call {:.0f} ns, budget {} s -> {} timed calls", per_call, options.budget_s,
                  r.repeat);
  }
  spdlog::debug("cold call {:.0f} ns; {} warm-up, {} timed calls, tracing comparison {}", cold_ns, r.warmup, r.repeat,
                options.untraced_comparison ? "on" : "off");
  r.planned_repeat = r.repeat;
}

// One timed iteration: the untraced call first, then the traced one (so the traced result can be kept:
// see Note [One output at a time]), and with --backward its traced backward.
template <typename Work>
void timed_call(const Work& call, const HarnessOptions& options, Timeline& timeline, DeviceSession& session,
                uint32_t& next_id, HarnessResult& r) {
  const auto steps = static_cast<uint32_t>(call.steps());
  r.last_result = binding::IValue();
  if (options.untraced_comparison) r.untraced_ns.push_back(untraced_call_ns(call, session, options.backward));
  for (uint32_t j = 0; j < steps; ++j) r.timed_ids.push_back(next_id + j);
  if (options.backward) call.reset_grads();
  r.last_result = traced_call(call, timeline, session, next_id);
  next_id += steps;
  if (!options.backward) return;
  uint32_t seed_id = 0;
  std::vector<uint32_t> node_ids;
  const autograd::BackwardRecord record = traced_backward(r.last_result, timeline, session, next_id, seed_id, node_ids);
  // The walk is deterministic (Note [The autograd graph]); a different one would mix nodes' rows.
  if (record.order != r.backward.walk) throw Error("backward: the walk changed between calls: " + record.path());
  r.backward.seed.push_back(seed_id);
  for (size_t k = 0; k < node_ids.size(); ++k) r.backward.nodes[k].push_back(node_ids[k]);
}

template <typename Work>
HarnessResult run_work(const Work& call, const HarnessOptions& options, Timeline& timeline, DeviceSession& session) {
  HarnessResult r;
  r.steps = call.steps();
  uint32_t next_id = options.first_op_id;
  const size_t spans_before = timeline.spans().size();  // a sweep's timeline already holds other sizes
  const double cold_ns = cold_call(call, options, timeline, session, next_id, r);
  plan_repeat(call, options, session, cold_ns, r);
  // The cold call shows how many spans one call writes; make room for all timed calls up front. That
  // buffer is memory too: refuse a run whose spans alone would crowd out the op (half of what is free).
  reserve_spans(timeline, static_cast<size_t>(r.repeat), timeline.spans().size() - spans_before + 2,
                "--repeat " + std::to_string(r.repeat), "lower --repeat");
  const double stop_after_s =
      options.stop_after_s > 0 ? options.stop_after_s : (r.repeat_auto ? 2 * options.budget_s : 0.0);
  Progress progress(r.repeat);
  const uint64_t start = host_clock::ticks();
  for (int64_t i = 0; i < r.repeat; ++i) {
    stop_if_interrupted();
    timed_call(call, options, timeline, session, next_id, r);
    progress.update(i + 1, host_clock::elapsed_ns(start) * 1e-9);
    if (stop_after_s > 0 && i + 1 >= 10 && host_clock::elapsed_ns(start) * 1e-9 > stop_after_s) {
      spdlog::debug("stopped after {} of {} timed calls: --budget's time limit passed", i + 1, r.repeat);
      r.repeat = i + 1;
      break;
    }
  }
  stop_if_interrupted();
  return r;
}

}  // namespace

HarnessResult run_harness(const frontend::PreparedCall& call, const HarnessOptions& options, Timeline& timeline,
                          DeviceSession& session) {
  return run_work(SingleCall{call, options.invoke ? &options.invoke : nullptr}, options, timeline, session);
}

HarnessResult run_harness(const std::function<binding::IValue()>& call, const HarnessOptions& options,
                          Timeline& timeline, DeviceSession& session) {
  return run_work(GraphCall{call}, options, timeline, session);
}

HarnessResult run_harness(frontend::Sequence& sequence, const HarnessOptions& options, Timeline& timeline,
                          DeviceSession& session) {
  return run_work(SequenceCall{sequence}, options, timeline, session);
}

}  // namespace strata::measure
