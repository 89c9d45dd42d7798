// Sequences end to end on the CPU (docs/sequences.md): the harness runs every step under its own op id,
// a plan replay feeds each step's fresh output to the next, and `strata trace mlp` / `strata compare mlp`
// give the op log, the per-op rows, a passing --check, a JSON report and a Chrome trace that holds every
// op of every forward and passes the trace validator. Bad mlp specs are refused with exit 2.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

#include "layers/frontend/sequence.h"
#include "layers/kernels/reference/reference.h"
#include "measure/device_session.h"
#include "measure/harness.h"
#include "reports/formats/chrome_trace.h"
#include "reports/checker/chrome_trace_check.h"
#include "reports/model/units.h"
#include "tests/apps/e2e.h"

using namespace strata;

namespace {

// The op log printed under `header` has a line per step of the report's log, numbered, naming its op.
void check_op_log(const std::string& out, const std::string& header, const nlohmann::json& log) {
  INFO("stdout:\n" << out);
  const std::string last = std::to_string(log.size());
  const auto lines = test::lines_between(out, header, std::string(4 - last.size(), ' ') + last + "  ");
  REQUIRE(lines.size() == log.size());
  for (size_t k = 0; k < log.size(); ++k) {
    const std::string index = std::to_string(k + 1);
    CHECK(lines[k].rfind(std::string(4 - index.size(), ' ') + index + "  " + log[k]["op"].get<std::string>() + " ", 0) == 0);
  }
}

// The profile line of a sequence's table says the report's verdict and its reason.
void check_profile_line(const std::string& out, const std::string& label, const nlohmann::json& seq) {
  CHECK(test::contains(out, "\n" + label + " profile: " + seq["verdict"].get<std::string>() + ": " +
                                seq["verdict_reason"].get<std::string>() + "\n"));
}

}  // namespace

TEST_CASE("the harness runs a sequence as one call per step, each with its own op id, forward by forward") {
  const auto spec = frontend::parse_sequence_spec("mlp", "4x8x6x5x3");
  frontend::Sequence seq = frontend::prepare_sequence(spec, DType::kF32, kCPU, 3, true, SIZE_MAX);
  measure::DeviceSession cpu;
  measure::HarnessOptions h;
  h.warmup = 1;
  h.repeat = 4;
  h.first_op_id = 10;
  Timeline timeline;
  measure::HarnessResult r = measure::run_harness(seq, h, timeline, cpu);
  REQUIRE(r.steps == 5);
  CHECK(r.cold_ids == std::vector<uint32_t>{10, 11, 12, 13, 14});
  REQUIRE(r.timed_ids.size() == 20);
  for (size_t k = 0; k < r.timed_ids.size(); ++k) CHECK(r.timed_ids[k] == 15 + k);
  CHECK(r.untraced_ns.size() == 4);
  // Every op id has exactly one binding zone, named after the step's operator.
  std::map<uint32_t, std::vector<std::string>> bindings;
  for (const Span& s : timeline.spans())
    if (s.layer == Layer::kBinding) bindings[s.op_id].push_back(s.name);
  const char* expected[] = {"linear", "relu", "linear", "relu", "linear"};
  for (size_t k = 0; k < r.timed_ids.size(); ++k) {
    CAPTURE(k);
    REQUIRE(bindings[r.timed_ids[k]].size() == 1);
    CHECK(bindings[r.timed_ids[k]].front() == expected[k % 5]);
  }
  // The last forward's output is the model's output, with its backward node recorded.
  CHECK(r.last_result.tensor().grad_fn());
  CHECK(reference::relative_error(r.last_result.tensor(), frontend::reference_result(seq)) <=
        frontend::sequence_tolerance(spec, DType::kF32, false));
}

TEST_CASE("a plan replay of a sequence feeds each step's fresh output into the next step") {
  const auto spec = frontend::parse_sequence_spec("mlp", "3x7x5x4");
  frontend::Sequence seq = frontend::prepare_sequence(spec, DType::kF64, kCPU, 9, false, SIZE_MAX);
  measure::CaptureCost cost;
  measure::DeviceSession cpu;
  auto replay = measure::capture_plan(cpu, [&] { return seq.forward(); }, {1}, cost);
  replay->replay();
  CHECK(reference::relative_error(replay->last_result().tensor(), frontend::reference_result(seq)) <=
        frontend::sequence_tolerance(spec, DType::kF64, false));
  // New input values, in place: the replayed first Linear reads them, and only if its fresh output
  // reaches the ReLU and the second Linear does the model's output follow (a plan that replayed each
  // step on its capture-time arguments would return the old output).
  const std::vector<double> before = reference::to_double(replay->last_result().tensor());
  for (int64_t i = 0; i < seq.input.numel(); ++i) seq.input.data<double>()[i] = 0.9 - 0.1 * double(i % 17);
  replay->replay();
  CHECK(reference::relative_error(replay->last_result().tensor(), before) > 1e-3);
  CHECK(reference::relative_error(replay->last_result().tensor(), frontend::reference_result(seq)) <=
        frontend::sequence_tolerance(spec, DType::kF64, false));
}

