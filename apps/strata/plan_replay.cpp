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
  explicit PlanReplay(std::vector<PlanStep> steps) : steps_(std::move(steps)) {}
  std::string kind() const override { return "plan replay"; }
  void replay() override {
    STRATA_ZONE(zone, Layer::kRuntime, "plan replay");
    for (const PlanStep& step : steps_) last_ = step.run();
  }
  binding::IValue last_result() const override { return last_; }

 private:
  std::vector<PlanStep> steps_;
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
