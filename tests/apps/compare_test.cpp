// `strata compare` end to end on the CPU: plan replay computes what eager computes, both modes land in
// one valid Chrome trace and one JSON report, and bad --ops-per-graph values are refused.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "lib/machine.h"
#include "measure/device_session.h"
#include "reports/formats/chrome_trace.h"
#include "reports/checker/chrome_trace_check.h"
#include "reports/model/units.h"
#include "tests/apps/e2e.h"

using namespace strata;

TEST_CASE("plan replay runs the recorded kernels and computes the same results as eager") {
  for (const char* op : {"matmul", "linear", "conv", "relu", "add"}) {
    CAPTURE(std::string(op));
    std::string dims = std::string(op) == "conv" ? "2x3x9x9" : (std::string(op) == "linear" ? "5x7x3" : "33");
    auto spec = frontend::parse_op_spec(op, dims);
    auto call = frontend::prepare_call(spec, DType::kF64, kCPU, 7, false, SIZE_MAX);
    binding::IValue eager = call.op->call(call.args);
    measure::CaptureCost cost;
    measure::DeviceSession cpu;
    auto replay = measure::capture_plan(cpu, [&] { return call.op->call(call.args); }, {1, 2}, cost);
    CHECK(replay->kind() == "plan replay");
    replay->replay();
    const auto ref = frontend::reference_result(spec, call);
    CHECK(reference::relative_error(replay->last_result().tensor(), ref) <= reference::tolerance(DType::kF64));
    // Same kernels, same inputs: bit-identical to eager.
    CHECK(reference::relative_error(replay->last_result().tensor(), reference::to_double(eager.tensor())) == 0.0);
  }
}

