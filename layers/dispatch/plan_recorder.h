// Plan recording (DESIGN.md "Modes": plan replay on a machine without a GPU). While a recorder is
// active on this thread, every call that reaches a backend kernel is also recorded as that resolved
// kernel call with its arguments; replaying the plan runs exactly those kernels again, without binding
// and without dispatch. This is the CPU analogue of capturing a CUDA Graph through the full stack.
// Only plan capture (apps/strata/plan_replay.cpp) starts one; the dispatcher's call() feeds it.
#pragma once

#include <functional>
#include <vector>

#include "layers/dispatch/dispatch_key.h"
#include "lib/tensor.h"

namespace strata {

struct PlanStep {
  const char* op;
  DispatchKey key;
  std::function<Tensor()> run;
};

namespace detail {
inline thread_local std::vector<PlanStep>* t_plan_recorder = nullptr;
}  // namespace detail

class PlanRecordingGuard {
 public:
  explicit PlanRecordingGuard(std::vector<PlanStep>* steps) : saved_(detail::t_plan_recorder) {
    detail::t_plan_recorder = steps;
  }
  ~PlanRecordingGuard() { detail::t_plan_recorder = saved_; }
  PlanRecordingGuard(const PlanRecordingGuard&) = delete;
  PlanRecordingGuard& operator=(const PlanRecordingGuard&) = delete;

 private:
  std::vector<PlanStep>* saved_;
};

}  // namespace strata
