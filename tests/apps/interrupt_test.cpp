// End-to-end: Ctrl-C (SIGINT) or SIGTERM during a long --repeat stops strata at the next call boundary
// with exit code 130, no table, and no output file or temporary (docs/errors.md).
//
// No sleeps decide anything here: the test waits until the child has used some CPU time (so it is past
// start-up and inside the measurement loop), then signals it. Nothing is asserted about how long that
// takes; wait()'s timeout only guards against a child that never stops.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <string>

#include "lib/timeline.h"
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

// Note [Interruptible pre-faulting]: compare reserves its span buffer before the first round, up to half
// of the free memory, and touching it took tens of seconds that a Ctrl-C could not cut short (issue 30,
// item 3: "a SIGINT at 3 s took effect at 31 s"). The test sizes the reservation from strata's own
// refusal message, signals the child once it has touched 256 MiB of it, and checks the child's peak
// memory: a run that heard the signal stops within a chunk; one that did not touches the whole buffer.
TEST_CASE(
    "SIGINT while compare reserves a large span buffer stops it there: exit 130, most pages untouched") {
  const std::vector<std::string> args = {
      "compare",  "mlp", "2x8x8x8x8x8x8x8x8x8x8x8x8x8x8x8x8", "--ops-per-graph", "4096", "--warmup", "0",
      "--device", "cpu"};
  auto with_repeat = [&](int64_t repeat) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--repeat", std::to_string(repeat)});
    return a;
  };
  // 1000000 rounds is refused, naming the spans it would record: the spans of one round, times a million.
  const RunResult refused = run_strata(with_repeat(1000000));
  REQUIRE(refused.exit_code == 2);
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(refused.err, m, std::regex("would record ([0-9]+) spans")), refused.err);
  const double bytes_per_round = std::stod(m[1]) / 1e6 * sizeof(strata::Span);
  // About 4 GiB, or a third of what the machine has free (the run refuses more than half).
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  double available = 0;
  while (std::getline(meminfo, line))
    if (line.starts_with("MemAvailable:")) available = std::stod(line.substr(13)) * 1024;
  const double target = std::min(4.0 * (1 << 30), available / 3);
  if (target < 1.0 * (1 << 30)) {
    MESSAGE("skipped: under 3 GiB of free memory, too little for a reservation that takes long to touch");
    return;
  }
  TempDir dir;
  std::vector<std::string> a = with_repeat(static_cast<int64_t>(target / bytes_per_round));
  a.insert(a.end(), {"--json", dir.file("out.json")});
  Subprocess p(a);
  int64_t rss = 0;
  while ((rss = p.rss_kib()) >= 0 && rss < 256 * 1024) usleep(1000);
  REQUIRE_MESSAGE(rss >= 0, "strata exited before it had touched 256 MiB");
  kill(p.pid(), SIGINT);
  const RunResult r = p.wait(300);
  check_interrupted(r, dir);
  // Stopped within a chunk or two of where the signal found it, far from the whole buffer.
  CHECK(double(r.max_rss_kib) * 1024 < target / 2);
}
