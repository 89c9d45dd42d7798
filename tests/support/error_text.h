// Test helpers for checking what an error says: the message a call throws, and substring tests.
#pragma once

#include <string>

#include "lib/error.h"

namespace strata::test {

// The what() of the strata Error `f` throws, or "" when it throws none. E narrows what is caught
// (message_of<UsageError>): another kind of error then leaves the call and fails the test by itself.
template <typename E = Error, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace strata::test
