// Note [A native backtrace on a crash]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With STRATA_NATIVE_BACKTRACE=1 in the environment, importing the extension installs a handler for the
// fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) that writes to stderr the address a SIGSEGV or
// SIGBUS touched and the native frames, each as `library(symbol+offset)` or `library(+offset)`, and then
// hands the signal on to whatever handled it before (Python's faulthandler, which adds the Python stack, or
// the default action: the process still dies of its signal, with the same exit status).
//
// Why: python_profile_test died of SIGSEGV on the GPU machine (Ubuntu's Python 3.12, g++ 13) and nowhere
// else: not here under Python 3.11 or 3.12 with the same pybind11, not under valgrind or ASan. That machine
// has no gdb and no core dumps come back from it, and faulthandler names the Python line only. The offsets
// in this listing resolve to functions and lines with `addr2line -f -C -e LIBRARY OFFSET` on the same build,
// which scripts/gpu_validate does for every frame in the host suite's log.
//
// The handler only calls backtrace(3) (loaded once at install, so that it does not allocate in the
// handler), backtrace_symbols_fd(3) and write(2). Off unless asked: a handler of ours must never change how
// a healthy process behaves.
#include "apps/python/native_backtrace.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace strata::python {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kMaxFrames = 64;
struct sigaction g_previous[sizeof(kSignals) / sizeof(kSignals[0])];

void write_text(const char* text) {
  const ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void write_number(long value) {
  char digits[24];
  char* end = digits + sizeof digits;
  char* p = end;
  const bool negative = value < 0;
  unsigned long magnitude = negative ? 0UL - static_cast<unsigned long>(value) : static_cast<unsigned long>(value);
  do {
    *--p = char('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0);
  if (negative) *--p = '-';
  const ssize_t ignored = write(STDERR_FILENO, p, size_t(end - p));
  (void)ignored;
}

void write_hex(uintptr_t value) {
  char digits[2 + 2 * sizeof value];
  char* end = digits + sizeof digits;
  char* p = end;
  do {
    *--p = "0123456789abcdef"[value % 16];
    value /= 16;
  } while (value != 0);
  *--p = 'x';
  *--p = '0';
  const ssize_t ignored = write(STDERR_FILENO, p, size_t(end - p));
  (void)ignored;
}

// strsignal(3) may consult the locale: not for a signal handler.
const char* signal_name(int signal_number) {
  switch (signal_number) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
  }
}

void on_fatal_signal(int signal_number, siginfo_t* info, void*) {
  write_text("\nstrata: fatal signal ");
  write_number(signal_number);
  write_text(" (");
  write_text(signal_name(signal_number));
  write_text(")");
  // The address a SIGSEGV or SIGBUS touched tells a null pointer (near 0) from a stale or wild one, which
  // the frames alone do not.
  if ((signal_number == SIGSEGV || signal_number == SIGBUS) && info != nullptr) {
    write_text(" at fault address ");
    write_hex(reinterpret_cast<uintptr_t>(info->si_addr));
  }
  write_text("; native backtrace (STRATA_NATIVE_BACKTRACE, Note [A native backtrace on a crash]):\n");
  void* frames[kMaxFrames];
  const int count = backtrace(frames, kMaxFrames);
  backtrace_symbols_fd(frames, count, STDERR_FILENO);
  write_text("strata: end of native backtrace\n");
  // Hand the signal on: put back what was there and raise it again. For a fault the instruction also
  // re-executes on return and faults again under the previous handler.
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
    if (kSignals[i] == signal_number) sigaction(signal_number, &g_previous[i], nullptr);
  }
  raise(signal_number);
}

}  // namespace

bool install_native_backtrace_if_asked() {
  const char* asked = std::getenv("STRATA_NATIVE_BACKTRACE");
  if (asked == nullptr || asked[0] == '\0' || std::strcmp(asked, "0") == 0) return false;
  // backtrace() loads libgcc's unwinder on its first call, which allocates: do that here, not in the handler.
  void* warm[1];
  backtrace(warm, 1);
  struct sigaction action {};
  action.sa_sigaction = &on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) sigaction(kSignals[i], &action, &g_previous[i]);
  return true;
}

}  // namespace strata::python
