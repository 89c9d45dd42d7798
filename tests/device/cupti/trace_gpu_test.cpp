// `strata trace --device cuda` end to end on a GPU (label gpu): every op, the rows the GPU adds (launch,
// queue, gpu) measured and joined, the check against float64 passing, the report naming the device and
// where its peak comes from, and the Chrome trace passing the invariants of docs/design.md with real records.
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

const json* row(const json& breakdown, const std::string& layer) {
  for (const json& r : breakdown["rows"])
    if (r["layer"] == layer) return &r;
  return nullptr;
}

json trace(const std::vector<std::string>& args, const test::TempDir& dir, const std::string& name) {
  std::vector<std::string> all{"trace"};
  all.insert(all.end(), args.begin(), args.end());
  for (const char* a : {"--device", "cuda", "--check", "--repeat", "20", "--warmup", "2", "--json"}) all.push_back(a);
  all.push_back(dir.file(name + ".json"));
  all.push_back("--chrome-trace");
  all.push_back(dir.file(name + ".trace.json"));
  const test::RunResult r = test::run_strata(all, {});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  MESSAGE(r.out);
  const std::vector<std::string> errors = reports::check_chrome_trace(test::read_file(dir.file(name + ".trace.json")));
  for (const std::string& e : errors) FAIL_CHECK("chrome trace: " << e);
  return json::parse(test::read_file(dir.file(name + ".json")));
}

}  // namespace

TEST_CASE("strata trace on cuda: every op and dtype, device rows joined, check passing, trace valid") {
  test::TempDir dir;
  const std::vector<std::vector<std::string>> cases = {
      {"matmul", "512"},
      {"matmul", "512", "--tf32"},
      {"matmul", "512", "--dtype", "bf16"},
      {"matmul", "256", "--dtype", "f16"},
      {"linear", "32x768x3072"},
      {"linear", "32x768x3072", "--dtype", "bf16"},
      {"conv", "8x64x28x28", "--kernel", "3", "--pad", "1"},
      {"conv", "8x64x28x28", "--kernel", "3", "--pad", "1", "--dtype", "f16"},
      {"relu", "1048576"},
      {"add", "1048576", "--dtype", "bf16"},
  };
  int index = 0;
  for (const auto& args : cases) {
    std::string label;
    for (const auto& a : args) label += a + " ";
    CAPTURE(label);
    const json doc = trace(args, dir, "case" + std::to_string(index++));
    CHECK(doc["device"].get<std::string>().rfind("cuda:0 ", 0) == 0);
    CHECK(doc["check"]["passed"] == true);
    const json& steady = doc["steady"];
    CHECK(steady["device_records"] == true);
    CHECK(steady["unmatched_launches"] == 0);
    CHECK(steady["unmatched_kernels"] == 0);
    for (const char* layer : {"launch", "queue", "gpu"}) {
      CAPTURE(std::string(layer));
      const json* r = row(steady, layer);
      REQUIRE(r != nullptr);
      CHECK((*r)["applicable"] == true);
      CHECK((*r)["time"]["median"].get<double>() > 0);
    }
    CHECK_FALSE(steady["kernels"].empty());
    CHECK(doc["environment"]["device"].contains("cuDNN"));
    CHECK(doc["environment"]["device"]["GPU timing"] == "CUPTI activity records");
    // The plans the libraries made are named: which algorithm cuDNN's search chose, what cuBLASLt gave.
    std::string plans;
    for (const json& note : doc["notes"])
      if (note.get<std::string>().rfind("plan: ", 0) == 0) plans += note.get<std::string>() + "\n";
    if (args[0] == "conv") CHECK(plans.find("cuDNN chose ") != std::string::npos);
    if (args[0] == "linear") CHECK(plans.find("linear 32x768x3072") != std::string::npos);
    if (args[0] == "matmul" || args[0] == "relu" || args[0] == "add") CHECK(plans.empty());
  }
}

TEST_CASE("--autocast on cuda: keys Autocast > Autograd > CUDA, the cast kernels and the GEMM in bf16/f16") {
  test::TempDir dir;
  for (const char* to : {"bf16", "f16"}) {
    CAPTURE(std::string(to));
    const json doc = trace({"matmul", "1024", "--autocast", to, "--requires-grad"}, dir, std::string("autocast_") + to);
    CHECK(doc["dispatch_keys"] == "Autocast > Autograd > CUDA");
    CHECK(doc["check"]["passed"] == true);
    const json* library = row(doc["steady"], "library");
    REQUIRE(library != nullptr);
    CHECK(library->dump().find(std::string("cast_kernel<f32,") + to + "><<<>>>") != std::string::npos);
    // Two cast kernels and the GEMM: every launch joined to a kernel.
    CHECK(doc["steady"]["kernels"].size() >= 2);
    CHECK(doc["steady"]["unmatched_launches"] == 0);
  }
}

TEST_CASE("--no-device-timing: host timers only, device rows marked not applicable, the run still passes") {
  test::TempDir dir;
  const test::RunResult r = test::run_strata({"trace", "matmul", "256", "--device", "cuda", "--no-device-timing",
                                              "--repeat", "10", "--json", dir.file("r.json")});
  REQUIRE(r.exit_code == 0);
  const json doc = json::parse(test::read_file(dir.file("r.json")));
  CHECK(doc["steady"]["device_records"] == false);
  CHECK((*row(doc["steady"], "gpu"))["applicable"] == false);
  CHECK(r.out.find("--no-device-timing") != std::string::npos);
}

TEST_CASE("strata devices lists the GPU with its libraries") {
  const test::RunResult r = test::run_strata({"devices"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("cuda:0: ") != std::string::npos);
  CHECK(r.out.find("cuBLAS") != std::string::npos);
}
