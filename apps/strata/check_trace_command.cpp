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
#include "measure/harness.h"
#include "reports/checker/chrome_trace_check.h"

namespace strata::app {
namespace {

// The largest trace check-trace reads. strata's own traces are a few MiB (about 300 bytes per event);
// the JSON parser needs roughly ten times the text in memory, so 256 MiB keeps a check within a few GiB.
constexpr size_t kMaxTraceBytes = size_t{256} << 20;

// The whole of `path`, which must be a regular file of at most kMaxTraceBytes. A FIFO, a device
// (/dev/zero) or a directory is refused before anything is read: the first would block, the second
// never ends. O_NONBLOCK keeps even open() from waiting on a FIFO; the size is checked again while
// reading, because /proc files say 0 and a file may grow.
std::string read_trace_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw UsageError("cannot read '" + path + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) throw Error("cannot read '" + path + "' (fstat): " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a named pipe (FIFO)"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    throw UsageError("cannot check '" + path + "': it is " + kind + "; check-trace reads a trace file (a regular file)");
  }
  auto too_large = [&] {
    return UsageError("cannot check '" + path + "': it is larger than " + format_bytes(double(kMaxTraceBytes)) +
                      ", the most check-trace reads (strata's own traces are a few MiB)");
  };
  if (static_cast<uint64_t>(st.st_size) > kMaxTraceBytes) throw too_large();
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    measure::stop_if_interrupted();
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot read '" + path + "' (read): " + std::strerror(errno));
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > kMaxTraceBytes) throw too_large();
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
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
