// `strata check-trace FILE`: the invariants a Chrome trace strata writes must hold (docs/design.md), checked
// by reports/checker on any file, such as one edited by hand or written by another tool.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "apps/strata/commands.h"
#include "lib/error.h"
#include "lib/input_file.h"
#include "measure/harness.h"
#include "reports/checker/chrome_trace_check.h"

namespace strata::app {
namespace {

// The largest trace check-trace reads. strata's own traces are a few MiB (about 300 bytes per event);
// the JSON parser needs roughly ten times the text in memory, so 256 MiB keeps a check within a few GiB.
constexpr size_t kMaxTraceBytes = size_t{256} << 20;

// The whole of `path`, which must be a regular file of at most kMaxTraceBytes (Note [Reading a file
// strata did not write] in lib/input_file.h): a FIFO, a device (/dev/zero) or a directory is refused
// before anything is read.
std::string read_trace_file(const std::string& path) {
  InputFile f = read_regular_file(path, kMaxTraceBytes, &measure::stop_if_interrupted);
  switch (f.failure) {
    case InputFile::Failure::kNone: return std::move(f.bytes);
    case InputFile::Failure::kCannotOpen: throw UsageError("cannot read '" + path + "': it " + f.why);
    case InputFile::Failure::kNotRegular:
      throw UsageError("cannot check '" + path + "': it " + f.why + "; check-trace reads a trace file (a regular file)");
    case InputFile::Failure::kTooLarge:
      throw UsageError("cannot check '" + path + "': it is larger than " + format_bytes(double(kMaxTraceBytes)) +
                       ", the most check-trace reads (strata's own traces are a few MiB)");
    case InputFile::Failure::kReadError: break;
  }
  throw Error("cannot read '" + path + "': it " + f.why);
}

// Note [Out of memory while parsing]: under a memory limit (ulimit -v, a container's), a std::bad_alloc
// inside nlohmann::json::parse() is not enough to report it: while unwinding, the half-built document
// is destroyed, and destroying an array first allocates a stack as large as the array, which fails too
// and ends in std::terminate. So check-trace sets aside, before parsing, room for that stack: 48 bytes
// (a 16-byte value, tripled for the vector's growth) per value the text can hold (at most one per ',',
// '[' or '{'). The first failed allocation gives the room back and throws, so that the unwinding has it.
class ParseReserve {
 public:
  explicit ParseReserve(const std::string& text) {
    const size_t values = 1 + static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
                            return c == ',' || c == '[' || c == '{';
                          }));
    room_ = std::malloc(48 * values + (size_t{16} << 20));
    if (room_ == nullptr) throw std::bad_alloc();
    previous_ = std::set_new_handler(&give_back);
  }
  ~ParseReserve() {
    if (room_ != nullptr) std::set_new_handler(previous_);
    std::free(room_);
    room_ = nullptr;
  }
  ParseReserve(const ParseReserve&) = delete;
  ParseReserve& operator=(const ParseReserve&) = delete;

 private:
  static void give_back() {
    std::free(room_);
    room_ = nullptr;
    std::set_new_handler(previous_);
    throw std::bad_alloc();
  }
  static inline void* room_ = nullptr;
  static inline std::new_handler previous_ = nullptr;
};

}  // namespace

int run_check_trace(const std::string& path) {
  std::vector<std::string> errors;
  try {
    const std::string text = read_trace_file(path);
    const ParseReserve reserve(text);
    errors = reports::check_chrome_trace(text);
  } catch (const std::bad_alloc&) {
    throw Error("out of memory while checking '" + path +
                "': the parsed trace needs more memory than this process may use (see ulimit -v)");
  }
  measure::stop_if_interrupted();
  // Violations are errors: on stderr, each with strata's prefix; stdout says only "valid".
  for (const std::string& e : errors) std::cerr << "strata: error: " << path << ": " << e << "\n";
  if (errors.empty()) std::cout << path << ": valid (every invariant of docs/design.md holds)\n";
  return errors.empty() ? 0 : static_cast<int>(ExitCode::kFailure);
}

}  // namespace strata::app
