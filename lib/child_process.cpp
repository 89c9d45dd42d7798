// Note [Waiting for a child] in child_process.h.
#include "lib/child_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "lib/error.h"

namespace strata {
namespace {

std::atomic<bool> g_waits_interrupted{false};
std::atomic<pid_t> g_child_group{0};
std::atomic<bool (*)()> g_check{nullptr};
// The pending temporary's path; a fixed buffer, since the signal handler reads it.
char g_temporary[4096];
std::atomic<bool> g_has_temporary{false};

void remove_temporary() noexcept {
  if (g_has_temporary.exchange(false)) ::unlink(g_temporary);
}

// Kills the group and reaps the child.
void end_child(pid_t pid) {
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child_group.store(0);
}

double now_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

int wait_for_child(pid_t pid, double timeout_s, const std::string& what, bool& timed_out) {
  timed_out = false;
  g_child_group.store(pid);
  const double start = now_s();
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      g_child_group.store(0);
      return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    if (r < 0 && errno != EINTR) {
      g_child_group.store(0);
      throw Error("could not wait for " + what + ": " + std::strerror(errno));
    }
    bool (*check)() = g_check.load();
    if (g_waits_interrupted.load() || (check != nullptr && check())) {
      end_child(pid);
      remove_temporary();
      throw Error("interrupted: stopped " + what + " (killed it) on a signal; nothing was kept",
                  ExitCode::kInterrupted);
    }
    if (timeout_s > 0 && now_s() - start > timeout_s) {
      end_child(pid);
      timed_out = true;
      return -SIGKILL;
    }
    timespec ten_ms{0, 10'000'000};
    ::nanosleep(&ten_ms, nullptr);  // a signal cuts it short: the flag is read at once
  }
}

PendingTemporary::PendingTemporary(const std::string& path) {
  if (path.size() >= sizeof g_temporary) return;
  std::memcpy(g_temporary, path.c_str(), path.size() + 1);
  g_has_temporary.store(true);
}

PendingTemporary::~PendingTemporary() { g_has_temporary.store(false); }

void interrupt_child_waits() noexcept { g_waits_interrupted.store(true); }

void end_pending_child() noexcept {
  const pid_t group = g_child_group.load();
  if (group > 0) ::kill(-group, SIGKILL);
  remove_temporary();
}

void set_child_wait_check(bool (*check)()) { g_check.store(check); }

double compile_timeout_from_env() {
  const char* text = std::getenv("STRATA_COMPILE_TIMEOUT");
  if (text == nullptr || *text == '\0') return 300;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !std::isfinite(v) || v < 0 || v > 1e6) {
    throw UsageError(std::string("STRATA_COMPILE_TIMEOUT=") + quote_typed(text) +
                     ": must be a number of seconds from 0 to 1000000 (0: no limit; unset: 300)");
  }
  return v;
}

}  // namespace strata