TEST_CASE("strata trace mlp: op log, per-op rows, check, JSON with every step, a valid trace with every op") {
  test::TempDir dir;
  const std::string json = dir.file("m.json"), trace = dir.file("m.trace.json");
  auto r = test::run_strata(test::cpu({"trace", "mlp", "8x32x16x4", "--requires-grad", "--check", "--json", json,
                                       "--chrome-trace", trace}));
  test::check_no_crash(r);
  REQUIRE(r.exit_code == 0);
  auto doc = nlohmann::json::parse(test::read_file(json));
  // The table: the report's rows, then the op log, a line per step, and the forward's verdict.
  test::check_trace_table(r.out, doc);
  check_op_log(r.out, "op log (one forward", doc["sequence"]["op_log"]);
  check_profile_line(r.out, "forward", doc["sequence"]);
  CHECK(doc["op"] == "mlp");
  CHECK(doc["check"]["passed"] == true);
  const auto& seq = doc["sequence"];
  CHECK(seq["ops_per_forward"] == 3);
  CHECK(seq["forwards"] == 3);
  REQUIRE(seq["op_log"].size() == 3);
  CHECK(seq["op_log"][0]["op"] == "linear");
  CHECK(seq["op_log"][1]["op"] == "relu");
  CHECK(seq["op_log"][2]["op"] == "linear");
  CHECK(seq["op_log"][1]["dispatch_keys"] == "Autograd > CPU");
  CHECK(seq["steps"][2]["steady"]["calls"] == 3);
  CHECK((seq["verdict"] == "compute-bound" || seq["verdict"] == "overhead-bound"));
  CHECK(seq["compute"]["median"].get<double>() > 0);
  CHECK(seq["host_tax"]["median"].get<double>() > 0);
  // The trace: valid, and every op of every forward (3 timed + the cold one) is there as a binding zone.
  const std::string text = test::read_file(trace);
  CHECK(reports::check_chrome_trace(text).empty());
  auto events = nlohmann::json::parse(text)["traceEvents"];
  std::map<std::string, int> bindings;
  for (const auto& e : events)
    if (e.value("cat", "") == "binding" && e.value("ph", "") == "X") ++bindings[e.value("name", "")];
  CHECK(bindings["linear"] == 2 * 4);
  CHECK(bindings["relu"] == 1 * 4);
  auto check = test::run_strata({"check-trace", trace});
  CHECK(check.exit_code == 0);
}

TEST_CASE("strata compare mlp: whole forwards eager and plan-replayed, both checked") {
  test::TempDir dir;
  const std::string json = dir.file("c.json"), trace = dir.file("c.trace.json");
  auto r = test::run_strata({"compare", "mlp", "8x32x16x16x4", "--device", "cpu", "--repeat", "4", "--warmup", "1",
                             "--check", "--json", json, "--chrome-trace", trace});
  test::check_no_crash(r);
  REQUIRE(r.exit_code == 0);
  auto doc = nlohmann::json::parse(test::read_file(json));
  CHECK(doc["ops_per_replay"] == 5);
  CHECK(doc["replay"]["label"] == "plan replay");
  CHECK(doc["eager"]["rounds"] == 4);
  CHECK(test::contains(test::table_line(r.out, "wall"), reports::format_ns(doc["eager"]["wall"].get<double>())));
  CHECK(doc["check"]["passed"] == true);
  CHECK(doc["figures"]["check.replay_relative_error"]["value"].get<double>() <= doc["check"]["tolerance"].get<double>());
  CHECK(reports::check_chrome_trace(test::read_file(trace)).empty());
  // --ops-per-graph counts forwards for a sequence.
  r = test::run_strata({"compare", "mlp", "8x32x16x4", "--device", "cpu", "--repeat", "3", "--warmup", "0",
                        "--ops-per-graph", "2", "--json", json});
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(test::read_file(json))["ops_per_replay"] == 6);
}

