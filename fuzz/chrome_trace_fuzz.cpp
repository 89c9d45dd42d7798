// Fuzzes check_chrome_trace (reports/formats/chrome_trace.cpp), which reads traces strata did not necessarily
// write (`strata check-trace FILE`): any input must give a list of problems, never an exception, a
// crash or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "reports/formats/chrome_trace.h"
#include "reports/checker/chrome_trace_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    strata::reports::check_chrome_trace(text);
  } catch (...) {
    std::abort();
  }
  return 0;
}
