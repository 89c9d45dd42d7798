// End-to-end: what `strata` prints and writes when things go right.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "reports/formats/chrome_trace.h"
#include "reports/checker/chrome_trace_check.h"
#include "layers/ops/operators.h"
#include "reports/model/units.h"
#include "tests/apps/e2e.h"

using namespace strata::test;

namespace {

// docs/design.md: every Chrome trace the tests write must satisfy the invariants.
void check_trace_file(const std::string& path) {
  const std::string text = read_file(path);
  const auto errors = strata::reports::check_chrome_trace(text);
  std::string all;
  for (const auto& e : errors) all += e + "\n";
  INFO(all);
  CHECK(errors.empty());
}

}  // namespace

TEST_CASE("trace matmul 64: the table has the binding, dispatch, library and wall rows") {
  const Reported r = run_reported(cpu({"trace", "matmul", "64"}));
  check_no_crash(r.run);
  INFO(r.run.out << r.run.err);
  REQUIRE(r.run.exit_code == 0);
  CHECK(r.run.err.empty());
  const auto& doc = r.doc;
  CHECK(doc["op"] == "matmul");
  CHECK(doc["description"] == "[64x64] @ [64x64]");
  CHECK(doc["dtype"] == "f32");
  CHECK(doc["device"].get<std::string>().rfind("cpu", 0) == 0);
  CHECK(doc["dispatch_keys"] == "CPU");
  // The header names what the report names.
  CHECK(r.run.out.rfind("matmul  [64x64] @ [64x64]  f32  " + doc["device"].get<std::string>() + "   keys: CPU\n", 0) == 0);
  check_trace_table(r.run.out, doc);
  CHECK(report_row(doc, "binding")["what"] == "schema " + doc["schema"].get<std::string>().substr(0, doc["schema"].get<std::string>().find(" ->")));
  CHECK(report_row(doc, "dispatch", "CPU")["applicable"] == true);
  CHECK(report_row(doc, "library")["names"] == nlohmann::json::array({"cblas_sgemm"}));
  CHECK(contains(report_row(doc, "library")["what"].get<std::string>(), "64x64x64"));
  // 2 * 64^3 FLOPs per call, and the wall line prints the achieved rate.
  CHECK(doc["flops_per_call"] == 2.0 * 64 * 64 * 64);
  CHECK(doc["achieved_flops_per_s"].get<double>() > 0);
  CHECK(contains(table_line(r.run.out, "wall"), strata::reports::format_rate(doc["achieved_flops_per_s"].get<double>())));
  // The GPU rows do not apply on the CPU: no figure (check_trace_table: a reason in its place), not zeros.
  for (const char* layer : {"launch", "queue", "gpu"}) {
    CAPTURE(std::string(layer));
    REQUIRE(!report_row(doc, layer).is_null());
    CHECK(report_row(doc, layer)["applicable"] == false);
  }
  CHECK(doc["repeat"] == 3);
  CHECK(doc["warmup"] == 0);
  CHECK(doc["steady"]["calls"] == 3);
}

TEST_CASE("--requires-grad adds the Autograd row before the CPU row") {
  const Reported r = run_reported(cpu({"trace", "linear", "4x16x8", "--requires-grad"}));
  check_no_crash(r.run);
  INFO(r.run.out << r.run.err);
  REQUIRE(r.run.exit_code == 0);
  CHECK(r.doc["dispatch_keys"] == "Autograd > CPU");
  check_trace_table(r.run.out, r.doc);
  std::vector<std::string> dispatch_keys;
  for (const auto& row : r.doc["steady"]["rows"])
    if (row["layer"] == "dispatch") dispatch_keys.push_back(row["key"]);
  CHECK(dispatch_keys == std::vector<std::string>{"Autograd", "CPU"});
  // What the Autograd kernel did: it recorded linear's backward node.
  CHECK(contains(report_row(r.doc, "dispatch", "Autograd")["what"].get<std::string>(), "AddmmBackward"));
}