namespace {

// The largest plan compare builds: 16 Linear layers (31 ops a forward) times K = 2048 forwards.
const char* const kDeepMlp = "1x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2x2";

}  // namespace

// Building the plan linked each argument to its producer by scanning every earlier step: quadratic, 24 s
// at this size (issue 30). The figure that matters is the step count; the time bound is generous (ASan,
// a loaded machine) and still 20x under what the quadratic build took.
TEST_CASE("strata compare mlp with a large K builds its plan in linear time") {
  test::TempDir dir;
  const std::string json = dir.file("c.json");
  auto r = test::run_strata({"compare", "mlp", kDeepMlp, "--device", "cpu", "--ops-per-graph", "2048", "--repeat",
                             "1", "--warmup", "0", "--json", json});
  test::check_no_crash(r);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(test::read_file(json));
  CHECK(doc["ops_per_replay"] == 2048 * 31);
  CHECK(doc["figures"]["plan_replay.recorded_calls"]["value"] == 2048 * 31);
  CHECK(doc["one_time_ns"]["instantiate"].get<double>() < 1e9);
}

// The first SIGINT is seen inside every long loop of compare (eager rounds, capture, plan building,
// replays), not only between rounds: it took effect 28 s late during plan building. Here one round is
// 4096 forwards of 31 ops, seconds long, and the signal lands in the first. No sleep decides anything:
// the child is signalled once it has used CPU time; the bound is on the time it then takes.
TEST_CASE("SIGINT during a compare of a large plan ends it promptly with exit 130") {
  test::TempDir dir;
  test::Subprocess p({"compare", "mlp", "8x256x256x256x256x256x256x256x256x256x256x256x256x256x256x256x256x256",
                      "--device", "cpu", "--ops-per-graph", "4096", "--repeat", "1", "--warmup", "0", "--json",
                      dir.file("c.json")});
  int64_t ticks = 0;
  while ((ticks = p.cpu_ticks()) >= 0 && ticks < 30) usleep(10000);
  REQUIRE_MESSAGE(ticks >= 0, "strata exited before it could be interrupted");
  const auto signalled = std::chrono::steady_clock::now();
  kill(p.pid(), SIGINT);
  const test::RunResult r = p.wait(120);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  test::check_no_crash(r);
  INFO("stderr:\n" << r.err);
  CHECK(r.exit_code == 130);
  CHECK(test::contains(r.err, "strata: error: interrupted"));
  CHECK(seconds < 4);
  CHECK(dir.entries().empty());
}

TEST_CASE("bad mlp input is refused with exit 2, one message, no output") {
  test::TempDir dir;
  test::check_refused(test::run_strata(test::cpu({"trace", "mlp", "16x256", "--json", dir.file("a.json")})), 2,
                      "at least 3 needed");
  test::check_refused(test::run_strata(test::cpu({"trace", "mlp", "16x0x10"})), 2, "contains 0");
  test::check_refused(test::run_strata(test::cpu({"trace", "mlp", "16x256x10", "--kernel", "3"})), 2,
                      "takes no conv options");
  test::check_refused(test::run_strata(test::cpu({"trace", "mlp", "1000000x1000000x1000000"})), 2,
                      "is available");
  test::check_refused(test::run_strata({"sweep", "mlp", "16:64"}), 2, "sequence of ops");
  test::check_refused(test::run_strata(test::cpu({"compare", "mlp", "4x4"})), 2, "at least 3 needed");
  CHECK(dir.entries().empty());
}

