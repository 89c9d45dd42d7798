// `strata compare --device cuda` on a GPU (label gpu): the op captured into a CUDA Graph through the full
// stack and replayed, for K = 1 and K > 1. Replayed results equal the float64 reference (as eager ones
// do), every replayed kernel is attributed to the op that created its graph node, both modes land in one
// valid Chrome trace, and the graph's host cost per op is the graph launch divided by K.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "reports/formats/chrome_trace.h"
#include "reports/checker/chrome_trace_check.h"
#include "tests/support/subprocess.h"

using namespace strata;
using nlohmann::json;

namespace {

struct Compared {
  test::RunResult run;
  json report;
};

Compared compare(const std::vector<std::string>& args, const test::TempDir& dir, const std::string& name) {
  std::vector<std::string> all{"compare"};
  all.insert(all.end(), args.begin(), args.end());
  for (const char* a : {"--device", "cuda", "--check", "--repeat", "20", "--warmup", "2", "--json"}) all.push_back(a);
  all.push_back(dir.file(name + ".json"));
  all.push_back("--chrome-trace");
  all.push_back(dir.file(name + ".trace.json"));
  Compared c;
  c.run = test::run_strata(all, {});
  INFO("stdout:\n" << c.run.out << "\nstderr:\n" << c.run.err);
  REQUIRE(c.run.exit_code == 0);
  MESSAGE(c.run.out);
  for (const std::string& e : reports::check_chrome_trace(test::read_file(dir.file(name + ".trace.json"))))
    FAIL_CHECK("chrome trace: " << e);
  c.report = json::parse(test::read_file(dir.file(name + ".json")));
  return c;
}

}  // namespace

TEST_CASE("compare on cuda: CUDA Graph replay, K = 1 and K = 16, results checked, kernels attributed") {
  test::TempDir dir;
  const std::vector<std::vector<std::string>> cases = {
      {"matmul", "256", "--ops-per-graph", "1"},
      {"matmul", "256", "--ops-per-graph", "16"},
      {"relu", "1048576", "--ops-per-graph", "16"},
      {"conv", "8x64x28x28", "--kernel", "3", "--pad", "1", "--ops-per-graph", "4"},
      {"linear", "32x768x3072", "--ops-per-graph", "4"},
  };
  int index = 0;
  for (const auto& args : cases) {
    CAPTURE(args[0]);
    CAPTURE(args.back());
    Compared c = compare(args, dir, "case" + std::to_string(index++));
    const json& r = c.report;
    CHECK(r["replay"]["label"] == "CUDA Graph");
    CHECK(r["check"]["passed"] == true);
    CHECK(r["eager"]["device_records"] == true);
    // Replay skips binding and dispatch; its host cost is the graph launch (shared by K ops).
    CHECK(r["replay"]["binding"].get<double>() == 0);
    CHECK(r["replay"]["dispatch"].get<double>() == 0);
    CHECK(r["replay"]["launch"].get<double>() > 0);
    CHECK(r["replay"]["gpu"].get<double>() > 0);
    CHECK(r["eager"]["gpu"].get<double>() > 0);
    // Every replayed kernel maps back to the op that created its node, none guessed.
    const std::string& out = c.run.out;
    const auto at = out.find("graph replay: ");
    REQUIRE(at != std::string::npos);
    const std::string line = out.substr(at, out.find('\n', at) - at);
    CHECK(line.find("(the rest: no node record)") == std::string::npos);
    CHECK(out.find("eager vs CUDA Graph") != std::string::npos);
  }
}