TEST_CASE("--autocast bf16 --requires-grad: keys Autocast > Autograd > CPU, the casts' own rows, checked at bf16") {
  for (const char* to : {"bf16", "f16"}) {
    CAPTURE(std::string(to));
    const Reported r =
        run_reported(cpu({"trace", "matmul", "32x48x16", "--autocast", to, "--requires-grad", "--check"}));
    check_no_crash(r.run);
    INFO(r.run.out << r.run.err);
    REQUIRE(r.run.exit_code == 0);
    const auto& doc = r.doc;
    CHECK(doc["dtype"] == std::string("autocast f32->") + to);
    CHECK(doc["description"] == "[32x48] @ [48x16]");
    CHECK(doc["dispatch_keys"] == "Autocast > Autograd > CPU");
    check_trace_table(r.run.out, doc);
    // In the order the keys ran: Autocast, the casts (their Autograd, their CPU kernel), then the op's own.
    std::vector<std::string> dispatch;
    for (const auto& row : doc["steady"]["rows"])
      if (row["layer"] == "dispatch") dispatch.push_back(row["key"].get<std::string>());
    CHECK(dispatch == std::vector<std::string>{"Autocast", "to_copy:Autograd", "to_copy:CPU", "Autograd", "CPU"});
    CHECK(contains(report_row(doc, "dispatch", "Autograd")["what"].get<std::string>(), "MmBackward"));
    const auto library = report_row(doc, "library")["names"].get<std::vector<std::string>>();
    CHECK(std::count(library.begin(), library.end(), std::string("to_copy f32->") + to + " (cpu loop)") == 1);
    CHECK(doc["check"]["tolerance"] == (std::string(to) == "bf16" ? 0.03 : 0.005));
    CHECK(doc["check"]["passed"] == true);
  }
  // An op without an autocast policy: the key falls through, computes in f32, and the report says why.
  const Reported r = run_reported(cpu({"trace", "relu", "1000", "--autocast", "bf16", "--check"}));
  check_no_crash(r.run);
  INFO(r.run.out << r.run.err);
  REQUIRE(r.run.exit_code == 0);
  CHECK(r.doc["dtype"] == "f32");
  CHECK(r.doc["dispatch_keys"] == "Autocast (fallthrough) > CPU");
  // The note is the explanation a user reads: its wording is the point. The table prints it.
  std::string fallthrough;
  for (const auto& note : r.doc["notes"])
    if (contains(note.get<std::string>(), "relu has no autocast policy, so the Autocast key falls through"))
      fallthrough = note.get<std::string>();
  CHECK_FALSE(fallthrough.empty());
  CHECK(contains(r.run.out, "note: " + fallthrough + "\n"));
  CHECK(r.doc["check"]["tolerance"] == 1e-5);
  CHECK(r.doc["check"]["passed"] == true);
}

TEST_CASE("--dtype bf16 and f16 on the CPU: widened to f32, labelled so, checked at their tolerance") {
  for (const char* dtype : {"bf16", "f16"}) {
    CAPTURE(std::string(dtype));
    const Reported r = run_reported(cpu({"trace", "matmul", "40", "--dtype", dtype, "--check"}));
    check_no_crash(r.run);
    INFO(r.run.out << r.run.err);
    REQUIRE(r.run.exit_code == 0);
    check_trace_table(r.run.out, r.doc);
    const auto library = report_row(r.doc, "library")["names"].get<std::vector<std::string>>();
    CHECK(std::count(library.begin(), library.end(), std::string("cblas_sgemm (") + dtype + " widened to f32)") == 1);
    CHECK(r.doc["check"]["passed"] == true);
  }
}

