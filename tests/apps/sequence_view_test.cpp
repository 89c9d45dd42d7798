// `--view` on a sequence (docs/views.md, "Sequences"): an mlp's input and parameters by their nn.Sequential
// names (Note [A sequence's tensor names] in layers/frontend/sequence.h). Which calls copy is asserted from
// the JSON's op log and rows and from the Chrome trace's events, never from prose: a transposed weight is
// read by the GEMM through its op flag (no copy), a stepped one is copied by contiguous() first, in trace,
// --mode graph, compare's eager and replayed rounds and --backward, each with --check passing. Bad names
// are refused with exit 2 and the names that exist.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "reports/checker/chrome_trace_check.h"
#include "tests/apps/e2e.h"

using namespace strata;

namespace {

// trace mlp with --check, a JSON report and a Chrome trace (the cold forward and 3 timed ones: test::cpu),
// and the views given; the run must pass.
struct MlpRun {
  nlohmann::json doc;
  std::map<std::string, int> dispatch, library;  // Chrome trace events per name, by category
};

MlpRun trace_mlp(std::vector<std::string> extra) {
  test::TempDir dir;
  const std::string json = dir.file("m.json"), trace = dir.file("m.trace.json");
  std::vector<std::string> args{"trace", "mlp", "8x32x16x4", "--check", "--json", json, "--chrome-trace", trace};
  args.insert(args.end(), extra.begin(), extra.end());
  const test::RunResult r = test::run_strata(test::cpu(args));
  test::check_no_crash(r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  MlpRun run{nlohmann::json::parse(test::read_file(json)), test::trace_event_counts(trace, "dispatch"),
             test::trace_event_counts(trace, "library")};
  CHECK(run.doc["check"]["passed"] == true);
  CHECK(reports::check_chrome_trace(test::read_file(trace)).empty());
  return run;
}

}  // namespace

TEST_CASE("trace mlp --view 0.weight=t: the GEMM reads the weight stored [in,out] with no copy (NN, not NT)") {
  const MlpRun run = trace_mlp({"--view", "0.weight=t"});
  const nlohmann::json& log = run.doc["sequence"]["op_log"];
  REQUIRE(log.size() == 3);
  // nn.Linear's weight is [out,in] and read as W.t() through the op flag; stored [in,out], the flag goes.
  CHECK(log[0]["backend"] == "cblas_sgemm NN");
  CHECK(log[0]["dispatch_keys"] == "CPU");
  CHECK(log[2]["backend"] == "cblas_sgemm");  // the second Linear's weight is the contiguous parameter
  CHECK(test::contains(run.doc["description"].get<std::string>(), "(0.weight: t view, strides 1x16)"));
  CHECK(test::report_row(run.doc, "dispatch", "contiguous:CPU").is_null());
  CHECK(run.dispatch.count("contiguous:CPU") == 0);
  CHECK(run.library.count("strided copy (to contiguous)") == 0);
  CHECK(run.library.at("cblas_sgemm NN") == 4);  // the cold forward and 3 timed ones

  // The model's input transposed: read through the flag as well (and the weight still as W.t()).
  const MlpRun input = trace_mlp({"--view", "input=t"});
  CHECK(input.doc["sequence"]["op_log"][0]["backend"] == "cblas_sgemm TT");
  CHECK(input.dispatch.count("contiguous:CPU") == 0);
}

TEST_CASE("trace mlp --view 2.weight=slice2: the stepped weight is copied by contiguous(), a call of its own") {
  const MlpRun run = trace_mlp({"--view", "2.weight=slice2"});
  const nlohmann::json& log = run.doc["sequence"]["op_log"];
  REQUIRE(log.size() == 3);
  CHECK(log[0]["dispatch_keys"] == "CPU");
  CHECK(log[2]["dispatch_keys"] == "CPU > contiguous:CPU");
  CHECK(log[2]["backend"] == "strided copy (to contiguous) > cblas_sgemm");
  const nlohmann::json row = test::report_row(run.doc, "dispatch", "contiguous:CPU");
  REQUIRE_FALSE(row.is_null());
  CHECK(row["what"] == "contiguous CPU: key set + lookup (copies of strided inputs)");
  CHECK(test::contains(run.doc["description"].get<std::string>(), "(2.weight: slice2 view, strides 32x2)"));
  CHECK(run.dispatch.at("contiguous:CPU") == 4);  // one copy per forward, cold and timed
  CHECK(run.library.at("strided copy (to contiguous)") == 4);

  // A stepped bias is copied too; with --backward, every parameter's gradient (the views' included) is checked.
  const MlpRun backward = trace_mlp({"--view", "0.weight=t", "--view", "2.bias=slice3", "--requires-grad", "--backward"});
  const nlohmann::json& checks = backward.doc["backward"]["gradient_checks"];
  REQUIRE(checks.size() == 4);
  const char* const names[] = {"0.weight", "0.bias", "2.weight", "2.bias"};
  for (size_t k = 0; k < 4; ++k) {
    CHECK(checks[k]["argument"] == names[k]);
    CHECK(checks[k]["passed"] == true);
  }
  CHECK(backward.doc["sequence"]["op_log"][0]["backend"] == "cblas_sgemm NN");
  CHECK(backward.doc["sequence"]["op_log"][2]["dispatch_keys"] == "Autograd > CPU > contiguous:CPU");
}

TEST_CASE("trace mlp --mode graph --view: the replay runs the recorded copy before the GEMM that reads it") {
  test::TempDir dir;
  const std::string json = dir.file("g.json");
  const test::RunResult r = test::run_strata(test::cpu({"trace", "mlp", "8x32x16x4", "--mode", "graph", "--view",
                                                        "2.weight=slice2", "--check", "--json", json}));
  test::check_no_crash(r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json doc = nlohmann::json::parse(test::read_file(json));
  CHECK(doc["check"]["passed"] == true);
  CHECK_FALSE(test::report_row(doc, "dispatch", "contiguous:CPU").is_null());
}

TEST_CASE("compare mlp --view: eager and plan replay read the same views - the copy is a call in both") {
  test::TempDir dir;
  const std::string json = dir.file("c.json"), trace = dir.file("c.trace.json");
  const test::RunResult r = test::run_strata(
      test::cpu({"compare", "mlp", "8x32x16x4", "--view", "0.weight=t", "--view", "2.weight=slice2", "--check",
                 "--json", json, "--chrome-trace", trace}));
  test::check_no_crash(r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json doc = nlohmann::json::parse(test::read_file(json));
  CHECK(doc["check"]["passed"] == true);  // the replay computes on the views, not on copies made at capture
  CHECK(test::contains(doc["description"].get<std::string>(), "(0.weight: t view, strides 1x16)"));
  // A compiled graph takes contiguous inputs: the column says so instead of failing its guards.
  CHECK(test::contains(doc["three_way"]["compiled_unavailable"].get<std::string>(),
                       "--view 0.weight=t: a compiled graph takes contiguous inputs only"));
  const std::string text = test::read_file(trace);
  CHECK(reports::check_chrome_trace(text).empty());
  std::map<int64_t, std::string> process;
  std::map<std::string, int> n;
  const nlohmann::json events = nlohmann::json::parse(text)["traceEvents"];
  for (const auto& e : events)
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") process[e["pid"]] = e["args"]["name"];
  for (const auto& e : events)
    if (e.value("ph", "") == "X") ++n[process[e["pid"].get<int64_t>()] + " / " + e.value("cat", "") + " / " + e.value("name", "")];
  for (const std::string mode : {"eager", "plan replay"}) {
    CAPTURE(mode);
    const std::string host = "strata host (" + mode + ") / ";
    CHECK(n[host + "library / cblas_sgemm NN"] == 3);  // one forward per round, 3 rounds: no copy of 0.weight
    CHECK(n[host + "dispatch / contiguous:CPU"] == 3);  // 2.weight's copy, once per forward
    CHECK(n[host + "library / strided copy (to contiguous)"] == 3);
  }
}

TEST_CASE("mlp --view with a wrong name, kind or combination: exit 2 naming what exists") {
  using test::check_refused;
  using test::cpu;
  using test::run_strata;
  const std::string names = "mlp 4x8x6x2's tensors: input, 0.weight, 0.bias, 2.weight, 2.bias";
  check_refused(run_strata(cpu({"trace", "mlp", "4x8x6x2", "--view", "fc1.weight=t"})), 2,
                "--view 'fc1.weight=t': expected NAME=KIND with NAME one of " + names);
  check_refused(run_strata(cpu({"compare", "mlp", "4x8x6x2", "--view", "weight=t"})), 2, "did you mean '0.weight'?");
  check_refused(run_strata(cpu({"trace", "mlp", "4x8x6x2", "--view", "2.wieght=slice2"})), 2,
                "did you mean '2.weight'?");
  const test::RunResult no_kind = run_strata(cpu({"trace", "mlp", "4x8x6x2", "--view", "0.weight"}));
  check_refused(no_kind, 2, "and KIND t or sliceN");
  CHECK_FALSE(test::contains(no_kind.err, "did you mean"));
  check_refused(run_strata(cpu({"trace", "mlp", "4x8x6x2", "--view", "0.bias=t"})), 2,
                "'0.bias' is [6]; a transposed view needs a 2-D argument");
  check_refused(run_strata(cpu({"trace", "mlp", "4x8x6x2", "--view", "0.weight=t", "--view", "0.weight=slice2"})), 2,
                "--view 0.weight is given twice (t and slice2)");
  check_refused(run_strata(cpu({"trace", "mlp", "4x8x6x2", "--view", "0.weight=t", "--mode", "compiled"})), 2,
                "--view with --mode compiled: a compiled graph takes contiguous inputs only");
  check_refused(run_strata(cpu({"trace", "relu_matmul", "8", "--view", "self=t"})), 2,
                "relu_matmul is a named program whose tensors have no such names");
  check_refused(run_strata(cpu({"trace", "mlp", "4x8x6x2", "--view", "0.weight=t", "--frontend", "python"})), 2,
                "--frontend python drives one operator through Python; mlp is a sequence of operators");
}
