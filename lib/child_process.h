// Note [Waiting for a child]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// strata runs other programs and waits for them: the C++ compiler of the compiled path, ptxas. A child
// that never ends (a hung compiler, a CXX that sleeps) must not hang strata, and a signal must end the
// child with strata, leaving nothing half-written behind. So a child runs in a process group of its own
// (the compiler driver's cc1plus, as and ld with it), and wait_for_child polls it every 10 ms rather
// than blocking in waitpid(), which is retried on EINTR and so let no signal through:
//  - past its timeout, the whole group is killed (SIGKILL) and reaped, and the wait says so;
//  - after interrupt_child_waits() (the CLI's first SIGINT/SIGTERM), or when the check installed with
//    set_child_wait_check() says so (Python's pending KeyboardInterrupt), the group is killed, the
//    registered temporaries removed, and Error(ExitCode::kInterrupted) is thrown;
//  - end_pending_child() (the CLI's second signal, which exits from the handler) kills the group and
//    removes the temporaries, async-signal-safely, so that neither outlives strata.
#pragma once

#include <sys/types.h>

#include <string>

namespace strata {

// Waits for `pid` (started in a process group of its own, pgid == pid) for at most timeout_s seconds
// (<= 0: no limit). Returns its exit status, or -signal when a signal ended it; sets timed_out (and
// returns -SIGKILL) when it was killed for running too long. `what` names the child in the interruption
// message ("the C++ compiler"). Throws Error(kInterrupted) when interrupted (above).
int wait_for_child(pid_t pid, double timeout_s, const std::string& what, bool& timed_out);

// A file a child is writing that must not outlive an interruption (the compiler's temporary object in the
// kernel cache): removed by wait_for_child when it is interrupted and by end_pending_child(). One at a
// time (strata waits for one child at a time); paths longer than 4095 bytes are not registered.
class PendingTemporary {
 public:
  explicit PendingTemporary(const std::string& path);
  ~PendingTemporary();
  PendingTemporary(const PendingTemporary&) = delete;
  PendingTemporary& operator=(const PendingTemporary&) = delete;
};

// Async-signal-safe, for the CLI's SIGINT/SIGTERM handler: the first signal makes a wait give up; the
// second, which exits from the handler, ends the child's group and removes the pending temporary.
void interrupt_child_waits() noexcept;
void end_pending_child() noexcept;

// A check run on every poll of a wait (Python's signal check); true means "interrupted". Null: none.
void set_child_wait_check(bool (*check)());

// Seconds a compiler may run: $STRATA_COMPILE_TIMEOUT (a positive number of seconds, or 0 for no limit),
// else 300. Throws UsageError naming the variable and what it may be when it is anything else.
double compile_timeout_from_env();

}  // namespace strata
