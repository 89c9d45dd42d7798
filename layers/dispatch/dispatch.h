// The dispatcher: one kernel table per operator, indexed by dispatch key (c10's
// OperatorEntry::dispatchTable_). Entry points (strata::ops) compute the key set from the tensors and the
// thread-local state, pick the highest-priority key, and call its kernel; wrapper kernels redispatch with
// their key removed. Every step is a Dispatch-layer zone named after the key, so the breakdown shows one
// row per key.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "layers/dispatch/dispatch_key.h"
#include "layers/dispatch/plan_recorder.h"
#include "lib/error.h"
#include "lib/tensor.h"
#include "lib/zone.h"

namespace strata {

// The C++ type of an operator's kernels in the table: its Signature (layers/ops/operators.h) with the
// key set first, so that wrapper kernels can redispatch with their own key removed.
template <typename Signature>
struct KernelFnOf;
template <typename... Args>
struct KernelFnOf<Tensor(Args...)> {
  using type = Tensor(DispatchKeySet, Args...);
};

class OperatorEntry;

namespace detail {
// How many wrapper kernels on this thread are making calls of their own (Autocast's casts); see
// InnerCallGuard.
inline thread_local int t_inner_calls = 0;
}  // namespace detail


// Removes the kernel it stands for when it goes out of scope (c10's RegistrationHandleRAII): a test or a
// temporary wrapper registers through one, so that the process-wide tables are as they were afterwards.
class [[nodiscard]] RegistrationHandle {
 public:
  RegistrationHandle(OperatorEntry* entry, DispatchKey key) : entry_(entry), key_(key) {}
  RegistrationHandle(RegistrationHandle&& o) noexcept : entry_(o.entry_), key_(o.key_) { o.entry_ = nullptr; }
  RegistrationHandle(const RegistrationHandle&) = delete;
  RegistrationHandle& operator=(const RegistrationHandle&) = delete;
  RegistrationHandle& operator=(RegistrationHandle&&) = delete;
  ~RegistrationHandle();

 private:
  OperatorEntry* entry_;
  DispatchKey key_;
};

class OperatorEntry {
 public:
  OperatorEntry() = default;
  OperatorEntry(const char* name, const char* schema);

  const char* name() const { return name_; }
  const char* schema() const { return schema_; }  // parsed by the binding layer
  void* kernel(DispatchKey key) const { return table_[static_cast<size_t>(key)]; }
  const std::string& registered_by(DispatchKey key) const { return debug_[static_cast<size_t>(key)]; }
  std::vector<DispatchKey> keys_with_kernels() const;  // fallthrough keys are not kernels: not listed
  // Keys this operator skips (c10's fallthrough kernels): a wrapper key with nothing to do for the op is
  // masked out of the key set before the highest key is picked, so it costs one AND and no call.
  DispatchKeySet fallthrough_keys() const { return fallthrough_; }
  void set_fallthrough(DispatchKey key, std::string debug);
  // What a Dispatch zone of this op is called when the op is called from inside another op's kernel
  // (InnerCallGuard): "to_copy:CPU", so that its rows stay apart from the outer op's own "CPU" row.
  const char* inner_zone_name(DispatchKey key) const { return inner_names_[static_cast<size_t>(key)].c_str(); }

  // For the built-in kernels (layers/ops/register_kernels*.cpp): registered for the life of the process.
  void set_kernel(DispatchKey key, void* fn, std::string debug);
  // For everything else: the kernel is removed again when the handle is destroyed.
  RegistrationHandle register_kernel(DispatchKey key, void* fn, std::string debug) {
    set_kernel(key, fn, std::move(debug));
    return RegistrationHandle(this, key);
  }
  void clear_kernel(DispatchKey key);
  [[noreturn]] void throw_missing_kernel(DispatchKey key, DispatchKeySet ks) const;

 private:
  const char* name_ = "";
  const char* schema_ = "";
  std::array<void*, kNumDispatchKeys> table_{};
  std::array<std::string, kNumDispatchKeys> debug_;  // who registered what: beside the table, not in it
  DispatchKeySet fallthrough_;
  std::array<std::string, kNumDispatchKeys> inner_names_;
};

// Every operator's entry, indexed by the operator's position in ops::AllOps. The dispatcher itself knows
// no operator: layers/ops builds the entries from the declarations and registers the kernels, and its
// typed entry points (ops::matmul, ...) call in here with the op's index.
class Dispatcher {
 public:
  // The first call builds every operator's entry and registers every kernel, through the one explicit
  // list in layers/ops (defined there, see Note [One declaration per operator]).
  static Dispatcher& instance();
  explicit Dispatcher(std::vector<OperatorEntry> entries) : ops_(std::move(entries)) {}

  const OperatorEntry& entry(size_t op) const { return ops_[op]; }
  OperatorEntry& entry(size_t op) { return ops_[op]; }
  const std::vector<OperatorEntry>& operators() const { return ops_; }