// Note [Peak bytes of a call]: the figure the memory check compared with what is free counts autocast's
// casts beside the f32 inputs and the f32 copies half types are widened to on the CPU (they were left
// out, so a run could pass the check and be killed by the OOM killer). Exact byte counts for matmul 64
// (three 64x64 tensors) and for mlp 2x3x4x5 (73 values, its largest step's temporaries on top).
TEST_CASE("the memory check counts autocast's casts and the widened copies, in trace and compare") {
  TempDir dir;
  const std::string json = dir.file("r.json");
  auto checked = [&](std::vector<std::string> args) {
    args.push_back("--json");
    args.push_back(json);
    const RunResult r = run_strata(cpu(std::move(args)));
    check_no_crash(r);
    INFO("stderr:\n" << r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(read_file(json))["figures"]["memory.checked_peak_bytes"]["value"].get<double>();
  };
  const double tensor_f32 = 64 * 64 * 4, tensor_bf16 = 64 * 64 * 2;
  CHECK(checked({"trace", "matmul", "64"}) == 3 * tensor_f32);
  // bf16 tensors, and the f32 copies the kernel computes on.
  CHECK(checked({"trace", "matmul", "64", "--dtype", "bf16"}) == 3 * tensor_bf16 + 3 * tensor_f32);
  // The f32 inputs, their bf16 casts and output, and the f32 copies of those.
  CHECK(checked({"trace", "matmul", "64", "--autocast", "bf16"}) == 2 * tensor_f32 + 3 * tensor_bf16 + 3 * tensor_f32);
  CHECK(checked({"compare", "matmul", "64", "--autocast", "bf16"}) == 2 * tensor_f32 + 3 * tensor_bf16 + 3 * tensor_f32);
  CHECK(checked({"trace", "mlp", "2x3x4x5"}) == 73 * 4);
  // 73 bf16 values, and the second linear's f32 x, weight, bias and output: (8 + 20 + 5 + 10) x 4.
  CHECK(checked({"trace", "mlp", "2x3x4x5", "--dtype", "bf16"}) == 73 * 2 + 43 * 4);
}

TEST_CASE("--json writes every figure, parseable, and nothing else into the directory") {
  TempDir dir;
  const std::string path = dir.file("report.json");
  const RunResult r = run_strata(cpu({"trace", "matmul", "32x16x8", "--json", path, "--requires-grad"}));
  check_no_crash(r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "wrote " + path));
  CHECK(dir.entries() == std::vector<std::string>{"report.json"});
  const auto doc = nlohmann::json::parse(read_file(path));
  CHECK(doc["op"] == "matmul");
  CHECK(doc["spec"] == "matmul 32x16x8");
  CHECK(doc["dispatch_keys"] == "Autograd > CPU");
  CHECK(doc["repeat"] == 3);
  CHECK(doc["warmup"] == 0);
  CHECK(doc["flops_per_call"] == 2.0 * 32 * 16 * 8);
  CHECK(doc["steady"]["calls"] == 3);
  CHECK(doc["cold"]["calls"] == 1);
  std::vector<std::string> layers;
  for (const auto& row : doc["steady"]["rows"]) {
    layers.push_back(row["layer"].get<std::string>() +
                     (row.contains("key") ? "/" + row["key"].get<std::string>() : ""));
    if (row["applicable"] == true) {
      CHECK(row["time"]["samples"].size() == 3);
      CHECK(row["time"]["median"].get<double>() >= 0);
    }
  }
  CHECK(layers == std::vector<std::string>{"binding", "dispatch/Autograd", "dispatch/CPU", "library",
                                           "launch", "queue", "gpu"});
  CHECK(doc["steady"]["wall"]["samples"].size() == 3);
  CHECK(doc["steady"]["wall"]["median"].get<double>() > 0);
  CHECK(doc["environment"]["blas_threads"].get<int>() >= 1);
  // The figures beside the old fields: the same rate, by name, with its unit.
  CHECK(doc["figures"]["achieved_flops_per_s"]["unit"] == "FLOP/s");
  CHECK(doc["figures"]["achieved_flops_per_s"]["value"] == doc["achieved_flops_per_s"]);
  CHECK(doc["figures"]["steady.unmatched_launches"]["value"] == 0);
}

