// End-to-end: Ctrl-C (SIGINT) or SIGTERM during a long --repeat stops strata at the next call boundary
// with exit code 130, no table, and no output file or temporary (docs/errors.md).
//
// No sleeps decide anything here: the test waits until the child has used some CPU time (so it is past
// start-up and inside the measurement loop), then signals it. Nothing is asserted about how long that
// takes; wait()'s timeout only guards against a child that never stops.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include "tests/apps/e2e.h"

using namespace strata::test;

namespace {

// Starts a run that would take minutes, waits until it is measuring, then sends `signals` in order.
RunResult interrupted_run(const TempDir& dir, std::initializer_list<int> signals) {
  Subprocess p({"trace", "matmul", "64", "--device", "cpu", "--repeat", "1000000", "--warmup", "0", "--json",
                dir.file("out.json"), "--chrome-trace", dir.file("trace.json")});
  // 30 ticks = 0.3 s of CPU: start-up (clock calibration, inputs, cold call) takes a few milliseconds.
  int64_t ticks = 0;
  while ((ticks = p.cpu_ticks()) >= 0 && ticks < 30) usleep(10000);
  REQUIRE_MESSAGE(ticks >= 0, "strata exited before it could be interrupted");
  for (int sig : signals) kill(p.pid(), sig);
  return p.wait(120);
}

void check_interrupted(const RunResult& r, const TempDir& dir) {
  check_no_crash(r);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 130);
  // With strata's prefix, from the call boundary or (second signal) from the handler.
  CHECK(contains(r.err, "strata: error: interrupted"));
  CHECK(r.out.empty());          // no table
  CHECK(dir.entries().empty());  // no report, no trace, no *.tmp.*
}

}  // namespace

TEST_CASE("SIGINT during a long --repeat: exit 130, no table, no file") {
  TempDir dir;
  check_interrupted(interrupted_run(dir, {SIGINT}), dir);
}

TEST_CASE("SIGTERM is treated like SIGINT") {
  TempDir dir;
  check_interrupted(interrupted_run(dir, {SIGTERM}), dir);
}

TEST_CASE("a second signal leaves at once, still with 130 and nothing written") {
  TempDir dir;
  check_interrupted(interrupted_run(dir, {SIGINT, SIGINT}), dir);
}
