// The non-template half of the Autocast key (layers/dispatch/autocast.h): the thread's autocast state.
#include "layers/dispatch/autocast.h"

#include <string>

#include "lib/error.h"

namespace strata {

const char* autocast_policy_name(AutocastPolicy policy) {
  switch (policy) {
    case AutocastPolicy::kLowerPrecision: return "lower precision";
  }
  return "?";
}

bool is_autocast_dtype(DType dtype) {
  for (DType d : kAutocastDTypes)
    if (d == dtype) return true;
  return false;
}

namespace {
void check_autocast_dtype(DType dtype) {
  if (!is_autocast_dtype(dtype)) {
    throw UsageError("autocast casts to bf16 or f16, not " + std::string(dtype_name(dtype)) +
                     " (f32 is what it casts from)");
  }
}
}  // namespace

AutocastState autocast_state() {
  return {detail::t_local.included.has(DispatchKey::kAutocast), detail::t_autocast_dtype};
}

void set_autocast_state(AutocastState state) {
  if (state.enabled) check_autocast_dtype(state.dtype);
  detail::t_local.included = state.enabled ? detail::t_local.included.add(DispatchKey::kAutocast)
                                           : detail::t_local.included.remove(DispatchKey::kAutocast);
  detail::t_autocast_dtype = state.dtype;
}

AutocastGuard::AutocastGuard(DType dtype) : saved_keys_(detail::t_local), saved_dtype_(detail::t_autocast_dtype) {
  check_autocast_dtype(dtype);
  detail::t_local.included = detail::t_local.included.add(DispatchKey::kAutocast);
  detail::t_autocast_dtype = dtype;
}

AutocastGuard::~AutocastGuard() {
  detail::t_local = saved_keys_;
  detail::t_autocast_dtype = saved_dtype_;
}

}  // namespace strata