TEST_CASE("--chrome-trace writes a trace that satisfies every invariant, with --json beside it") {
  TempDir dir;
  const std::string trace = dir.file("trace.json"), report = dir.file("report.json");
  const RunResult r = run_strata(cpu({"trace", "conv", "1x3x8x8", "--out-channels", "4", "--pad", "1",
                                      "--chrome-trace", trace, "--json", report, "--requires-grad"}));
  check_no_crash(r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(dir.entries() == std::vector<std::string>{"report.json", "trace.json"});
  check_trace_file(trace);
  const auto doc = nlohmann::json::parse(read_file(trace));
  int binding = 0, dispatch = 0, library = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    binding += e["cat"] == "binding";
    dispatch += e["cat"] == "dispatch";
    library += e["cat"] == "library";
  }
  CHECK(binding == 4);   // the cold call and three timed calls
  CHECK(dispatch == 8);  // Autograd and CPU in each
  CHECK(library >= 4);
}

TEST_CASE("every op passes --check against the float64 reference, in every dtype") {
  const std::vector<std::vector<std::string>> ops = {
      {"matmul", "33x17x9"},
      {"linear", "5x16x7"},
      {"conv", "2x3x9x7", "--out-channels", "4", "--kernel", "3", "--stride", "2", "--pad", "1"},
      {"relu", "1000"},
      {"add", "10x100"},
      {"gelu", "1000"},
      {"to_copy", "1000"},
      // In place: checked on fresh inputs after the timed calls wrote self (div_'s self grew to inf and
      // failed; mul_'s shrank to zeros and passed whatever the kernel computed).
      {"div_", "1000"},
      {"div_.Scalar", "1000"},
      {"mul_", "1000"},
      {"sub_", "10x100", "--view", "self=t"},
      {"add_.Scalar", "1000"},
  };
  for (const auto& op : ops) {
    for (const char* dtype : {"f32", "f64", "bf16", "f16"}) {
      std::vector<std::string> args = {"trace"};
      args.insert(args.end(), op.begin(), op.end());
      args.push_back("--check");
      args.push_back("--dtype");
      args.push_back(dtype);
      const Reported r = run_reported(cpu(args));
      CAPTURE(op[0]);
      CAPTURE(std::string(dtype));
      check_no_crash(r.run);
      INFO(r.run.out << r.run.err);
      REQUIRE(r.run.exit_code == 0);  // a failed check exits 3
      REQUIRE(r.doc.contains("check"));
      CHECK(r.doc["check"]["passed"] == true);
      CHECK(r.doc["check"]["relative_error"].get<double>() <= r.doc["check"]["tolerance"].get<double>());
    }
  }
}

