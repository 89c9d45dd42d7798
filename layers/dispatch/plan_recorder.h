// Plan recording (docs/design.md "Modes": plan replay on a machine without a GPU). While a recorder is
// active on this thread, every call that reaches a backend kernel is also recorded as that resolved
// kernel call with its arguments; replaying the plan runs exactly those kernels again, without binding
// and without dispatch. This is the CPU analogue of capturing a CUDA Graph through the full stack.
// Only plan capture (measure/plan_replay.cpp) starts one; the dispatcher's call() feeds it.
#pragma once

#include <functional>
#include <memory>
#include <tuple>
#include <vector>

#include "layers/dispatch/dispatch_key.h"
#include "lib/tensor.h"

namespace strata {

struct PlanStep {
  const char* op;
  DispatchKey key;
  std::function<Tensor()> run;
  // The tensor arguments `run` reads, in order (they live in storage `run` owns), and what the kernel
  // returned at capture. A sequence's plan (measure/plan_replay.cpp) uses them to feed each step's
  // fresh output into the steps that read it at capture: kernels allocate a new output per call, so
  // without this a replayed step would read the capture-time output of the one before it.
  std::vector<Tensor*> tensor_args;
  Tensor output;
};

namespace detail {
inline thread_local std::vector<PlanStep>* t_plan_recorder = nullptr;
// How many recorded kernels are running on this thread. A kernel called from inside another (the implicit
// contiguous() copy of a strided input, a promoted operand's to_copy: Note [Contiguous inputs]) is part of
// the outer kernel's step, which makes that call again when it is replayed; recording it as a step of its
// own as well ran the copy twice and took its output for the op's.
inline thread_local int t_plan_depth = 0;

template <typename T>
void collect_tensor(std::vector<Tensor*>&, T&) {}
inline void collect_tensor(std::vector<Tensor*>& into, Tensor& t) { into.push_back(&t); }

// Records kernel(ks, args...) as a plan step and runs it. Arguments are copied into storage the step
// owns: a plan owns what its kernels read (tensors share their storage).
template <typename Fn, typename... Args>
Tensor record_plan_step(const char* op, DispatchKey key, Fn* kernel, DispatchKeySet ks, const Args&... args) {
  if (t_plan_depth > 0) return kernel(ks, args...);  // inside a recorded kernel: part of its step
  struct Depth {
    Depth() { ++t_plan_depth; }
    ~Depth() { --t_plan_depth; }
    Depth(const Depth&) = delete;
    Depth& operator=(const Depth&) = delete;
  };
  auto stored = std::make_shared<std::tuple<Args...>>(args...);
  PlanStep step{op, key, [kernel, ks, stored] { return std::apply([&](const Args&... a) { return kernel(ks, a...); }, *stored); },
                {}, {}};
  std::apply([&](Args&... a) { (collect_tensor(step.tensor_args, a), ...); }, *stored);
  std::vector<PlanStep>& plan = *t_plan_recorder;
  plan.push_back(std::move(step));  // before the call: steps are in the order their calls began
  const size_t at = plan.size() - 1;
  Tensor out;
  {
    const Depth inside;
    out = kernel(ks, args...);
  }
  plan[at].output = out;
  return out;
}
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
