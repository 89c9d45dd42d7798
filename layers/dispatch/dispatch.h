// The dispatcher: one kernel table per operator, indexed by dispatch key (c10's
// OperatorEntry::dispatchTable_). Entry points (strata::ops) compute the key set from the tensors and the
// thread-local state, pick the highest-priority key, and call its kernel; wrapper kernels redispatch with
// their key removed. Every step is a Dispatch-layer zone named after the key, so the breakdown shows one
// row per key.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "layers/dispatch/dispatch_key.h"
#include "lib/error.h"
#include "lib/tensor.h"
#include "lib/zone.h"

namespace strata {

enum class OpId : uint8_t { kMatmul, kLinear, kConv2d, kRelu, kAdd, kCount };
inline constexpr int kNumOps = static_cast<int>(OpId::kCount);

// The C++ signature of each operator's kernels. An undefined Tensor stands for an absent optional one.
template <OpId>
struct OpTraits;
template <>
struct OpTraits<OpId::kMatmul> {
  using Fn = Tensor(DispatchKeySet, const Tensor& self, const Tensor& other);
};
template <>
struct OpTraits<OpId::kLinear> {
  using Fn = Tensor(DispatchKeySet, const Tensor& input, const Tensor& weight, const Tensor& bias);
};
template <>
struct OpTraits<OpId::kConv2d> {
  using Fn = Tensor(DispatchKeySet, const Tensor& input, const Tensor& weight, const Tensor& bias,
                    int64_t stride, int64_t padding);
};
template <>
struct OpTraits<OpId::kRelu> {
  using Fn = Tensor(DispatchKeySet, const Tensor& self);
};
template <>
struct OpTraits<OpId::kAdd> {
  using Fn = Tensor(DispatchKeySet, const Tensor& self, const Tensor& other, double alpha);
};

class OperatorEntry {
 public:
  OperatorEntry() = default;
  OperatorEntry(OpId id, const char* name, const char* schema) : id_(id), name_(name), schema_(schema) {}

  OpId id() const { return id_; }
  const char* name() const { return name_; }
  const char* schema() const { return schema_; }  // parsed by the binding layer
  void* kernel(DispatchKey key) const { return table_[static_cast<size_t>(key)]; }
  const std::string& registered_by(DispatchKey key) const { return debug_[static_cast<size_t>(key)]; }
  std::vector<DispatchKey> keys_with_kernels() const;

  void set_kernel(DispatchKey key, void* fn, std::string debug);
  [[noreturn]] void throw_missing_kernel(DispatchKey key, DispatchKeySet ks) const;

 private:
  OpId id_ = OpId::kCount;
  const char* name_ = "";
  const char* schema_ = "";
  std::array<void*, kNumDispatchKeys> table_{};
  std::array<std::string, kNumDispatchKeys> debug_;  // who registered what: beside the table, not in it
};

// Plan recording (DESIGN.md "Modes": plan replay on a machine without a GPU). While a recorder is
// active on this thread, every call that reaches a backend kernel is also recorded as that resolved
// kernel call with its arguments; replaying the plan runs exactly those kernels again, without binding
// and without dispatch. This is the CPU analogue of capturing a CUDA Graph through the full stack.
struct PlanStep {
  const char* op;
  DispatchKey key;
  std::function<Tensor()> run;
};
namespace dispatch_tls {
inline thread_local std::vector<PlanStep>* t_plan_recorder = nullptr;
}  // namespace dispatch_tls

class PlanRecordingGuard {
 public:
  explicit PlanRecordingGuard(std::vector<PlanStep>* steps) : saved_(dispatch_tls::t_plan_recorder) {
    dispatch_tls::t_plan_recorder = steps;
  }
  ~PlanRecordingGuard() { dispatch_tls::t_plan_recorder = saved_; }

 private:
  std::vector<PlanStep>* saved_;
};

class Dispatcher {
 public:
  // The first call registers every backend through the one explicit list in backend_registry.cpp.
  static Dispatcher& instance();

  template <OpId Op>
  void register_kernel(DispatchKey key, typename OpTraits<Op>::Fn* fn, std::string debug) {
    entry(Op).set_kernel(key, reinterpret_cast<void*>(fn), std::move(debug));
  }

  const OperatorEntry& entry(OpId op) const { return ops_[static_cast<size_t>(op)]; }
  OperatorEntry& entry(OpId op) { return ops_[static_cast<size_t>(op)]; }
  const std::array<OperatorEntry, kNumOps>& operators() const { return ops_; }

