// End-to-end: `strata trace ... --requires-grad --backward` (docs/autograd.md): every differentiable op's
// gradients pass --check, the report shows the walk and a breakdown per node, the JSON and the Chrome
// trace carry the backward, and --backward without --requires-grad is refused.
#include <doctest/doctest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "reports/formats/chrome_trace.h"
#include "reports/checker/chrome_trace_check.h"
#include "reports/model/units.h"
#include "tests/apps/e2e.h"

using namespace strata::test;

namespace {

void check_trace_file(const std::string& path) {
  const auto errors = strata::reports::check_chrome_trace(read_file(path));
  std::string all;
  for (const auto& e : errors) all += e + "\n";
  INFO(all);
  CHECK(errors.empty());
}

// The backward table printed what the report's "backward" holds: the walk, a block per node in the
// report's order (its first line names it), the total's median, and the gradients' verdict.
void check_backward_table(const std::string& out, const nlohmann::json& backward) {
  INFO("stdout:\n" << out);
  CHECK(contains(out, "the walk: " + backward["walk"].get<std::string>() + "\n"));
  const std::vector<std::string> lines = lines_between(out, "node  ", "backward total");
  REQUIRE(!lines.empty());
  size_t at = 0;
  for (const auto& node : backward["nodes"]) {
    const std::string name = node["node"].get<std::string>().substr(0, 21);
    while (at < lines.size() && lines[at].rfind(name + " ", 0) != 0) ++at;
    CHECK_MESSAGE(at < lines.size(), "no block for " << name);
  }
  CHECK(contains(lines.back(), strata::reports::format_ns(backward["wall"]["median"].get<double>())));
}

// Every gradient check of the report ran and passed (strata exits 3 when one fails).
void check_gradients_passed(const nlohmann::json& doc, size_t arguments) {
  REQUIRE(doc["backward"]["gradient_checks"].size() == arguments);
  for (const auto& c : doc["backward"]["gradient_checks"]) {
    CHECK(c["passed"] == true);
    CHECK(c["relative_error"].get<double>() <= c["tolerance"].get<double>());
  }
}

}  // namespace

TEST_CASE("every differentiable op: --backward --check passes in f32 and f64, with the walk in the table") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> ops = {
      {{"matmul", "33x17x9"}, "SumBackward > MmBackward > AccumulateGrad > AccumulateGrad"},
      {{"linear", "5x16x7"}, "SumBackward > AddmmBackward > AccumulateGrad > AccumulateGrad > AccumulateGrad"},
      {{"conv", "2x3x9x7", "--out-channels", "4", "--kernel", "3", "--stride", "2", "--pad", "1"},
       "SumBackward > ConvolutionBackward > AccumulateGrad > AccumulateGrad > AccumulateGrad"},
      {{"relu", "1000"}, "SumBackward > ReluBackward > AccumulateGrad"},
      {{"add", "10x100"}, "SumBackward > AddBackward > AccumulateGrad > AccumulateGrad"},
      {{"gelu", "300"}, "SumBackward > GeluBackward > AccumulateGrad"},
  };
  for (const auto& c : ops) {
    const auto& op = c.first;
    const auto& walk = c.second;
    for (const char* dtype : {"f32", "f64"}) {
      std::vector<std::string> args = {"trace"};
      args.insert(args.end(), op.begin(), op.end());
      for (const char* a : {"--requires-grad", "--backward", "--check", "--dtype"}) args.push_back(a);
      args.push_back(dtype);
      const Reported r = run_reported(cpu(args));
      CAPTURE(op[0]);
      CAPTURE(std::string(dtype));
      check_no_crash(r.run);
      INFO(r.run.out << r.run.err);
      REQUIRE(r.run.exit_code == 0);
      const auto& backward = r.doc["backward"];
      CHECK(backward["walk"] == walk);
      // One node per step of the walk, each with the engine's dispatch row.
      CHECK(backward["nodes"].size() == size_t(count_of(walk, " > ") + 1));
      for (const auto& node : backward["nodes"]) {
        bool engine = false;
        for (const auto& row : node["steady"]["rows"]) engine = engine || row.value("key", "") == "engine";
        CHECK_MESSAGE(engine, node["node"]);
      }
      CHECK(r.doc["check"]["passed"] == true);
      check_gradients_passed(r.doc, size_t(count_of(walk, "AccumulateGrad")));
      check_backward_table(r.run.out, backward);
    }
  }
}

TEST_CASE("--backward under --autocast and in bf16: the casts' ToCopyBackward in the walk, gradients at the half tolerance") {
  // Autocast casts the leaves, so each leaf's gradient comes back through ToCopyBackward, cast to f32; the
  // gradient ops run in the low-precision dtype (widened on the CPU) and are checked at its tolerance.
  for (const char* half : {"bf16", "f16"}) {
    CAPTURE(std::string(half));
    const Reported r = run_reported(cpu({"trace", "linear", "5x16x7", "--autocast", half, "--requires-grad",
                                         "--backward", "--check"}));
    check_no_crash(r.run);
    INFO(r.run.out << r.run.err);
    REQUIRE(r.run.exit_code == 0);
    CHECK(r.doc["dispatch_keys"] == "Autocast > Autograd > CPU");
    CHECK(r.doc["backward"]["walk"] == "SumBackward > AddmmBackward > ToCopyBackward > AccumulateGrad > ToCopyBackward > "
                                       "AccumulateGrad > ToCopyBackward > AccumulateGrad");
    check_backward_table(r.run.out, r.doc["backward"]);
    CHECK(r.doc["check"]["passed"] == true);
    check_gradients_passed(r.doc, 3);
    for (const auto& c : r.doc["backward"]["gradient_checks"])
      CHECK(c["tolerance"] == (half == std::string("bf16") ? 0.03 : 0.005));
  }
  // Half tensors from the start: every gradient op widens on the CPU.
  const Reported r = run_reported(cpu({"trace", "conv", "2x3x9x7", "--out-channels", "4", "--kernel", "3", "--pad",
                                       "1", "--dtype", "bf16", "--requires-grad", "--backward", "--check"}));
  check_no_crash(r.run);
  INFO(r.run.out << r.run.err);
  REQUIRE(r.run.exit_code == 0);
  CHECK(r.doc["check"]["passed"] == true);
  check_gradients_passed(r.doc, 3);
}

