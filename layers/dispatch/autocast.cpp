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

AutocastGuard::AutocastGuard(DType dtype) : saved_keys_(detail::t_local), saved_dtype_(detail::t_autocast_dtype) {
  if (!is_autocast_dtype(dtype)) {
    throw UsageError("autocast casts to bf16 or f16, not " + std::string(dtype_name(dtype)) +
                     " (f32 is what it casts from)");
  }
  detail::t_local.included = detail::t_local.included.add(DispatchKey::kAutocast);
  detail::t_autocast_dtype = dtype;
}

AutocastGuard::~AutocastGuard() {
  detail::t_local = saved_keys_;
  detail::t_autocast_dtype = saved_dtype_;
}

}  // namespace strata
