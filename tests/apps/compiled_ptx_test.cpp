// `strata trace PROGRAM --mode compiled --emit ptx [--arch A]` end to end: the compiled graph's kernels as
// CUDA C, NVRTC's PTX and ptxas's figures, on a machine with the toolkit and no GPU; what is refused with
// exit 2; and exit 4 in a build without the CUDA layers. Each test has a kernel cache of its own.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "tests/apps/e2e.h"

using namespace strata;
using nlohmann::json;

namespace {

test::RunOptions with_cache(const test::TempDir& dir) {
  test::RunOptions o;
  o.env.push_back("STRATA_CACHE_DIR=" + dir.file("kernels"));
  return o;
}

// Runs a trace with --json and returns the report, or null when the run did not exit 0.
json run_json(const test::TempDir& dir, std::vector<std::string> args, test::RunResult& r) {
  const std::string path = dir.file("report.json");
  args.insert(args.end(), {"--json", path});
  r = test::run_strata(args, with_cache(dir));
  test::check_no_crash(r);
  return r.exit_code == 0 ? json::parse(test::read_file(path)) : json();
}

}  // namespace

TEST_CASE("--emit ptx --arch sm_80: each generated kernel's CUDA C, PTX for sm_80, and ptxas's registers") {
  test::TempDir dir;
  test::RunResult r;
  const json j = run_json(
      dir,
      test::cpu({"trace", "linear_gelu", "4x8x16", "--mode", "compiled", "--emit", "ptx", "--arch", "sm_80"}),
      r);
  if (!STRATA_TEST_CUDA_BUILD) {
    CHECK(r.exit_code == 4);  // NVRTC is the toolkit's; this build has none
    return;
  }
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json& p = j["compiled"]["ptx"];
  CHECK(p["arch"] == "sm_80");
  CHECK(p["arch_note"] == "--arch");
  REQUIRE(p["kernels"].size() == 1);
  const json& k = p["kernels"][0];
  CHECK(k["name"] == "fused_linear_gelu");
  CHECK(k["dtype"] == "f32");
  CHECK(test::contains(k["cuda_source"].get<std::string>(), "__global__ void fused_linear_gelu("));
  CHECK(test::contains(k["ptx"].get<std::string>(), ".target sm_80"));
  CHECK(test::contains(k["ptx"].get<std::string>(), ".entry fused_linear_gelu("));
  REQUIRE(k["ptxas"]["ran"] == true);
  REQUIRE(k["ptxas"]["functions"].size() == 1);
  const json& f = k["ptxas"]["functions"][0];
  CHECK(f["function"] == "fused_linear_gelu");
  CHECK(f["arch"] == "sm_80");
  CHECK(f["registers"].get<int>() > 0);
  CHECK(f["spill_store_bytes"].get<int>() == 0);
  CHECK(test::contains(
      r.out, "ptxas fused_linear_gelu sm_80: " + std::to_string(f["registers"].get<int>()) + " registers"));
}

TEST_CASE("--emit ptx without --arch: the GPU's architecture, or sm_90 and why without a GPU") {
  if (!STRATA_TEST_CUDA_BUILD) return;  // the first test holds the build without the CUDA layers to exit 4
  test::TempDir dir;
  test::RunResult r;
  const json j = run_json(
      dir, test::cpu({"trace", "gelu_tanh", "256", "--mode", "compiled", "--emit", "ptx", "--dtype", "f64"}),
      r);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json& p = j["compiled"]["ptx"];
  const std::string arch = p["arch"].get<std::string>();
  // Either this machine's GPU was asked (and named), or the default with the reason there was none.
  if (p["arch_note"] != "this machine's GPU") {
    CHECK(arch == "sm_90");
    CHECK(test::contains(p["arch_note"].get<std::string>(), "the default"));
  }
  REQUIRE(p["kernels"].size() == 1);
  CHECK(p["kernels"][0]["dtype"] == "f64");
  CHECK(test::contains(p["kernels"][0]["ptx"].get<std::string>(), ".target " + arch));
  CHECK(p["kernels"][0]["ptxas"]["functions"][0]["registers"].get<int>() > 0);
}