TEST_CASE("--backward without --requires-grad, or on a gradient op, is refused with the reason") {
  check_refused(run_strata(cpu({"trace", "linear", "4x8x2", "--backward"})), 2,
                "--backward needs --requires-grad");
  const RunResult r = run_strata(cpu({"trace", "gemm", "4x8x2", "--backward", "--requires-grad"}));
  check_refused(r, 2, "gemm is a gradient op with no derivative");
  // An in-place op is refused for what it is: its inputs are leaves that require grad.
  check_refused(run_strata(cpu({"trace", "mul_.Scalar", "16", "--backward", "--requires-grad"})), 2,
                "mul_.Scalar writes its input in place");
  // The ops it names are derived from the declarations (to_copy, which works, was left out of a
  // hand-written list): each of them runs --backward --check, with the size given here for those that
  // need one of their own.
  const std::string listed = r.err.substr(r.err.find("applies to ") + 11);
  const std::map<std::string, std::vector<std::string>> specs = {
      {"matmul", {"4x8x2"}}, {"linear", {"4x8x2"}}, {"conv2d", {"1x2x5x5"}}, {"relu", {"16"}},
      {"add", {"16"}},       {"gelu", {"16"}},      {"sum", {"16"}},         {"to_copy", {"16"}},
      {"mul", {"16"}},       {"mul.Scalar", {"16"}}, {"add.Scalar", {"16"}}, {"sub", {"16"}},
      {"sub.Scalar", {"16"}}, {"tanh", {"16"}},     {"pow", {"3x5"}},
      // The views (docs/views.md): their backward through transpose, permute, reshape, sum_to, slice_backward.
      {"transpose", {"4x8"}}, {"t", {"8"}},         {"permute", {"2x3x4"}},  {"view", {"2x3x4"}},
      {"reshape", {"2x3x4"}}, {"expand", {"3x4"}},  {"narrow", {"4x8"}},     {"select", {"4x8"}},
      {"slice", {"4x8"}},     {"unsqueeze", {"4x8"}}, {"squeeze", {"4x8"}},  {"contiguous", {"16"}},
      // The reductions over dims (Note [Reductions over dims]): reshape, expand, contiguous / mul.Scalar.
      {"sum.dim_IntList", {"3x5"}}, {"mean.dim", {"2x3x4"}}, {"mean", {"16"}},
      // True division: DivBackward through div, mul and mul.Scalar.
      {"div", {"16"}}, {"div.Scalar", {"16"}}};
  size_t named = 0;
  for (size_t at = 0; at < listed.size();) {
    const size_t end = std::min(listed.find(", ", at), listed.find('\n', at));
    const std::string op = listed.substr(at, end - at);
    CAPTURE(op);
    ++named;
    // An op not listed above runs on 16 elements, the size any pointwise op takes, so that a new one is
    // checked here without an edit (a refused size fails below, naming the op).
    const std::string size = specs.count(op) == 1 ? specs.at(op).front() : "16";
    const RunResult ok = run_strata(cpu({"trace", op, size, "--requires-grad", "--backward", "--check"}));
    check_no_crash(ok);
    INFO("stderr:\n" << ok.err);
    CHECK(ok.exit_code == 0);
    if (end == std::string::npos || listed[end] == '\n') break;
    at = end + 2;
  }
  CHECK(named >= 8);
  CHECK(contains(listed, "to_copy"));
}

TEST_CASE("--backward: the JSON has the walk and every node's rows, the Chrome trace holds every invariant") {
  TempDir dir;
  const std::string trace = dir.file("trace.json"), report = dir.file("report.json");
  const RunResult r = run_strata(cpu({"trace", "linear", "4x8x2", "--requires-grad", "--backward", "--check",
                                      "--json", report, "--chrome-trace", trace}));
  check_no_crash(r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  check_trace_file(trace);
  const auto doc = nlohmann::json::parse(read_file(report));
  REQUIRE(doc.contains("backward"));
  const auto& b = doc["backward"];
  CHECK(b["walk"] == "SumBackward > AddmmBackward > AccumulateGrad > AccumulateGrad > AccumulateGrad");
  REQUIRE(b["nodes"].size() == 5);
  CHECK(b["nodes"][1]["node"] == "AddmmBackward");
  CHECK(b["nodes"][1]["steady"]["calls"] == 3);
  bool engine_row = false;
  for (const auto& row : b["nodes"][1]["steady"]["rows"]) engine_row = engine_row || row.value("key", "") == "engine";
  CHECK(engine_row);
  CHECK(b["wall"]["count"] == 3);
  REQUIRE(b["gradient_checks"].size() == 3);
  for (const auto& c : b["gradient_checks"]) CHECK(c["passed"] == true);
  CHECK(b["gradient_checks"][1]["argument"] == "weight");
}
