// Shared checks for the end-to-end tests: they run the real strata binary (STRATA_BIN) and look at what
// a user would see: the exit code, stdout, stderr and the files left behind.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace strata::test {

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline int count_of(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// Short runs: the e2e tests check behaviour, never speed.
inline std::vector<std::string> fast(std::vector<std::string> args) {
  for (const char* a : {"--repeat", "3", "--warmup", "0"}) args.push_back(a);
  return args;
}

// A short run on the CPU stack, whatever this build and machine have: with a GPU, --device auto would
// pick it, and these tests are about the CPU path.
inline std::vector<std::string> cpu(std::vector<std::string> args) {
  args = fast(std::move(args));
  args.push_back("--device");
  args.push_back("cpu");
  return args;
}

// What every run, good or bad, must not show: a crash, a sanitizer report, an uncaught exception.
inline void check_no_crash(const RunResult& r) {
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.term_signal == 0);
  for (const char* bad : {"terminate called", "Aborted", "AddressSanitizer", "LeakSanitizer",
                          "runtime error:", "Segmentation fault", "what():", "internal error"}) {
    CHECK_MESSAGE(!contains(r.err, bad), "stderr contains '" << bad << "'");
  }
}

// A refusal: the exit code, one strata message on stderr that contains `message`, and nothing on stdout
// (no partial table).
inline void check_refused(const RunResult& r, int exit_code, const std::string& message) {
  check_no_crash(r);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == exit_code);
  CHECK(contains(r.err, message));
  CHECK(count_of(r.err, "strata: ") == 1);
  CHECK(r.err.rfind("strata: ", 0) == 0);
  CHECK(r.out.empty());
}

}  // namespace strata::test