  // Runs the kernel of ks's highest-priority key inside `zone`, which is renamed after the key so the
  // lookup belongs to that key's row.
  template <OpId Op, typename... Args>
  Tensor call(Zone& zone, DispatchKeySet ks, const Args&... args) const {
    DispatchKey key = ks.highest_priority();
    const OperatorEntry& e = entry(Op);
    void* fn = e.kernel(key);
    if (fn == nullptr) [[unlikely]]
      e.throw_missing_kernel(key, ks);
    zone.rename(dispatch_key_name(key));
    auto* kernel = reinterpret_cast<typename OpTraits<Op>::Fn*>(fn);
    if (dispatch_tls::t_plan_recorder != nullptr && key <= DispatchKey::kCUDA) [[unlikely]] {
      // Arguments are copied: a plan owns what its kernels read (tensors share their storage).
      dispatch_tls::t_plan_recorder->push_back({e.name(), key, [kernel, ks, args...] { return kernel(ks, args...); }});
    }
    return kernel(ks, args...);
  }

  // For wrapper kernels: they pass ks with their own key removed (c10's redispatch).
  template <OpId Op, typename... Args>
  Tensor redispatch(DispatchKeySet ks, const Args&... args) const {
    STRATA_ZONE(zone, Layer::kDispatch, "redispatch");
    return call<Op>(zone, ks, args...);
  }

 private:
  Dispatcher();
  std::array<OperatorEntry, kNumOps> ops_;
};

// Thread-local dispatch state (c10's LocalDispatchKeySet): keys forced on or off for this thread.
struct LocalDispatchKeySet {
  DispatchKeySet included;
  DispatchKeySet excluded;
};
namespace dispatch_tls {
inline thread_local LocalDispatchKeySet t_local;
inline thread_local bool t_grad_enabled = true;
}  // namespace dispatch_tls

class IncludeKeyGuard {
 public:
  explicit IncludeKeyGuard(DispatchKey key) : saved_(dispatch_tls::t_local) {
    dispatch_tls::t_local.included = dispatch_tls::t_local.included.add(key);
  }
  ~IncludeKeyGuard() { dispatch_tls::t_local = saved_; }

 private:
  LocalDispatchKeySet saved_;
};

class ExcludeKeyGuard {
 public:
  explicit ExcludeKeyGuard(DispatchKey key) : saved_(dispatch_tls::t_local) {
    dispatch_tls::t_local.excluded = dispatch_tls::t_local.excluded.add(key);
  }
  ~ExcludeKeyGuard() { dispatch_tls::t_local = saved_; }

 private:
  LocalDispatchKeySet saved_;
};

class NoGradGuard {
 public:
  NoGradGuard() : saved_(dispatch_tls::t_grad_enabled) { dispatch_tls::t_grad_enabled = false; }
  ~NoGradGuard() { dispatch_tls::t_grad_enabled = saved_; }

 private:
  bool saved_;
};

// The key set of one call: each defined tensor's backend key, Autograd if any requires grad (and grad
// mode is on), then the thread-local included keys added and excluded keys removed.
inline DispatchKeySet backend_key_set(const Tensor& t) {
  if (!t.defined()) return {};
  DispatchKeySet ks(t.device().is_cuda() ? DispatchKey::kCUDA : DispatchKey::kCPU);
  if (t.requires_grad()) ks = ks.add(DispatchKey::kAutograd);
  return ks;
}
template <typename... Ts>
DispatchKeySet compute_dispatch_key_set(const Ts&... tensors) {
  DispatchKeySet ks = (backend_key_set(tensors) | ...);
  if (!dispatch_tls::t_grad_enabled) ks = ks.remove(DispatchKey::kAutograd);
  return (ks | dispatch_tls::t_local.included) - dispatch_tls::t_local.excluded;
}

// The operator entry points: what the binding layer calls.
namespace ops {
Tensor matmul(const Tensor& self, const Tensor& other);
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding);
Tensor relu(const Tensor& self);
Tensor add(const Tensor& self, const Tensor& other, double alpha);
}  // namespace ops

// Registers the Autograd kernels of every operator (autograd.cpp).
void register_autograd_kernels(Dispatcher& dispatcher);
// The one explicit list of backends (backend_registry.cpp).
void register_backends(Dispatcher& dispatcher);

}  // namespace strata