TEST_CASE("plan replay of a view op runs each call on the op's own input, as eager does, not on the last view") {
  // A view's output starts where its input does; the plan linked each call's input to the previous
  // call's output by address, so K transposes replayed as a chain (relative error 1.26 against eager)
  // and K unsqueezes ran out of dims. Five view ops, K = 4, values and shapes against eager's.
  const std::pair<const char*, const char*> cases[] = {
      {"transpose", "8x6"}, {"t", "5x3"}, {"unsqueeze", "4x6"}, {"permute", "2x3x4"}, {"expand", "3x5"},
      {"select", "4x6"}, {"slice", "4x10"}, {"narrow", "3x9"}, {"view", "4x6x2"}, {"squeeze", "3x1x4"}};
  for (const auto& c : cases) {  // no structured binding: clang 14 cannot CAPTURE one
    const char* op = c.first;
    const char* dims = c.second;
    CAPTURE(std::string(op));
    auto spec = frontend::parse_op_spec(op, dims);
    auto call = frontend::prepare_call(spec, DType::kF64, kCPU, 11, false, SIZE_MAX);
    const Tensor eager = call.op->call(call.args).tensor();
    measure::CaptureCost cost;
    measure::DeviceSession cpu;
    auto replay = measure::capture_plan(cpu, [&] { return call.op->call(call.args); }, {1, 2, 3, 4}, cost);
    replay->replay();
    const Tensor replayed = replay->last_result().tensor();
    CHECK(replayed.sizes() == eager.sizes());
    CHECK(replayed.strides() == eager.strides());
    CHECK(reference::to_double(replayed) == reference::to_double(eager));
  }
  // Through the program: --check of both columns passes.
  for (const char* op : {"transpose", "unsqueeze", "expand"}) {
    CAPTURE(std::string(op));
    const test::RunResult r = test::run_strata(test::cpu({"compare", op, "8x6", "--check", "--ops-per-graph", "5"}));
    test::check_no_crash(r);
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("a plan records only backend kernels: Autograd runs at capture, not at replay") {
  auto spec = frontend::parse_op_spec("matmul", "8");
  auto call = frontend::prepare_call(spec, DType::kF32, kCPU, 1, /*requires_grad=*/true, SIZE_MAX);
  measure::CaptureCost cost;
  measure::DeviceSession cpu;
  auto replay = measure::capture_plan(cpu, [&] { return call.op->call(call.args); }, {1}, cost);
  replay->replay();
  // The replayed output comes straight from the CPU kernel: no backward node was recorded for it.
  CHECK_FALSE(replay->last_result().tensor().grad_fn());
}

TEST_CASE("strata compare on the CPU: table, verdict, JSON and one Chrome trace with both modes") {
  test::TempDir dir;
  const std::string json = dir.file("c.json"), trace = dir.file("c.trace.json");
  // On the CPU whatever the machine has (with a GPU, --device auto would pick it).
  auto r = test::run_strata({"compare", "matmul", "32", "--ops-per-graph", "4", "--repeat", "5", "--warmup", "1",
                             "--check", "--device", "cpu", "--json", json, "--chrome-trace", trace});
  REQUIRE(r.exit_code == 0);
  // Never called a graph on the CPU: the only mention is the note saying it is not one.
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = r.out.find(what); at != std::string::npos; at = r.out.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count("CUDA Graph") == count("not a CUDA Graph"));
  CHECK(count("not a CUDA Graph") == 1);
  auto doc = nlohmann::json::parse(test::read_file(json));
  CHECK(doc["ops_per_replay"] == 4);
  CHECK(doc["eager"]["rounds"] == 5);
  CHECK(doc["replay"]["label"] == "plan replay");
  CHECK(doc["eager"]["binding"].get<double>() > 0);
  CHECK(doc["replay"]["binding"].get<double>() == 0);
  CHECK(doc["check"]["passed"] == true);
  // The table prints the report's figures and verdict.
  CHECK(test::contains(test::table_line(r.out, "wall"), reports::format_ns(doc["eager"]["wall"].get<double>())));
  CHECK(test::contains(test::table_line(r.out, "wall"), reports::format_ns(doc["replay"]["wall"].get<double>())));
  CHECK(test::contains(test::table_line(r.out, "library"), reports::format_ns(doc["eager"]["library"].get<double>())));
  CHECK(test::contains(r.out, "\nverdict: " + doc["verdict"].get<std::string>() + "\n"));
  // One rule for the verdict: the library's share of the eager wall, at least half for compute-bound.
  const double share = doc["eager"]["library"].get<double>() / doc["eager"]["wall"].get<double>();
  CHECK(doc["compute_share"].get<double>() == doctest::Approx(share));
  CHECK(doc["bound"] == (share >= 0.5 ? "compute-bound" : "overhead-bound"));
  // The machine's load beside the figures, and the note exactly when it is above the CPU count.
  const double load = doc["figures"]["host.load_average_1min"]["value"].get<double>();
  CHECK(load >= 0);
  CHECK(test::contains(r.out, "other work shared the cores") == overloaded(load));
  const std::string text = test::read_file(trace);
  CHECK(reports::check_chrome_trace(text).empty());
  // One host process per mode, named after the report's labels.
  std::set<std::string> processes;
  const auto events = nlohmann::json::parse(text)["traceEvents"];
  for (const auto& e : events)
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") processes.insert(e["args"]["name"].get<std::string>());
  CHECK(processes.count("strata host (" + doc["eager"]["label"].get<std::string>() + ")") == 1);
  CHECK(processes.count("strata host (" + doc["replay"]["label"].get<std::string>() + ")") == 1);
}

// Neither mode runs a backward: accepting --backward printed forward figures and checked nothing.
namespace {
// The Chrome trace's complete events counted per (process name, category, name).
std::map<std::string, int> events_per_process(const std::string& path) {
  const auto events = nlohmann::json::parse(test::read_file(path))["traceEvents"];
  std::map<int64_t, std::string> process;
  for (const auto& e : events)
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") process[e["pid"].get<int64_t>()] = e["args"]["name"];
  std::map<std::string, int> counts;
  for (const auto& e : events)
    if (e.value("ph", "") == "X") ++counts[process[e["pid"].get<int64_t>()] + " / " + e.value("cat", "") + " / " + e.value("name", "")];
  return counts;
}
}  // namespace

TEST_CASE("strata compare --view: the view made once for both modes - the implicit copy is its own call in each") {
  test::TempDir dir;
  const std::string json = dir.file("c.json"), trace = dir.file("c.trace.json");
  // relu reads contiguous memory: every call copies the stepped view first, eager and replayed alike.
  auto r = test::run_strata({"compare", "relu", "64x64", "--view", "self=slice2", "--ops-per-graph", "2", "--repeat", "3",
                             "--warmup", "1", "--check", "--device", "cpu", "--json", json, "--chrome-trace", trace});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto doc = nlohmann::json::parse(test::read_file(json));
  CHECK(doc["check"]["passed"] == true);  // the replay computes relu of the view, not its copy
  CHECK(test::contains(doc["description"].get<std::string>(), "self: slice2 view, strides 128x2"));
  CHECK(reports::check_chrome_trace(test::read_file(trace)).empty());
  std::map<std::string, int> n = events_per_process(trace);
  for (const std::string mode : {"eager", "plan replay"}) {
    CAPTURE(mode);
    const std::string host = "strata host (" + mode + ") / ";
    // 3 timed rounds of 2 calls: one copy per relu, never two (a replay once ran the copy twice).
    // (relu's zone ends with the loops and threads that ran: Note [Intra-op threads].)
    int relu_calls = 0;
    for (const auto& [name, count] : n)
      if (name.rfind(host + "library / relu (cpu loop, ", 0) == 0) relu_calls += count;
    CHECK(relu_calls == 6);
    CHECK(n[host + "library / strided copy (to contiguous)"] == 6);
    // The copy is a call of its own in the replay too: the relu kernel makes it through the dispatcher.
    CHECK(n[host + "dispatch / contiguous:CPU"] == 6);
  }
  CHECK(n["strata host (plan replay) / dispatch / CPU"] == 0);  // the op itself is replayed without dispatch

  // A transposed GEMM operand is read through the op flag: no copy in either mode.
  r = test::run_strata({"compare", "matmul", "32", "--view", "other=t", "--ops-per-graph", "2", "--repeat", "3",
                        "--warmup", "1", "--check", "--device", "cpu", "--json", json, "--chrome-trace", trace});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  doc = nlohmann::json::parse(test::read_file(json));
  CHECK(doc["check"]["passed"] == true);
  CHECK(test::contains(doc["description"].get<std::string>(), "other: t view, strides 1x32"));
  n = events_per_process(trace);
  for (const std::string mode : {"eager", "plan replay"}) {
    CAPTURE(mode);
    const std::string host = "strata host (" + mode + ") / ";
    CHECK(n[host + "library / cblas_sgemm NT"] == 6);
    CHECK(n[host + "dispatch / contiguous:CPU"] == 0);
    CHECK(n[host + "library / strided copy (to contiguous)"] == 0);
  }
}

TEST_CASE("strata compare refuses --backward with exit 2 and the reason") {
  test::TempDir dir;
  auto r = test::run_strata({"compare", "matmul", "16", "--requires-grad", "--backward", "--check", "--json",
                             dir.file("x.json")});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("--backward applies to 'strata trace'") != std::string::npos);
  CHECK(dir.entries().empty());
}