TEST_CASE("--emit ptx a second time: every kernel from the PTX cache, the same PTX, and the listing says so") {
  if (!STRATA_TEST_CUDA_BUILD) return;  // the first test holds the build without the CUDA layers to exit 4
  test::TempDir dir;
  const std::vector<std::string> args =
      test::cpu({"trace", "relu_matmul", "16", "--mode", "compiled", "--emit", "ptx", "--arch", "sm_80"});
  test::RunResult cold_run, warm_run;
  const json cold = run_json(dir, args, cold_run);
  const json warm = run_json(dir, args, warm_run);
  INFO("stdout:\n" << warm_run.out << "\nstderr:\n" << warm_run.err);
  REQUIRE(cold_run.exit_code == 0);
  REQUIRE(warm_run.exit_code == 0);
  const json& c = cold["compiled"]["ptx"]["kernels"][0];
  const json& w = warm["compiled"]["ptx"]["kernels"][0];
  CHECK(c["cache"]["hit"] == false);
  CHECK(c["cache"]["nvrtc_ns"].get<double>() > 0);
  CHECK(w["cache"]["hit"] == true);
  CHECK(w["cache"]["nvrtc_ns"].get<double>() == 0);
  CHECK(w["cache"]["read_ns"].get<double>() > 0);
  CHECK(w["cache"]["key"] == c["cache"]["key"]);
  CHECK(w["ptx"] == c["ptx"]);
  CHECK(w["ptxas"]["functions"][0]["registers"] == c["ptxas"]["functions"][0]["registers"]);
  const std::string path = w["cache"]["path"].get<std::string>();
  CHECK(path == dir.file("kernels/" + w["cache"]["key"].get<std::string>() + ".ptx"));
  CHECK(test::contains(warm_run.out, "-- fused_matmul_relu.ptx (PTX cache hit: " + path + ")"));
  CHECK(test::contains(cold_run.out, "-- fused_matmul_relu.ptx (NVRTC, cached as " + path + ")"));
}

TEST_CASE("--emit ptx and --arch: what is refused, with exit 2 and what is allowed") {
  test::TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"trace", "relu_matmul", "16", "--mode", "compiled", "--emit", "ptx", "--arch", "sm_75"},
       "allowed: sm_80, sm_86, sm_89, sm_90, sm_100, sm_120"},
      {{"trace", "relu_matmul", "16", "--mode", "compiled", "--emit", "ptx", "--arch", "compute_90"},
       "allowed: sm_80"},
      {{"trace", "relu_matmul", "16", "--mode", "compiled", "--arch", "sm_90"}, "add --emit ptx"},
      {{"trace", "relu_matmul", "16", "--mode", "compiled", "--emit", "cpp", "--arch", "sm_90"},
       "add --emit ptx"},
      {{"trace", "relu_matmul", "16", "--emit", "ptx"}, "needs --mode compiled"},
      {{"trace", "relu_matmul", "16", "--mode", "graph", "--emit", "ptx"}, "needs --mode compiled"},
      {{"trace", "relu_matmul", "16", "--mode", "compiled", "--emit", "asm"}, "allowed: cpp, ptx, sass"},
      {{"trace", "relu_matmul", "16", "--emit", "sass", "--arch", "sm_80"}, "needs --mode compiled"},
      {{"trace", "relu_matmul", "16", "--mode", "compiled", "--emit", "sass", "--arch", "sm_75"},
       "allowed: sm_80"},
  };
  for (const auto& [args, message] : cases) {
    std::string line;
    for (const std::string& a : args) line += a + " ";
    CAPTURE(line);
    test::check_refused(test::run_strata(test::cpu(args), with_cache(dir)), 2, message);
  }
}

