// Plan replay: the CPU's stand-in for CUDA Graph replay (docs/design.md "Modes"). The K calls run once
// through the full stack with a plan recorder active (layers/dispatch records every resolved backend
// kernel call with its arguments); replay then calls exactly those kernels, skipping binding and
// dispatch. What replay saves is therefore precisely the binding + dispatch cost, which is the point.
#include <map>
#include <tuple>

#include "layers/dispatch/dispatch.h"
#include "lib/error.h"
#include "lib/zone.h"
#include "measure/device_session.h"
#include "measure/harness.h"

namespace strata::measure {
namespace {

// What makes two tensors the same tensor for a plan's links: where they start, and how they are laid out
// over that memory (a view of the same address with other sizes or strides is another tensor).
struct HeaderKey {
  const void* data;
  Shape sizes, strides;
  static HeaderKey of(const Tensor& t) { return {t.data_ptr(), t.sizes(), t.strides()}; }
  friend bool operator<(const HeaderKey& a, const HeaderKey& b) {
    return std::tie(a.data, a.sizes.ndim, a.sizes.dims, a.strides.dims) <
           std::tie(b.data, b.sizes.ndim, b.sizes.dims, b.strides.dims);
  }
};

class PlanReplay final : public Replay {
 public:
  explicit PlanReplay(std::vector<PlanStep> steps) : steps_(std::move(steps)), links_(steps_.size()) {
    // Which earlier step's output each step read at capture (a sequence: relu reads linear's output).
    // Capture-time outputs are all alive here; the map holds the latest step to produce each tensor, so
    // one pass over the steps finds every link. (A scan of every earlier step per argument was quadratic:
    // a parameter no step produces was looked for in all of them, 24 s at 64k steps.) Building can still
    // take a while for the largest plans: a signal ends it.
    // A tensor is its whole header, not its address: a view op's output starts where its input does, so
    // keyed by address, compare transpose's K calls each read the previous call's transpose (relative
    // error 1.26 against eager) and unsqueeze's ran out of dims.
    std::map<HeaderKey, size_t> producer;
    std::vector<bool> feeds(steps_.size(), false);
    for (size_t j = 0; j < steps_.size(); ++j) {
      if ((j & 1023) == 0) stop_if_interrupted();
      for (size_t a = 0; a < steps_[j].tensor_args.size(); ++a) {
        const Tensor& arg = *steps_[j].tensor_args[a];
        if (!arg.defined()) continue;
        if (const auto it = producer.find(HeaderKey::of(arg)); it != producer.end()) {
          links_[j].push_back({a, it->second});
          feeds[it->second] = true;
        }
      }
      if (steps_[j].output.defined()) producer[HeaderKey::of(steps_[j].output)] = j;
    }
    for (PlanStep& step : steps_) step.output = Tensor();  // only the latest outputs are kept from here on
    keep_ = std::move(feeds);
    fresh_.resize(steps_.size());
  }
  size_t steps() const { return steps_.size(); }
  std::string kind() const override { return "plan replay"; }
  void replay() override {
    STRATA_ZONE(zone, Layer::kRuntime, "plan replay");
    for (size_t j = 0; j < steps_.size(); ++j) {
      for (const Link& link : links_[j]) *steps_[j].tensor_args[link.arg] = fresh_[link.from];
      last_ = steps_[j].run();
      if (keep_[j]) fresh_[j] = last_;
    }
  }
  binding::IValue last_result() const override { return last_; }

 private:
  struct Link {
    size_t arg;   // position among the step's tensor arguments
    size_t from;  // the step whose output it is
  };
  std::vector<PlanStep> steps_;
  std::vector<std::vector<Link>> links_;
  std::vector<bool> keep_;     // step j's output feeds a later step
  std::vector<Tensor> fresh_;  // this replay's outputs of those steps
  Tensor last_;
};

}  // namespace

std::unique_ptr<Replay> capture_plan(DeviceSession& session, const std::function<binding::IValue()>& call_once,
                                     const std::vector<uint32_t>& op_ids, CaptureCost& cost) {
  std::vector<PlanStep> steps;
  const int64_t t0 = host_clock::now_ns();
  {
    PlanRecordingGuard guard(&steps);
    for (uint32_t id : op_ids) {
      stop_if_interrupted();  // K calls of a large model take seconds
      OpCall tag(session, id);
      call_once();
    }
  }
  const int64_t t1 = host_clock::now_ns();
  if (steps.empty()) throw Error("plan capture recorded no kernel calls");
  auto plan = std::make_unique<PlanReplay>(std::move(steps));
  cost.recorded_calls = plan->steps();
  cost.capture_ns = double(t1 - t0);
  cost.instantiate_ns = double(host_clock::now_ns() - t1);
  return plan;
}

std::unique_ptr<Replay> DeviceSession::capture(const std::function<binding::IValue()>& call_once,
                                               const std::vector<uint32_t>& op_ids, CaptureCost& cost) {
  return capture_plan(*this, call_once, op_ids, cost);
}

}  // namespace strata::measure
