// layers/device/cupti: which API calls count as launches and which op each call belongs to, decided over
// strata's own structs once every CUPTI record is converted. No cupti.h: testable on any machine.
#pragma once

#include <cstddef>
#include <vector>

#include "lib/timeline.h"

namespace strata::cupti {

// INTERNAL_LAUNCH_API records carry no cbid and come from driver launches outside any public call (module
// loading, library set-up). Each counts as a launch only when a kernel or memory record shares its
// correlation id, so driver housekeeping cannot inflate the launch row. Run after every record is
// converted, before resolve_nested_launches. Returns how many count as launches.
size_t resolve_internal_launches(DeviceTrace& trace);

// A launch call that encloses another launch call on the same thread (a runtime call implemented by a
// driver call) would count twice in the launch row. Of each such pair, the call whose correlation id no
// kernel or memory record carries stops being a launch. Returns how many were demoted.
size_t resolve_nested_launches(DeviceTrace& trace);

// Both of the above, in that order, over one scan of the kernel and memory records (resolving internal
// launches changes none of them). What finish_session runs.
void resolve_launches(DeviceTrace& trace);

// Adds op tags seen by the launch callbacks for correlation ids that no EXTERNAL_CORRELATION record
// covers (a dropped record would otherwise leave the launch without an op). Returns how many were added.
size_t merge_callback_correlations(DeviceTrace& trace, const std::vector<ExternalCorrelation>& from_callbacks);

}  // namespace strata::cupti
