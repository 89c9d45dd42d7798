// --algos / --algo / --time on a GPU (label gpu; skipped without a device, runtime/cuda/gpu_test_main.cpp):
// cuBLASLt's candidates for matmul and linear listed in the notes and as figures, every one timed with
// --time, the library row naming the candidate that ran, --algo K running K with --check still passing,
// and K past the heuristic's list refused with exit 2 (Note [Which cuBLASLt algorithm]).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

using namespace strata;
using nlohmann::json;

namespace {

struct Traced {
  test::RunResult run;
  json report;
};

Traced trace(std::vector<std::string> args, const test::TempDir& dir, const std::string& name) {
  args.insert(args.begin(), "trace");
  for (const char* a : {"--device", "cuda", "--check", "--repeat", "10", "--warmup", "1", "--json"}) args.push_back(a);
  args.push_back(dir.file(name + ".json"));
  Traced t;
  t.run = test::run_strata(args, {});
  INFO("stdout:\n" << t.run.out << "\nstderr:\n" << t.run.err);
  REQUIRE(t.run.exit_code == 0);
  MESSAGE(t.run.out);
  t.report = json::parse(test::read_file(dir.file(name + ".json")));
  return t;
}

double figure(const json& report, const std::string& name) {
  const json& figures = report["figures"];
  REQUIRE_MESSAGE(figures.contains(name), name);
  return figures[name]["value"].get<double>();
}

// The names of the steady library row's zones.
std::string library_names(const json& report) {
  for (const json& row : report["steady"]["rows"])
    if (row["layer"] == "library") return row["names"].dump();
  return "";
}

}  // namespace

TEST_CASE("matmul --algos 4 --time: the candidates listed and timed, the first ran") {
  test::TempDir dir;
  const Traced t = trace({"matmul", "1024", "--algos", "4", "--time"}, dir, "listed");
  const json& r = t.report;
  CHECK(r["check"]["passed"] == true);
  const int count = int(figure(r, "gemm_algos.0.candidates"));
  CHECK(count >= 1);
  CHECK(count <= 4);
  CHECK(figure(r, "gemm_algos.0.chosen") == 0);
  for (int j = 0; j < count; ++j) {
    CAPTURE(j);
    CHECK(figure(r, "gemm_algos.0." + std::to_string(j) + ".time_ns") > 0);
    CHECK(figure(r, "gemm_algos.0." + std::to_string(j) + ".splitk") >= 1);
  }
  CHECK(t.run.out.find("cuBLASLt's candidates for matmul 1024x1024x1024 f32") != std::string::npos);
  CHECK(t.run.out.find("fastest: candidate") != std::string::npos);
  CHECK(library_names(r).find("cublasLtMatmul, candidate 0 (algo ") != std::string::npos);
}

TEST_CASE("matmul --algo 1 runs candidate 1, its result still within tolerance, K past the list is exit 2") {
  test::TempDir dir;
  // All the heuristic has for the shape (up to --algos' 64), so that K = that count is past the list.
  const Traced listed = trace({"matmul", "1024", "--algos", "64"}, dir, "all");
  const int count = int(figure(listed.report, "gemm_algos.0.candidates"));
  if (count < 2) {
    MESSAGE("cuBLASLt returned " << count << " candidate here: --algo 1 cannot be run");
  } else {
    const Traced forced = trace({"matmul", "1024", "--algo", "1"}, dir, "forced");
    CHECK(forced.report["check"]["passed"] == true);
    CHECK(figure(forced.report, "gemm_algos.0.chosen") == 1);
    CHECK(figure(forced.report, "gemm_algos.0.1.algo_id") == figure(listed.report, "gemm_algos.0.1.algo_id"));
    CHECK(library_names(forced.report).find("cublasLtMatmul, candidate 1 (algo ") != std::string::npos);
  }
  if (count >= 64) {
    MESSAGE("cuBLASLt returned 64 candidates here: no K up to 63 is past the list");
    return;
  }
  const std::string k = std::to_string(count);
  const test::RunResult past = test::run_strata(
      {"trace", "matmul", "1024", "--device", "cuda", "--algo", k, "--repeat", "3", "--warmup", "0"}, {});
  INFO("stderr:\n" << past.err);
  CHECK(past.exit_code == 2);
  CHECK(past.err.find("--algo " + k + ": cuBLASLt's heuristic returned " + k + " candidate") != std::string::npos);
}

TEST_CASE("linear --algos 3 --time: the bias-epilogue plan's candidates, bf16 matmul too") {
  test::TempDir dir;
  const Traced lin = trace({"linear", "32x768x3072", "--algos", "3", "--time"}, dir, "linear");
  CHECK(lin.report["check"]["passed"] == true);
  CHECK(figure(lin.report, "gemm_algos.0.candidates") >= 1);
  CHECK(lin.run.out.find("cuBLASLt's candidates for linear 32x768x3072 f32") != std::string::npos);
  const Traced bf16 = trace({"matmul", "512", "--dtype", "bf16", "--algos", "2"}, dir, "bf16");
  CHECK(bf16.report["check"]["passed"] == true);
  CHECK(figure(bf16.report, "gemm_algos.0.candidates") >= 1);
}
