// Private to layers/device/cupti: included by cupti_trace.cpp (the one translation unit of strata that
// includes cupti.h) and by this layer's tests.
//
// Note [CUPTI failures degrade]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every CUPTI call goes through STRATA_CUPTI_CALL, as every call goes through CUPTI_CALL in Kineto. Unlike
// STRATA_CUDA_CHECK it never throws: a tracing failure must never end a run, whose host figures are still
// worth having without the GPU's (Kineto's CUPTI_CALL logs and carries on for the same reason). It hands
// back the result with the call's text, and the call site says what the failure costs, from least to most:
// nothing the reader needs to know (a fallback that explains itself), a line in the report's notes
// (session_warnings), or no GPU timing at all (start_session's reason). Every message is
// CuptiCall::failure(): the call as written, then CUPTI's own name for the error.
#pragma once

#include <cupti.h>

#include <string>

namespace strata::cupti {

// "CUPTI_ERROR_NOT_INITIALIZED", or the number when CUPTI has no name for it.
inline std::string result_name(CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s != nullptr) return s;
  return "CUptiResult " + std::to_string(static_cast<int>(r));
}

struct CuptiCall {
  CUptiResult result;
  const char* text;  // the call as written at the call site

  bool ok() const { return result == CUPTI_SUCCESS; }
  bool is(CUptiResult r) const { return result == r; }
  std::string reason() const { return result_name(result); }
  // "cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) failed: CUPTI_ERROR_UNKNOWN"
  std::string failure() const { return std::string(text) + " failed: " + reason(); }
};

}  // namespace strata::cupti

// See Note [CUPTI failures degrade]. Never throws; the caller decides what a failure costs.
#define STRATA_CUPTI_CALL(call) (::strata::cupti::CuptiCall{(call), #call})