TEST_CASE("--json /dev/stdout appends the report after the table, /dev/null stays a device") {
  RunResult r = run_strata(cpu({"trace", "relu", "64", "--json", "/dev/stdout"}));
  check_no_crash(r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const size_t table = r.out.find("relu  [64]");
  const size_t json = r.out.find("\"op\": \"relu\"");
  CHECK(table == 0);
  CHECK(json != std::string::npos);
  r = run_strata(cpu({"trace", "relu", "64", "--chrome-trace", "/dev/null"}));
  check_no_crash(r);
  CHECK(r.exit_code == 0);
  struct stat st {};
  REQUIRE(stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("an existing output file is replaced, and a symlink to it is kept") {
  TempDir dir;
  const std::string real = dir.file("real.json");
  {
    const RunResult r = run_strata(cpu({"trace", "add", "8", "--json", real}));
    REQUIRE(r.exit_code == 0);
  }
  REQUIRE(symlink("real.json", dir.file("link.json").c_str()) == 0);
  const RunResult r = run_strata(cpu({"trace", "relu", "8", "--json", dir.file("link.json")}));
  check_no_crash(r);
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(read_file(real))["op"] == "relu");
  CHECK(dir.entries() == std::vector<std::string>{"link.json", "real.json"});
}

TEST_CASE("strata ops lists every operator, its schema, and the keys with kernels") {
  const RunResult r = run_strata({"ops"});
  check_no_crash(r);
  REQUIRE(r.exit_code == 0);
  for (const char* schema :
       {"matmul(Tensor self, Tensor other) -> Tensor",
        "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
        "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, int[2] dilation=1, "
        "int groups=1) -> Tensor",
        "relu(Tensor self) -> Tensor", "add(Tensor self, Tensor other, *, float alpha=1) -> Tensor",
        "gelu(Tensor self) -> Tensor", "to_copy(Tensor self, *, ScalarType? dtype=None) -> Tensor"}) {
    CHECK_MESSAGE(contains(r.out, std::string(schema) + "\n"), std::string(schema));
  }
  // The counts per key and the Autocast line, from the declarations (layers/ops/operators.h): a new
  // operator changes them without an edit here. The in-place ops record nothing under Autograd (their key
  // refuses when grad is needed); the views' CPU kernels are lib/views.cpp's (reshape's is in layers/ops).
  int records = 0, in_place = 0, cpu_loops = 0, views = 0, casts = 0, fallthrough = 0;
  std::string falls_through;
  strata::ops::AllOps::for_each([&](auto decl) {
    using Op = decltype(decl);
    (strata::ops::kInPlace<Op> ? in_place : records) += 1;
    if constexpr (strata::ops::kHasKernel<decltype(Op::kCpu)>) {
      const std::string_view where = Op::kCpu.where;
      cpu_loops += where.starts_with("layers/kernels/cpu/");
      views += where.starts_with("lib/views.cpp (view:");
    }
    if constexpr (strata::ops::kHasAutocastPolicy<Op>) {
      ++casts;
    } else {
      ++fallthrough;
      falls_through += (falls_through.empty() ? "" : ", ") + std::string(Op::kName);
    }
  });
  CHECK(records > 40);  // the forward ops, the gradient ops, the views, the reductions
  CHECK(count_of(r.out, "  Autograd  layers/dispatch/autograd.cpp") == records);
  CHECK(count_of(r.out, "  Autograd  layers/ops/register_kernels.cpp (in place") == in_place);
  CHECK(count_of(r.out, "  in place  writes self through its strides and bumps its version") == in_place);
  CHECK(in_place == 9);  // relu_, add_, mul_, mul_.Scalar, add_.Scalar, sub_, sub_.Scalar, div_, div_.Scalar
  CHECK(count_of(r.out, "  CPU       layers/kernels/cpu/") == cpu_loops);
  CHECK(contains(r.out, "relu_(Tensor(a!) self) -> Tensor(a!)\n"));
  CHECK(contains(r.out, "add_(Tensor(a!) self, Tensor other, *, float alpha=1) -> Tensor(a!)\n"));
  CHECK(count_of(r.out, "  CPU       lib/views.cpp (view:") == views);
  CHECK(views == 10);
  // Which ops Autocast handles, and how: a kernel for the GEMM-like ops, a fallthrough for the rest.
  CHECK(casts == 3);
  CHECK(count_of(r.out, "  Autocast  layers/dispatch/autocast.h (lower precision") == casts);
  CHECK(count_of(r.out, "  Autocast  fallthrough (no autocast policy") == fallthrough);
  CHECK(contains(r.out, "Autocast (--autocast bf16|f16) casts the inputs of: matmul, linear, conv2d; falls through "
                        "for: " + falls_through + "\n"));
  CHECK(falls_through.starts_with("relu, add, gelu, to_copy, "));
  CHECK(contains(r.out, "mul.Scalar(Tensor self, float other=1) -> Tensor\n"));
  CHECK(contains(r.out, "keys in priority order (highest first): Capture > Autocast > Autograd > CUDA > CPU"));
}

TEST_CASE("--help texts name the ops, the options and the exit codes") {
  RunResult r = run_strata({"--help"});
  check_no_crash(r);
  CHECK(r.exit_code == 0);
  for (const char* s : {"trace", "ops", "devices", "exit codes: 0 ok", "130 interrupted"})
    CHECK_MESSAGE(contains(r.out, s), std::string(s));
  r = run_strata({"trace", "--help"});
  check_no_crash(r);
  CHECK(r.exit_code == 0);
  for (const char* s : {"--device", "--dtype", "--repeat", "--warmup", "--requires-grad", "--backward", "--check", "--json",
                        "--chrome-trace", "--out-channels", "--kernel", "--stride", "--pad", "--autocast",
                        "matmul N | MxKxN", "linear BxINxOUT", "conv NxCxHxW"}) {
    CHECK_MESSAGE(contains(r.out, s), std::string(s));
  }
  // Every operator a spec can name, derived from the declarations (sweep --help listed five).
  for (const char* command : {"trace", "compare", "sweep"}) {
    r = run_strata({command, "--help"});
    CHECK(r.exit_code == 0);
    for (const char* op : {"matmul", "linear", "conv2d (conv)", "relu", "add", "gelu", "to_copy", "gemm"})
      CHECK_MESSAGE(contains(r.out, op), std::string(command) << ": " << std::string(op));
  }
  r = run_strata({"--version"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("strata ", 0) == 0);
}

TEST_CASE("strata devices answers on any machine") {
  const RunResult r = run_strata({"devices"});
  check_no_crash(r);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "cpu:"));
  CHECK(contains(r.out, "cuda"));
}

TEST_CASE("on a GPU, --chrome-trace with kernels and launch arrows also satisfies every invariant") {
  // Runs where a CUDA build finds a usable GPU; elsewhere it says why it did nothing.
  TempDir dir;
  const std::string trace = dir.file("gpu.json");
  const RunResult r =
      run_strata(fast({"trace", "matmul", "256", "--device", "cuda", "--chrome-trace", trace}));
  check_no_crash(r);
  if (r.exit_code == 4) {
    MESSAGE("skipped: no usable GPU (" << r.err << ")");
    return;
  }
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  check_trace_file(trace);
  // What HTA joins on (Note [Kineto trace layout]): the GPU in the header, one step per timed call, and
  // every kernel's correlation on a CUDA API call of the host thread.
  const auto doc = nlohmann::json::parse(read_file(trace));
  REQUIRE(doc.contains("deviceProperties"));
  CHECK(doc["deviceProperties"][0]["numSms"].get<int>() > 0);
  CHECK(doc["deviceProperties"][0]["totalGlobalMem"].get<uint64_t>() > 0);
  std::set<int64_t> api_correlations;
  std::vector<int64_t> kernel_correlations;
  int steps = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    steps += e["name"].get<std::string>().starts_with("ProfilerStep#");
    if (e["cat"] == "cuda_runtime" || e["cat"] == "cuda_driver") api_correlations.insert(e["args"]["correlation"].get<int64_t>());
    if (e["cat"] == "kernel") kernel_correlations.push_back(e["args"]["correlation"].get<int64_t>());
  }
  if (kernel_correlations.empty()) {
    MESSAGE("no kernels in the trace (GPU timing off?): " << r.out);
    return;
  }
  CHECK(steps >= 1);
  for (int64_t c : kernel_correlations) CHECK(api_correlations.count(c) == 1);
}