  // Runs the kernel of ks's highest-priority key inside `zone`, which is renamed after the key so the
  // lookup belongs to that key's row. `Fn` is the table's kernel type for the op (KernelFnOf).
  template <typename Fn, typename... Args>
  Tensor call(Zone& zone, size_t op, DispatchKeySet ks, const Args&... args) const {
    const OperatorEntry& e = ops_[op];
    ks = ks - e.fallthrough_keys();
    DispatchKey key = ks.highest_priority();
    void* fn = e.kernel(key);
    if (fn == nullptr) [[unlikely]]
      e.throw_missing_kernel(key, ks);
    zone.rename(detail::t_inner_calls == 0 ? dispatch_key_name(key) : e.inner_zone_name(key));
    auto* kernel = reinterpret_cast<Fn*>(fn);
    if (detail::t_plan_recorder != nullptr && key <= DispatchKey::kCUDA) [[unlikely]] {
      return detail::record_plan_step(e.name(), key, kernel, ks, args...);
    }
    return kernel(ks, args...);
  }

  // For wrapper kernels: they pass ks with their own key removed (c10's redispatch).
  template <typename Fn, typename... Args>
  Tensor redispatch(size_t op, DispatchKeySet ks, const Args&... args) const {
    STRATA_ZONE(zone, Layer::kDispatch, "redispatch");
    return call<Fn>(zone, op, ks, args...);
  }

 private:
  std::vector<OperatorEntry> ops_;
};

// Note [Calls made by a wrapper kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A wrapper kernel may call other operators before it redispatches (Autocast casts the inputs with
// to_copy). Those are full calls through the dispatcher, with their own key set and kernels; their
// Dispatch zones are named "<op>:<key>" while this guard is alive, so that the breakdown gives them
// their own rows ("to_copy:CPU") instead of adding their cost to the outer op's "CPU" row, and so that
// the key path of the outer op ("Autocast > Autograd > CPU") is not interleaved with theirs.
class InnerCallGuard {
 public:
  InnerCallGuard() { ++detail::t_inner_calls; }
  ~InnerCallGuard() { --detail::t_inner_calls; }
  InnerCallGuard(const InnerCallGuard&) = delete;
  InnerCallGuard& operator=(const InnerCallGuard&) = delete;
};

// Thread-local dispatch state (c10's LocalDispatchKeySet): keys forced on or off for this thread.
struct LocalDispatchKeySet {
  DispatchKeySet included;
  DispatchKeySet excluded;
};
namespace detail {
inline thread_local LocalDispatchKeySet t_local;
// Grad mode lives in lib, beside the view headers that record it (Note [Views and their base's history]).
using tensor_detail::t_grad_enabled;
}  // namespace detail
// This thread's state, for those who must read it (the tests); the guards below are how to change it.
inline LocalDispatchKeySet local_dispatch_key_set() { return detail::t_local; }
inline bool grad_mode_enabled() { return detail::t_grad_enabled; }

class IncludeKeyGuard {
 public:
  explicit IncludeKeyGuard(DispatchKey key) : saved_(detail::t_local) {
    detail::t_local.included = detail::t_local.included.add(key);
  }
  ~IncludeKeyGuard() { detail::t_local = saved_; }

 private:
  LocalDispatchKeySet saved_;
};

class ExcludeKeyGuard {
 public:
  explicit ExcludeKeyGuard(DispatchKey key) : saved_(detail::t_local) {
    detail::t_local.excluded = detail::t_local.excluded.add(key);
  }
  ~ExcludeKeyGuard() { detail::t_local = saved_; }

 private:
  LocalDispatchKeySet saved_;
};

class NoGradGuard {
 public:
  NoGradGuard() : saved_(detail::t_grad_enabled) { detail::t_grad_enabled = false; }
  ~NoGradGuard() { detail::t_grad_enabled = saved_; }

 private:
  bool saved_;
};

// The key set of one call: each defined tensor argument's backend key, Autograd if any requires grad (and grad
// mode is on), then the thread-local included keys added and excluded keys removed.
// Arguments that are not tensors (an int stride, a float alpha) add no key.
template <typename T>
DispatchKeySet backend_key_set(const T&) {
  return {};
}
inline DispatchKeySet backend_key_set(const Tensor& t) {
  if (!t.defined()) return {};
  DispatchKeySet ks(t.device().is_cuda() ? DispatchKey::kCUDA : DispatchKey::kCPU);
  if (t.requires_grad()) ks = ks.add(DispatchKey::kAutograd);
  return ks;
}
template <typename... Ts>
DispatchKeySet compute_dispatch_key_set(const Ts&... args) {
  DispatchKeySet ks = (backend_key_set(args) | ...);
  if (!detail::t_grad_enabled) ks = ks.remove(DispatchKey::kAutograd);
  return (ks | detail::t_local.included) - detail::t_local.excluded;
}

}  // namespace strata