TEST_CASE("--emit ptx with a PTX module that cannot be loaded: exit 4 with dlopen's reason, no partial output") {
  if (!STRATA_TEST_CUDA_BUILD) return;  // no module to miss: the first test holds that build to exit 4
  test::TempDir dir;
  test::RunOptions o = with_cache(dir);
  o.env.push_back("STRATA_PTX_MODULE=" + dir.file("missing/libstrata_ptx.so"));
  const test::RunResult r =
      test::run_strata(test::cpu({"trace", "relu_matmul", "16", "--mode", "compiled", "--emit", "ptx"}), o);
  test::check_refused(r, 4, "the PTX module libstrata_ptx.so could not be loaded");
  CHECK(test::contains(r.err, "missing/libstrata_ptx.so"));
}

// --emit sass: the same kernels' cubins (ptxas) through cuobjdump or nvdisasm, found as
// compiler::find_cuda_tool finds them (the ctest environment's VIRTUAL_ENV is the project's venv, where
// scripts/install-python-deps puts NVIDIA's wheels).
TEST_CASE("--emit sass --arch sm_80: each generated kernel's SASS listing and instruction mix") {
  test::TempDir dir;
  test::RunResult r;
  const json j = run_json(
      dir,
      test::cpu({"trace", "linear_gelu", "4x8x16", "--mode", "compiled", "--emit", "sass", "--arch", "sm_80"}),
      r);
  if (!STRATA_TEST_CUDA_BUILD) {
    test::check_refused(r, 4, "--emit sass needs the CUDA toolkit's NVRTC");
    return;
  }
  if (r.exit_code == 4 && test::contains(r.err, "needs cuobjdump or nvdisasm")) {
    MESSAGE("skipped: no cuobjdump or nvdisasm (scripts/install-python-deps installs them): " << r.err);
    return;
  }
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  const json& p = j["compiled"]["ptx"];
  CHECK(p["arch"] == "sm_80");
  REQUIRE(p["kernels"].size() == 1);
  const json& s = p["kernels"][0]["sass"];
  REQUIRE(s.is_object());
  const std::string tool = s["tool"].get<std::string>();
  CHECK((test::contains(tool, "cuobjdump") || test::contains(tool, "nvdisasm")));
  REQUIRE(s["functions"].size() == 1);
  const json& f = s["functions"][0];
  CHECK(f["function"] == "fused_linear_gelu");
  CHECK(f["arch"] == "sm_80");
  CHECK(f["mix"]["ld.global"].get<int>() > 0);
  CHECK(f["mix"]["st.global"].get<int>() > 0);
  CHECK(f["mix"]["fp32"].get<int>() > 0);
  CHECK(test::contains(r.out, "generated SASS (--emit sass) for sm_80 (--arch)"));
  CHECK(test::contains(r.out, "-- fused_linear_gelu.sass (" + tool + ")"));
  CHECK(test::contains(r.out, "ptxas fused_linear_gelu sm_80: "));
  CHECK(test::contains(r.out, "sass fused_linear_gelu sm_80: " + std::to_string(f["instructions"].get<int>()) +
                                  " instructions: fp32 "));
  CHECK(!test::contains(r.out, "generated CUDA C and PTX"));  // that is --emit ptx
}

TEST_CASE("--emit sass without a disassembler: exit 4 with ptxas's figures and where to get one") {
  if (!STRATA_TEST_CUDA_BUILD) return;  // the test above holds that build to exit 4
  test::TempDir dir;
  test::RunOptions o = with_cache(dir);
  o.env.push_back("CUOBJDUMP=" + dir.file("none/cuobjdump"));
  o.env.push_back("NVDISASM=" + dir.file("none/nvdisasm"));
  const test::RunResult r = test::run_strata(
      test::cpu({"trace", "relu_matmul", "16", "--mode", "compiled", "--emit", "sass", "--arch", "sm_90"}), o);
  test::check_refused(r, 4, "the SASS listing needs cuobjdump or nvdisasm");
  CHECK(test::contains(r.err, "CUOBJDUMP is " + dir.file("none/cuobjdump")));
  CHECK(test::contains(r.err, "ptxas fused_matmul_relu sm_90: "));
  CHECK(test::contains(r.err, "registers"));
  CHECK(test::contains(r.err, "nvidia-cuda-cuobjdump"));
}