// An in-place op's last result is self after every eager call and replay: nothing to check it against
// (add_ failed by 1/calls, div_ with inf, mul_ passed on zeros).
TEST_CASE("strata compare refuses --check of an in-place op with exit 2, naming trace --check") {
  for (const char* op : {"div_", "add_", "mul_.Scalar", "relu_"}) {
    CAPTURE(std::string(op));
    test::TempDir dir;
    auto r = test::run_strata({"compare", op, "16", "--check", "--device", "cpu", "--json", dir.file("x.json")});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find(std::string("--check with ") + op + ", which writes its input in place") != std::string::npos);
    CHECK(r.err.find(std::string("strata trace ") + op + " 16 --check") != std::string::npos);
    CHECK(dir.entries().empty());
  }
  auto timed = test::run_strata({"compare", "div_", "16", "--device", "cpu", "--repeat", "5", "--warmup", "1"});
  CHECK(timed.exit_code == 0);
}

// The trace buffer is sized from the rounds and what one round writes, and that size is checked like
// any other memory: 100000 rounds of 4096 calls asked for terabytes and ended in std::bad_alloc.
TEST_CASE("strata compare refuses rounds whose spans would not fit in memory, before timing any") {
  test::TempDir dir;
  auto r = test::run_strata({"compare", "relu", "16", "--device", "cpu", "--ops-per-graph", "4096", "--repeat",
                             "1000000", "--warmup", "0", "--json", dir.file("x.json")});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("--repeat 1000000 rounds of 4096 calls would record") != std::string::npos);
  CHECK(r.err.find("lower --repeat or --ops-per-graph") != std::string::npos);
  CHECK(dir.entries().empty());
}

TEST_CASE("strata compare refuses a bad --ops-per-graph with exit 2 and writes nothing") {
  test::TempDir dir;
  for (const char* k : {"0", "-1", "5000"}) {
    auto r = test::run_strata({"compare", "matmul", "16", "--ops-per-graph", k, "--json", dir.file("x.json")});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--ops-per-graph must be between 1 and 4096") != std::string::npos);
  }
  CHECK(dir.entries().empty());
}

// Capturing K calls keeps all K outputs alive on the CPU too (the plan links steps by address): 4096
// outputs of 64 MiB are refused up front, with exit 2, before any round runs and with nothing written.
TEST_CASE("strata compare counts every output the capture keeps alive, on the CPU too") {
  test::TempDir dir;
  auto r = test::run_strata({"compare", "matmul", "4096", "--ops-per-graph", "4096", "--device", "cpu", "--json",
                             dir.file("x.json")});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("--ops-per-graph 4096") != std::string::npos);
  CHECK(dir.entries().empty());
}
