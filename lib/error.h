// Errors and exit codes. One rule per place (see docs/errors.md):
//  - user mistakes are caught at the edge (frontend, binding, CLI) as UsageError: exit 2;
//  - a valid request the machine cannot satisfy (no GPU, device out of memory) is UnavailableError: exit 4;
//  - library failures (CUDA, cuBLAS, cuDNN, OpenBLAS, I/O) are Error with the call's text: exit 1;
//  - tracing failures never throw: they are reported and the run continues with less data.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace strata {

enum class ExitCode : int {
  kOk = 0,
  kFailure = 1,      // a library call failed, an output could not be written, or a bug
  kUsage = 2,        // the command line asked for something malformed or impossible
  kCheckFailed = 3,  // --check found the result outside the dtype's tolerance
  kUnavailable = 4,  // the request is valid but this machine cannot serve it (no GPU, out of device memory)
  kInterrupted = 130,
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ExitCode code = ExitCode::kFailure)
      : std::runtime_error(what), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what, ExitCode::kUsage) {}
};

// A dim or an index outside a tensor's range (transpose's dims, select's index): a usage error (exit 2)
// that Python raises as IndexError, as torch does.
class IndexRangeError : public UsageError {
 public:
  explicit IndexRangeError(const std::string& what) : UsageError(what) {}
};

class UnavailableError : public Error {
 public:
  explicit UnavailableError(const std::string& what) : Error(what, ExitCode::kUnavailable) {}
};

// "1.50 GiB": sizes in refusals are always printed this way.
std::string format_bytes(double bytes);
// What the user typed, in single quotes, for a message. Control and non-ASCII bytes are shown as \xNN:
// written raw they would garble the terminal, and a NUL would cut the message short (what() is a C string).
std::string quote_typed(std::string_view s);

}  // namespace strata
