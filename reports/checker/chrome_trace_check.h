// Role: checker.
// The checker of strata's Chrome traces (chrome_trace_check.cpp), apart from the writer (chrome_trace.h):
// `strata check-trace`, the tests and the fuzzer use it on any trace text.
#pragma once

#include <string>
#include <vector>

namespace strata::reports {

// Every violation of the trace invariants (docs/design.md) in `json`, one line each; empty means valid:
// valid JSON with no NUL byte and no key twice in one object, no NaN/Infinity, at least one event, every
// phase one of the Trace Event Format's, pid and tid not negative, args an object, every B closed by an E
// on its track, finite non-negative ts, X events on one track properly nested, every flow
// id exactly one "s" and one "f" each inside an X on its own track, tid never 0. And what HTA relies on
// (Note [Kineto trace layout]), wherever the trace has it: an integer rank >= 0 in distributedInfo,
// deviceProperties a non-empty array of flat objects, ProfilerStep#N events complete, numbered once and
// not overlapping each other on a track, GPU events (cat kernel, gpu_memcpy, gpu_memset) with integer
// "correlation" and "stream" > 0, CUDA API events (cuda_runtime, cuda_driver) with integer
// "correlation" and "cbid" and no "stream".
std::vector<std::string> check_chrome_trace(const std::string& json);

}  // namespace strata::reports
