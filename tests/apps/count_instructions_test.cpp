// `strata trace ... --count instructions` end to end (label valgrind; each case skips, saying why, where
// valgrind is not installed). Note [Instructions per row] in measure/instruction_count.h.
#include <unistd.h>

#include <string>

#include "tests/apps/e2e.h"

namespace strata::test {
namespace {

// Why the counting cases cannot run here, or "" when they can.
#if defined(__SANITIZE_ADDRESS__)
#define STRATA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRATA_TEST_ASAN 1
#endif
#endif
std::string cannot_count() {
#if defined(STRATA_TEST_ASAN)
  return "an AddressSanitizer build: valgrind cannot run it";
#else
  if (::access("/usr/bin/valgrind", X_OK) != 0 && ::access("/usr/local/bin/valgrind", X_OK) != 0)
    return "valgrind is not installed (scripts/install-deps, or apt install valgrind)";
  return "";
#endif
}

// Few calls: each span boundary is a callgrind dump, and a row's figure is the median per call anyway.
std::vector<std::string> counted(std::vector<std::string> args) {
  for (const char* a : {"--count", "instructions", "--repeat", "5", "--warmup", "1", "--device", "cpu"}) args.push_back(a);
  return args;
}

}  // namespace

// Guards strata's own per-call overhead, binding + dispatch of matmul 16 (no autograd, no autocast), in
// instructions: a count that the machine's load cannot move, so a regression fails here instead of hiding
// in timing noise. Recorded on this tree (Debian's valgrind 3.19, GCC Release build): kRecorded
// instructions per call (binding 318, dispatch/CPU 256); the bound leaves 25% for compilers and library versions to differ. The floor
// catches an attribution that lost the rows (a count of 0 would pass any bound).
TEST_CASE("matmul 16 --count instructions: binding + dispatch under the recorded bound, every host row counted") {
  if (const std::string why = cannot_count(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  constexpr double kRecorded = 574;  // binding 318 + dispatch/CPU 256, the same in three runs
  const Reported r = run_reported(counted({"trace", "matmul", "16"}));
  check_no_crash(r.run);
  INFO("stdout:\n" << r.run.out << "\nstderr:\n" << r.run.err);
  REQUIRE(r.run.exit_code == 0);
  const double binding_dispatch = r.doc["figures"]["instructions.binding_dispatch"]["value"].get<double>();
  CHECK(binding_dispatch <= kRecorded * 1.25);
  CHECK(binding_dispatch >= kRecorded * 0.5);
  // Every host row carries its own count; the library row (a 16x16x16 GEMM) outweighs binding.
  const double binding = report_row(r.doc, "binding")["instructions"]["median"].get<double>();
  const double cpu = report_row(r.doc, "dispatch", "CPU")["instructions"]["median"].get<double>();
  const double library = report_row(r.doc, "library")["instructions"]["median"].get<double>();
  CHECK(binding > 0);
  CHECK(cpu > 0);
  CHECK(library > binding);
  CHECK(binding + cpu <= binding_dispatch);
  CHECK(contains(table_line(r.run.out, "layer"), "instructions"));
}

TEST_CASE("--count instructions: the same count twice (deterministic)") {
  if (const std::string why = cannot_count(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  const Reported a = run_reported(counted({"trace", "relu", "64"}));
  const Reported b = run_reported(counted({"trace", "relu", "64"}));
  REQUIRE(a.run.exit_code == 0);
  REQUIRE(b.run.exit_code == 0);
  CHECK(a.doc["figures"]["instructions.binding_dispatch"]["value"] == b.doc["figures"]["instructions.binding_dispatch"]["value"]);
}

TEST_CASE("--count instructions without valgrind on PATH: exit 4, saying how to get it") {
  const RunResult r = run_strata(counted({"trace", "matmul", "16"}), {.env = {"PATH=/nonexistent"}});
  check_refused(r, 4, "apt install valgrind");
}

TEST_CASE("--count: an unknown count and what is not counted are usage errors, before valgrind starts") {
  check_refused(run_strata({"trace", "matmul", "16", "--count", "cycles"}), 2, "allowed: instructions");
  check_refused(run_strata(counted({"trace", "matmul", "16", "--peer", "torch"})), 2, "--peer torch");
  check_refused(run_strata({"trace", "matmul", "16", "--count", "instructions", "--device", "cuda"}), 2,
                "allowed: cpu, auto");
}

}  // namespace strata::test
