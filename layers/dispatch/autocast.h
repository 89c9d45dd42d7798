// The Autocast key (PyTorch's autocast, torch.autocast): the highest-priority wrapper key. Its kernel casts
// an op's eligible tensor inputs to the autocast dtype with real calls of the cast operator (to_copy,
// through the dispatcher), then redispatches with Autocast removed, so that Autograd records on the cast
// tensors and the backend computes in the low-precision dtype. See docs/autocast.md.
//
// One mechanism for every operator: an op's declaration (layers/ops/operators.h) names its policy
// (kAutocast); an op with none gets a fallthrough (c10's makeFallthrough), which masks the key out before
// the dispatcher picks a kernel, so that Autocast in the key set never fails an op it has nothing to do for.
#pragma once

#include <cstdint>
#include <tuple>
#include <type_traits>

#include "layers/dispatch/dispatch.h"
#include "lib/dtype.h"
#include "lib/tensor.h"

namespace strata {

// What the Autocast key does for an op. PyTorch's lists have more (fp32, promote); strata's ops need one.
enum class AutocastPolicy : uint8_t {
  kLowerPrecision,  // GEMM-like ops: cast f32 inputs to the autocast dtype (PyTorch's lower_precision_fp)
};
const char* autocast_policy_name(AutocastPolicy policy);

// The dtypes autocast casts to, and what --autocast accepts.
inline constexpr DType kAutocastDTypes[] = {DType::kBF16, DType::kF16};
bool is_autocast_dtype(DType dtype);

namespace detail {
inline thread_local DType t_autocast_dtype = DType::kBF16;  // PyTorch's default on the CPU
}  // namespace detail
inline DType autocast_dtype() { return detail::t_autocast_dtype; }

// Autocast on for this thread, casting to `dtype` (torch.autocast(device, dtype=...) as a scope): adds the
// key to the thread's included keys and sets the dtype; both are restored when the guard ends. Throws
// UsageError for a dtype autocast cannot cast to (f32, f64).
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  LocalDispatchKeySet saved_keys_;
  DType saved_dtype_;
};

// This thread's autocast state: whether the key is in its included set, and the dtype it casts to. For a
// scope that cannot be a C++ block (Python's `with strata.autocast(...)`: enter and exit are separate
// calls, and the contexts of one thread may exit out of order): it saves the state on entry and puts
// it back on exit; the other keys of the thread's set are left as they are.
struct AutocastState {
  bool enabled = false;
  DType dtype = DType::kBF16;
};
AutocastState autocast_state();
// Throws UsageError for an enabled state whose dtype autocast cannot cast to (f32, f64).
void set_autocast_state(AutocastState state);

// Whether autocast casts a tensor to `to`: a defined floating tensor of another dtype, except f64
// (PyTorch's is_eligible leaves doubles alone too: someone asked for them explicitly). A tensor that
// already has the target dtype is passed through uncast, as PyTorch's cached_cast does.
inline bool autocast_eligible(const Tensor& t, DType to) {
  return t.defined() && t.dtype() != to && t.dtype() != DType::kF64;
}

namespace autocast_detail {
template <typename Cast, typename T>
const T& cast_arg(Cast, DType, const T& v) {  // ints and floats pass through
  return v;
}
template <typename Cast>
Tensor cast_arg(Cast cast, DType to, const Tensor& t) {
  return autocast_eligible(t, to) ? cast(t, to) : t;
}
}  // namespace autocast_detail

// The Autocast kernel of operator `op` (its index) whose table type is Fn, for the lower-precision
// policy: every eligible tensor argument goes through `cast` (the cast operator's entry point, from
// layers/ops: the dispatcher knows no operator), then the op is redispatched below Autocast with the
// cast tensors. The casts run under an InnerCallGuard (Note [Calls made by a wrapper kernel]).
template <typename Fn, typename Cast, typename... Args>
Tensor autocast_lower_precision(size_t op, Cast cast, DispatchKeySet ks, const Args&... args) {
  const DType to = detail::t_autocast_dtype;
  std::tuple<std::remove_cvref_t<Args>...> cast_args = [&] {
    InnerCallGuard inner;
    // Braced initialisation evaluates left to right: the casts run in argument order.
    return std::tuple<std::remove_cvref_t<Args>...>{autocast_detail::cast_arg(cast, to, args)...};
  }();
  return std::apply(
      [&](const auto&... a) {
        return Dispatcher::instance().redispatch<Fn>(op, ks.remove(DispatchKey::kAutocast), a...);
      },
      cast_args);
}

}  // namespace strata
