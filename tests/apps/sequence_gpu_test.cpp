// Sequences on a GPU (label gpu; skipped without a device): `strata trace mlp --device cuda` gives every
// op's kernels, the idle time between consecutive kernels, the launch share and a verdict; the float64
// check passes; the Chrome trace holds every op of every forward and is valid. `strata compare mlp`
// captures the whole forward into one CUDA Graph and replays it with the same result. --view on an mlp's
// tensors copies every view inside its step (linear keeps cuBLASLt layouts on CUDA).
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reports/formats/chrome_trace.h"
#include "reports/checker/chrome_trace_check.h"
#include "tests/support/subprocess.h"

using namespace strata;
using nlohmann::json;

TEST_CASE("trace mlp on cuda: kernels per op, GPU idle between them, launch share, verdict, valid trace") {
  test::TempDir dir;
  const std::string report = dir.file("m.json"), trace = dir.file("m.trace.json");
  for (const char* grad : {"", "--requires-grad"}) {
    std::vector<std::string> args{"trace", "mlp", "16x256x512x512x10", "--device", "cuda", "--check", "--repeat",
                                  "20", "--warmup", "2", "--json", report, "--chrome-trace", trace};
    if (*grad) args.push_back(grad);
    const test::RunResult r = test::run_strata(args, {});
    INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
    REQUIRE(r.exit_code == 0);
    MESSAGE(r.out);
    CHECK(r.out.find("GPU idle between kernels") != std::string::npos);
    const json doc = json::parse(test::read_file(report));
    const json& seq = doc["sequence"];
    CHECK(doc["check"]["passed"] == true);
    CHECK(seq["ops_per_forward"] == 5);
    CHECK(seq["device_records"] == true);
    CHECK(seq["kernels_per_forward"].get<double>() >= 5);  // at least one kernel per op
    CHECK(seq["gpu_idle_between_kernels"]["median"].get<double>() >= 0);
    CHECK(seq["launch"]["median"].get<double>() > 0);
    CHECK(seq["compute"]["median"].get<double>() > 0);
    CHECK(seq["compute"]["median"].get<double>() <= seq["forward_wall"]["median"].get<double>());
    CHECK((seq["verdict"] == "compute-bound" || seq["verdict"] == "overhead-bound"));
    for (const json& step : seq["steps"]) CHECK(step["steady"]["kernels"].size() >= 1);
    const std::string text = test::read_file(trace);
    for (const std::string& e : reports::check_chrome_trace(text)) FAIL_CHECK("chrome trace: " << e);
    std::map<std::string, int> bindings;
    const json events = json::parse(text)["traceEvents"];  // a copy: the parsed document is a temporary
    for (const json& e : events)
      if (e.value("cat", "") == "binding" && e.value("ph", "") == "X") ++bindings[e.value("name", "")];
    CHECK(bindings["linear"] == 3 * 21);  // 20 timed forwards + the cold one
    CHECK(bindings["relu"] == 2 * 21);
  }
}

TEST_CASE("compare mlp on cuda: the whole forward in one CUDA Graph, checked against float64") {
  test::TempDir dir;
  const std::string report = dir.file("c.json"), trace = dir.file("c.trace.json");
  const test::RunResult r =
      test::run_strata({"compare", "mlp", "16x256x512x10", "--device", "cuda", "--check", "--requires-grad", "--repeat",
                        "20", "--warmup", "2", "--json", report, "--chrome-trace", trace},
                       {});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  MESSAGE(r.out);
  const json doc = json::parse(test::read_file(report));
  CHECK(doc["replay"]["label"] == "CUDA Graph");
  CHECK(doc["ops_per_replay"] == 3);
  CHECK(doc["check"]["passed"] == true);
  CHECK(doc["replay"]["binding"].get<double>() == 0);
  CHECK(doc["replay"]["gpu"].get<double>() > 0);
  for (const std::string& e : reports::check_chrome_trace(test::read_file(trace))) FAIL_CHECK("chrome trace: " << e);
}

// --view on an mlp's tensors on CUDA (docs/views.md): linear keeps its cuBLASLt layouts there, so the
// transposed weight is copied as well as the stepped one, each a contiguous:CUDA call inside its step;
// the float64 check passes in trace, and in compare's eager rounds and graph replay.
TEST_CASE("trace and compare mlp --view on cuda: every view copied inside its step, checked against float64") {
  test::TempDir dir;
  const std::string report = dir.file("v.json");
  const std::vector<std::string> views{"--view", "0.weight=t", "--view", "2.weight=slice2"};
  std::vector<std::string> args{"trace", "mlp", "16x256x512x10", "--device", "cuda", "--check", "--repeat", "10",
                                "--warmup", "2", "--json", report};
  args.insert(args.end(), views.begin(), views.end());
  test::RunResult r = test::run_strata(args, {});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  json doc = json::parse(test::read_file(report));
  CHECK(doc["check"]["passed"] == true);
  const json& log = doc["sequence"]["op_log"];
  REQUIRE(log.size() == 3);
  CHECK(log[0]["dispatch_keys"].get<std::string>().find("contiguous:CUDA") != std::string::npos);
  CHECK(log[1]["dispatch_keys"].get<std::string>().find("contiguous") == std::string::npos);
  CHECK(log[2]["dispatch_keys"].get<std::string>().find("contiguous:CUDA") != std::string::npos);

  args = {"compare", "mlp", "16x256x512x10", "--device", "cuda", "--check", "--repeat", "10", "--warmup", "2",
          "--json", report};
  args.insert(args.end(), views.begin(), views.end());
  r = test::run_strata(args, {});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  doc = json::parse(test::read_file(report));
  CHECK(doc["check"]["passed"] == true);
}
