// Plan replay: the CPU's stand-in for CUDA Graph replay (DESIGN.md "Modes"). The K calls run once
// through the full stack with a plan recorder active (layers/dispatch records every resolved backend
// kernel call with its arguments); replay then calls exactly those kernels, skipping binding and
// dispatch. What replay saves is therefore precisely the binding + dispatch cost, which is the point.
#include "apps/strata/device_session.h"
#include "layers/dispatch/dispatch.h"
#include "lib/error.h"
#include "lib/zone.h"

namespace strata::app {
namespace {

class PlanReplay final : public Replay {
 public:
  explicit PlanReplay(std::vector<PlanStep> steps) : steps_(std::move(steps)), links_(steps_.size()) {
    // Which earlier step's output each step read at capture (a sequence: relu reads linear's output).
    // Capture-time outputs are all alive here, so their addresses are distinct.
    std::vector<bool> feeds(steps_.size(), false);
    for (size_t j = 0; j < steps_.size(); ++j) {
      for (size_t a = 0; a < steps_[j].tensor_args.size(); ++a) {
        const Tensor& arg = *steps_[j].tensor_args[a];
        if (!arg.defined()) continue;
        for (size_t i = j; i-- > 0;) {
          if (steps_[i].output.defined() && steps_[i].output.data_ptr() == arg.data_ptr()) {
            links_[j].push_back({a, i});
            feeds[i] = true;
            break;
          }
        }
      }
    }
    for (PlanStep& step : steps_) step.output = Tensor();  // only the latest outputs are kept from here on
    keep_ = std::move(feeds);
    fresh_.resize(steps_.size());
  }
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
      OpCall tag(session, id);
      call_once();
    }
  }
  const int64_t t1 = host_clock::now_ns();
  if (steps.empty()) throw Error("plan capture recorded no kernel calls");
  auto plan = std::make_unique<PlanReplay>(std::move(steps));
  cost.capture_ns = double(t1 - t0);
  cost.instantiate_ns = double(host_clock::now_ns() - t1);
  return plan;
}

std::unique_ptr<Replay> DeviceSession::capture(const std::function<binding::IValue()>& call_once,
                                               const std::vector<uint32_t>& op_ids, CaptureCost& cost) {
  return capture_plan(*this, call_once, op_ids, cost);
}

}  // namespace strata::app