TEST_CASE("--view other=t: x @ w.t() is one GEMM with the op flag, no copy - --view self=slice2 copies first") {
  TempDir dir;
  const std::string json_path = dir.path() + "/r.json", trace_path = dir.path() + "/t.json";
  auto rows_of = [&] { return nlohmann::json::parse(read_file(json_path))["steady"]["rows"]; };
  auto has_row = [](const nlohmann::json& rows, const std::string& layer, const std::string& key) {
    for (const auto& row : rows)
      if (row["layer"] == layer && row.value("key", "") == key) return true;
    return false;
  };
  auto library_what = [](const nlohmann::json& rows) {
    for (const auto& row : rows)
      if (row["layer"] == "library") return row["what"].get<std::string>();
    return std::string();
  };
  RunResult r = run_strata(cpu({"trace", "matmul", "64", "--view", "other=t", "--check", "--json", json_path,
                                "--chrome-trace", trace_path}));
  check_no_crash(r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  nlohmann::json rows = rows_of();
  CHECK(has_row(rows, "dispatch", "CPU"));
  CHECK_FALSE(has_row(rows, "dispatch", "contiguous:CPU"));
  CHECK(contains(library_what(rows), "cblas_sgemm NT 64x64x64"));
  CHECK(contains(nlohmann::json::parse(read_file(json_path))["description"].get<std::string>(), "other: t view, strides 1x64"));
  check_trace_file(trace_path);
  CHECK(trace_event_counts(trace_path, "dispatch").count("contiguous:CPU") == 0);
  auto figure = [&](const std::string& name) {
    const nlohmann::json figures = nlohmann::json::parse(read_file(json_path))["figures"];
    return figures.contains(name) ? figures[name]["value"].get<double>() : -1.0;
  };
  CHECK(figure("steady.implicit_copies_per_call") == 0);  // the op flag: nothing copied
  CHECK(figure("steady.implicit_copy_median_ns") == -1);

  // Every second element of a wider buffer: relu needs contiguous memory, so the copy is its own call.
  r = run_strata(cpu({"trace", "relu", "64x64", "--view", "self=slice2", "--check", "--json", json_path,
                      "--chrome-trace", trace_path}));
  check_no_crash(r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  rows = rows_of();
  CHECK(has_row(rows, "dispatch", "contiguous:CPU"));
  CHECK(contains(library_what(rows), "strided copy (to contiguous)"));
  check_trace_file(trace_path);
  CHECK(trace_event_counts(trace_path, "dispatch")["contiguous:CPU"] == 4);  // the cold call and 3 timed ones
  // What the copy cost, apart from relu's own work: one copy per call, timed, and the note naming its bytes.
  CHECK(figure("steady.implicit_copies_per_call") == 1);
  CHECK(figure("steady.implicit_copy_median_ns") > 0);
  CHECK(contains(r.out, "implicit copy: relu copied 1 strided input to contiguous memory per call (self 16.00 KiB)"));
  // A view op traced alone: its library row is the header, and says no output is allocated.
  r = run_strata(cpu({"trace", "transpose", "64x32", "--check", "--json", json_path}));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(library_what(rows_of()) == "transpose (view: strides swapped, no data moved)");
  // A stepped GEMM operand is copied too (BLAS needs a unit stride along one dim).
  r = run_strata(cpu({"trace", "matmul", "32", "--view", "self=slice3", "--check", "--json", json_path}));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(has_row(rows_of(), "dispatch", "contiguous:CPU"));
  // Both operands strided: two copies per call, both named.
  r = run_strata(cpu({"trace", "matmul", "32", "--view", "self=slice2", "--view", "other=slice3", "--json", json_path}));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(figure("steady.implicit_copies_per_call") == 2);
  CHECK(contains(r.out, "copied 2 strided inputs to contiguous memory per call (self 4.00 KiB, other 4.00 KiB)"));
}

TEST_CASE("trace of a huge view runs: the memory check counts what is allocated, not the view's logical size") {
  // expand 300000x300000 is a [1x300000] input (1.2 MB) and a header of 360 TB; it was refused. What
  // materialises the view is still refused: --check's float64 reference, --backward's output gradient.
  for (const char* spec : {"300000x300000", "100000x100x100x100"}) {
    CAPTURE(std::string(spec));
    const RunResult r = run_strata(cpu({"trace", "expand", spec}));
    check_no_crash(r);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "expand"));
    check_refused(run_strata(cpu({"trace", "expand", spec, "--check"})), 2, "--check's float64 reference");
    check_refused(run_strata(cpu({"trace", "expand", spec, "--requires-grad", "--backward"})), 2, "with --backward");
  }
}