TEST_CASE("strata trace mlp --backward: backward op log, per-node rows, every parameter's gradient checked") {
  test::TempDir dir;
  const std::string json = dir.file("b.json"), trace = dir.file("b.trace.json");
  auto r = test::run_strata(test::cpu({"trace", "mlp", "8x32x16x4", "--requires-grad", "--backward", "--check",
                                       "--json", json, "--chrome-trace", trace}));
  test::check_no_crash(r);
  REQUIRE(r.exit_code == 0);
  auto doc = nlohmann::json::parse(test::read_file(json));
  check_op_log(r.out, "op log (one backward", doc["backward_sequence"]["op_log"]);
  check_profile_line(r.out, "backward", doc["backward_sequence"]);
  CHECK(doc["check"]["passed"] == true);
  const auto& b = doc["backward_sequence"];
  REQUIRE(b["op_log"].size() >= 4);
  CHECK(b["op_log"][0]["op"] == "sum (seed)");
  std::map<std::string, int> nodes;
  for (const auto& step : b["op_log"]) ++nodes[step["op"].get<std::string>()];
  CHECK(nodes["AddmmBackward"] == 2);
  CHECK(nodes["ReluBackward"] == 1);
  CHECK(nodes["AccumulateGrad"] == 4);  // two weights, two biases; the input is data
  CHECK(b["forwards"] == 3);
  // The gradient check covers every parameter.
  const auto& checks = doc["backward"]["gradient_checks"];
  REQUIRE(checks.size() == 4);
  for (const auto& c : checks) CHECK(c["passed"] == true);
  const char* const parameters[] = {"0.weight", "0.bias", "2.weight", "2.bias"};  // nn.Sequential's names
  for (size_t k = 0; k < 4; ++k) CHECK(checks[k]["argument"] == parameters[k]);
  const std::string text = test::read_file(trace);
  CHECK(reports::check_chrome_trace(text).empty());
  // Every backward node's gradient ops are in it (the nodes' own zones are the engine's, named "engine").
  std::map<std::string, int> library;
  const auto events = nlohmann::json::parse(text)["traceEvents"];
  for (const auto& e : events)
    if (e.value("cat", "") == "library" && e.value("ph", "") == "X") ++library[e.value("name", "")];
  int threshold_calls = 0;  // its zone ends with the loops and threads that ran (Note [Intra-op threads])
  for (const auto& [name, count] : library)
    if (name.rfind("threshold_backward (cpu loop, ", 0) == 0) threshold_calls += count;
  CHECK(threshold_calls == 4);  // ReluBackward, in the cold and 3 timed calls
  CHECK(library["bias_backward (cpu loop)"] == 2 * 4);   // each AddmmBackward
  // --backward needs something to differentiate.
  test::check_refused(test::run_strata(test::cpu({"trace", "mlp", "8x32x16x4", "--backward"})), 2,
                      "--backward needs --requires-grad");
}

TEST_CASE("strata trace mlp --autocast bf16: the linears compute in bf16, the leaves' gradients come back through casts") {
  const test::Reported r = test::run_reported(
      test::cpu({"trace", "mlp", "4x16x8x3", "--autocast", "bf16", "--requires-grad", "--backward", "--check"}));
  test::check_no_crash(r.run);
  INFO(r.run.out << r.run.err);
  REQUIRE(r.run.exit_code == 0);
  CHECK(r.doc["dtype"] == "autocast f32->bf16");
  // Each parameter is cast on its way in, so its gradient returns through ToCopyBackward before AccumulateGrad.
  CHECK(test::count_of(r.doc["backward"]["walk"].get<std::string>(), "ToCopyBackward > AccumulateGrad") == 4);
  // Computed in bf16: the forward's error is bf16-sized, not f32-sized, and within the bf16 tolerance.
  CHECK(r.doc["check"]["relative_error"].get<double>() > 1e-4);
  CHECK(r.doc["check"]["passed"] == true);
  for (const auto& c : r.doc["backward"]["gradient_checks"]) CHECK(c["passed"] == true);
}

TEST_CASE("mlp is a sequence from C++: --frontend python and --peer torch are refused with the reason") {
  test::check_refused(test::run_strata(test::cpu({"trace", "mlp", "4x16x3", "--frontend", "python"})), 2,
                "--frontend python drives one operator through Python; mlp is a sequence of operators");
  test::check_refused(test::run_strata(test::cpu({"trace", "mlp", "4x16x3", "--peer", "torch"})), 2,
                "--peer torch drives one operator through Python; mlp is a sequence of operators");
  // The ops it names are the sequence's own (each program's steps, each op once, in call order).
  const std::pair<const char*, const char*> named[] = {
      {"mlp", "trace one of its ops: linear, relu)"},
      {"relu_matmul", "trace one of its ops: matmul, relu)"},
      {"linear_gelu", "trace one of its ops: linear, gelu)"},
      {"gelu_tanh", "trace one of its ops: pow, mul.Scalar, add, tanh, add.Scalar, mul)"}};
  for (const auto& p : named) {
    INFO(p.first);
    test::check_refused(test::run_strata(test::cpu({"trace", p.first, "8x8x8", "--frontend", "python"})), 2,
                        p.second);
  }
}
