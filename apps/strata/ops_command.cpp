// `strata ops`: every operator, its schema, and which dispatch keys have kernels, with who registered
// them (the analogue of torch._C._dispatch_dump).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <utility>
#include <vector>

#include "apps/strata/commands.h"
#include "layers/binding/binding.h"
#include "layers/dispatch/dispatch.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "measure/harness.h"
#include "reports/formats/chrome_trace.h"
#include "reports/checker/chrome_trace_check.h"
#if STRATA_WITH_CUDA
#include "measure/devices/cuda_module.h"
#endif

namespace strata::app {
namespace {

// Each operator's declared CUDA kernel, in dispatcher order; "" where it has none. Read at compile time, so
// the executable never refers to the kernels themselves (they are in libstrata_cuda.so).
std::vector<std::string> declared_cuda_kernels() {
  std::vector<std::string> where;
  ops::AllOps::for_each([&](auto op) {
    using Op = decltype(op);
    where.emplace_back(ops::kHasKernel<decltype(Op::kCuda)> ? Op::kCuda.where : "");
  });
  return where;
}

// Each operator's in-place note (Note [In-place operators]), in dispatcher order; "" for the others.
std::vector<std::string> in_place_notes() {
  std::vector<std::string> notes;
  ops::AllOps::for_each([&](auto op) {
    using Op = decltype(op);
    notes.emplace_back(ops::kInPlace<Op> ? "writes self through its strides and bumps its version" : "");
  });
  return notes;
}

}  // namespace

int run_ops() {
  const Dispatcher& d = Dispatcher::instance();
  // `strata ops` does not load libstrata_cuda.so (Note [The CUDA module]): a question about operators
  // should not map the CUDA libraries. Until the module is loaded the CUDA kernels are not in the
  // dispatcher; they are listed from their declarations, marked as such.
  bool cuda_unloaded = false;
#if STRATA_WITH_CUDA
  cuda_unloaded = !measure::cuda_backend_loaded();
#endif
  const std::vector<std::string> declared_cuda = declared_cuda_kernels();
  const std::vector<std::string> in_place = in_place_notes();
  size_t index = 0;
  for (const OperatorEntry& e : d.operators()) {
    const binding::Schema schema = binding::parse_schema(e.schema());
    std::cout << schema.text << "\n";
    std::vector<std::pair<DispatchKey, std::string>> lines;
    bool has_cuda = false;
    for (DispatchKey key : e.keys_with_kernels()) {
      lines.emplace_back(key, e.registered_by(key));
      has_cuda = has_cuda || key == DispatchKey::kCUDA;
    }
    // A fallthrough is no kernel, but a reader asking "what does Autocast do for relu" wants the answer.
    for (int k = kNumDispatchKeys - 1; k > 0; --k) {
      const auto key = static_cast<DispatchKey>(k);
      if (e.fallthrough_keys().has(key)) lines.emplace_back(key, e.registered_by(key));
    }
    const std::string& note = in_place.at(index);
    const std::string& cuda = declared_cuda.at(index++);
    if (cuda_unloaded && !cuda.empty() && !has_cuda) {
      lines.emplace_back(DispatchKey::kCUDA, cuda + "  [in libstrata_cuda.so, registered on the first CUDA use]");
    }
    std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [key, by] : lines) {
      std::string name = dispatch_key_name(key);
      name.resize(10, ' ');
      std::cout << "  " << name << by << "\n";
    }
    if (!note.empty()) std::cout << "  in place  " << note << "\n";
  }
  std::cout << "\nkeys in priority order (highest first): ";
  for (int k = kNumDispatchKeys - 1; k > 0; --k) {
    std::cout << dispatch_key_name(static_cast<DispatchKey>(k)) << (k > 1 ? " > " : "\n");
  }
  // Which ops Autocast changes, in one line (the per-op lines above say how).
  std::string casts, skips;
  for (const OperatorEntry& e : d.operators()) {
    std::string& list = e.kernel(DispatchKey::kAutocast) != nullptr ? casts : skips;
    list += (list.empty() ? "" : ", ") + std::string(e.name());
  }
  std::cout << "Autocast (--autocast bf16|f16) casts the inputs of: " << (casts.empty() ? "none" : casts)
            << "; falls through for: " << (skips.empty() ? "none" : skips) << "\n";
  // A key in the list above that no operator has a kernel for is only a place in the order: say so, so
  // that nobody reads "Autocast" as a feature (a key set that includes it ends in a missing-kernel error).
  for (int k = kNumDispatchKeys - 1; k > 0; --k) {
    const auto key = static_cast<DispatchKey>(k);
    bool any = false;
    for (const OperatorEntry& e : d.operators()) any = any || e.kernel(key) != nullptr;
    // The CUDA kernels of a CUDA build are declared (listed above) but registered only when the module loads.
    if (key == DispatchKey::kCUDA && cuda_unloaded)
      any = std::any_of(declared_cuda.begin(), declared_cuda.end(), [](const std::string& w) { return !w.empty(); });
    if (!any) std::cout << dispatch_key_name(key) << ": no operator has a kernel for this key in this build\n";
  }
  // Programs are no operators (Note [Sequences are not operators]) but are run like them: list them here.
  std::cout << "\nsequences, run like ops (strata trace, strata compare):\n"
            << frontend::sequence_help();
  return 0;
}

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
