// --algos / --algo / --time at the edge (apps/strata/gemm_algo_options.h): the values, the ops they apply
// to, the CPU refused with auto's reason, and what reaches the session. Host-only; the GPU side is
// tests/apps/gemm_algo_gpu_test.cpp.
#include <doctest/doctest.h>

#include <string>

#include "apps/strata/gemm_algo_options.h"
#include "lib/error.h"

using namespace strata;
using strata::app::GemmAlgoOptions;

namespace {

std::string refusal(const std::string& op, const GemmAlgoOptions& options) {
  try {
    app::check_gemm_algo_options(op, options);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

GemmAlgoOptions with(std::optional<int64_t> algos, std::optional<int64_t> algo, bool time) {
  GemmAlgoOptions o;
  o.algos = algos;
  o.algo = algo;
  o.time = time;
  return o;
}

}  // namespace

TEST_CASE("check_gemm_algo_options: the ranges, --time's partner and the ops") {
  CHECK(refusal("matmul", with({}, {}, false)).empty());
  CHECK(refusal("relu", with({}, {}, false)).empty());  // nothing asked: nothing to refuse
  CHECK(refusal("matmul", with(8, {}, true)).empty());
  CHECK(refusal("linear", with(1, 0, false)).empty());
  CHECK(refusal("matmul", with(64, 63, true)).empty());
  CHECK(refusal("matmul", with(0, {}, false)) == "--algos 0: N is how many of cuBLASLt's candidates to list, 1 to 64");
  CHECK(refusal("matmul", with(65, {}, false)).find("--algos 65:") == 0);
  CHECK(refusal("matmul", with({}, -1, false)) ==
        "--algo -1: K is a candidate's index in the heuristic's list, 0 to 63 (--algos N lists them)");
  CHECK(refusal("matmul", with({}, 64, false)).find("--algo 64:") == 0);
  CHECK(refusal("matmul", with({}, 3, true)).find("--time measures each candidate --algos lists") == 0);
  CHECK(refusal("conv", with(4, {}, false)) ==
        "--algos chooses among cuBLASLt's kernels for matmul and linear; conv calls no cuBLASLt GEMM of its own");
  CHECK(refusal("mlp", with(4, 2, false)).find("--algo chooses") == 0);  // --algo named when given
}

TEST_CASE("refuse_gemm_algo_on_cpu: the CPU with auto's reason, a GPU or nothing asked passes") {
  measure::DeviceChoice cpu{Device{DeviceType::kCPU, 0}, "auto: no CUDA driver"};
  measure::DeviceChoice gpu{Device{DeviceType::kCUDA, 0}, ""};
  CHECK_NOTHROW(app::refuse_gemm_algo_on_cpu(with({}, {}, false), cpu));
  CHECK_NOTHROW(app::refuse_gemm_algo_on_cpu(with(8, 2, true), gpu));
  try {
    app::refuse_gemm_algo_on_cpu(with(8, {}, false), cpu);
    FAIL("no refusal");
  } catch (const UsageError& e) {
    const std::string what = e.what();
    CHECK(what.find("--algos chooses among cuBLASLt's kernels and needs a CUDA device") == 0);
    CHECK(what.find("(auto: no CUDA driver)") != std::string::npos);
    CHECK(e.code() == ExitCode::kUsage);
  }
}

TEST_CASE("set_session_gemm_algo: what the CUDA module's session is given") {
  measure::SessionOptions session;
  app::set_session_gemm_algo(with({}, {}, false), session);
  CHECK(session.gemm_algos == 0);
  CHECK(session.gemm_algo == -1);
  CHECK(!session.gemm_algo_time);
  app::set_session_gemm_algo(with(8, 3, true), session);
  CHECK(session.gemm_algos == 8);
  CHECK(session.gemm_algo == 3);
  CHECK(session.gemm_algo_time);
}
