// STRATA_CUPTI_CALL (layers/device/cupti/cupti_call.h) without a GPU: it never throws, and a failure names
// the call as written and CUPTI's own name for the error. See Note [CUPTI failures degrade].
#include <doctest/doctest.h>

#include <string>

#include "layers/device/cupti/cupti_call.h"

namespace {
// A stand-in for a CUPTI call, so the macro's "call text" is predictable.
CUptiResult cupti_call_returning(CUptiResult r) { return r; }
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("STRATA_CUPTI_CALL: success is ok, a failure names the call and CUPTI's error, nothing throws") {
  CHECK(STRATA_CUPTI_CALL(cupti_call_returning(CUPTI_SUCCESS)).ok());
  strata::cupti::CuptiCall failed{CUPTI_SUCCESS, ""};
  CHECK_NOTHROW(failed = STRATA_CUPTI_CALL(cupti_call_returning(CUPTI_ERROR_NOT_INITIALIZED)));
  CHECK_FALSE(failed.ok());
  CHECK(failed.is(CUPTI_ERROR_NOT_INITIALIZED));
  CHECK_FALSE(failed.is(CUPTI_ERROR_UNKNOWN));
  const std::string msg = failed.failure();
  CHECK(contains(msg, "cupti_call_returning(CUPTI_ERROR_NOT_INITIALIZED) failed: "));
  CHECK(contains(msg, failed.reason()));
  CHECK_FALSE(failed.reason().empty());
  CHECK(msg.find('\n') == std::string::npos);
  // The end of a buffer is a result, not a failure, and call sites tell it apart by value.
  CHECK(STRATA_CUPTI_CALL(cupti_call_returning(CUPTI_ERROR_MAX_LIMIT_REACHED)).is(CUPTI_ERROR_MAX_LIMIT_REACHED));
}

TEST_CASE("result_name: CUPTI's name for a result, or its number when CUPTI has none") {
  const std::string name = strata::cupti::result_name(CUPTI_ERROR_INVALID_PARAMETER);
  CHECK_FALSE(name.empty());
  // CUPTI names its results "CUPTI_ERROR_..."; without a usable library the fallback gives the number.
  CHECK((contains(name, "CUPTI_ERROR_INVALID_PARAMETER") || contains(name, "CUptiResult ")));
}
