// End-to-end: --frontend python (the op through `import strata` in the embedded interpreter), --peer torch
// and the Python lines of `strata devices` (Note [The Python module] in
// apps/python/python_module_abi.h).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "reports/formats/chrome_trace.h"
#include "reports/checker/chrome_trace_check.h"
#include "reports/model/units.h"
#include "tests/apps/e2e.h"

using namespace strata::test;

namespace {

bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

void check_trace_file(const std::string& path) {
  const auto errors = strata::reports::check_chrome_trace(read_file(path));
  std::string all;
  for (const auto& e : errors) all += e + "\n";
  INFO(all);
  CHECK(errors.empty());
}

// Why --peer torch cannot run here ("" when it can), from what `strata devices` found.
std::string torch_missing() {
  const RunResult r = run_strata({"devices"});
  if (contains(r.out, "--peer torch works")) return "";
  return "torch is not importable by the embedded python: " + r.out;
}

// torch's rows need torch 2.x (docs/torch-layers.md): without the peer environment (no VIRTUAL_ENV, so
// Debian's torch 1.13) a --peer torch run writes every figure, then exits 4 for the rows alone.
bool rows_refused_by_old_torch(const RunResult& r) {
  const char* venv = std::getenv("VIRTUAL_ENV");
  return (venv == nullptr || *venv == '\0') && r.exit_code == 4 && contains(r.err, "strata: --peer torch: torch's rows: ");
}

// A directory whose `torch` package fails to import, to put first on PYTHONPATH: the embedded
// interpreter reads PYTHONPATH as /usr/bin/python3 does.
void write_broken_torch(const std::string& dir) {
  REQUIRE(system(("mkdir -p " + dir + "/torch").c_str()) == 0);
  std::ofstream(dir + "/torch/__init__.py") << "raise ImportError('no torch in this test')\n";
}

// A stand-in `torch` that imports but refuses every op, as a real torch refuses a dtype it has no kernel
// for on a device: the path from torch's exception to strata's exit 4 (the real torch is tested above).
void write_refusing_torch(const std::string& dir) {
  REQUIRE(system(("mkdir -p " + dir + "/torch/nn").c_str()) == 0);
  std::ofstream(dir + "/torch/__init__.py")
      << "__version__ = '0.0-refusing'\n"
         "float32, float64, float16, bfloat16 = 'f32', 'f64', 'f16', 'bf16'\n"
         "class _T:\n"
         "    def to(self, *a): return self\n"
         "    def requires_grad_(self, v): return self\n"
         "def from_numpy(a): return _T()\n"
         "def matmul(*a, **k): raise RuntimeError(\"\\\"addmm_impl_cpu_\\\" not implemented for 'Float'\")\n"
         "relu = add = matmul\n"
         "def get_num_threads(): return 1\n"
         "class cuda:\n"
         "    is_available = staticmethod(lambda: False)\n"
         "class version:\n"
         "    cuda = None\n"
         "from . import nn\n";
  std::ofstream(dir + "/torch/nn/__init__.py") << "from . import functional\n";
  std::ofstream(dir + "/torch/nn/functional.py") << "from torch import matmul as linear, matmul as conv2d, matmul as gelu\n";
}

// A stand-in `torch` whose autocast changes nothing (an autocast that does not cast): strata must refuse
// to compare its time with a bf16 run. Its torch.compile returns the function: the wiring of compare
// --peer torch, without the minutes inductor takes to compile on this VM.
void write_float32_only_torch(const std::string& dir) {
  REQUIRE(system(("mkdir -p " + dir + "/torch/nn").c_str()) == 0);
  std::ofstream(dir + "/torch/__init__.py")
      << "import contextlib\n"
         "__version__ = '0.0-float32-only'\n"
         "float32, float64, float16, bfloat16 = 'f32', 'f64', 'f16', 'bf16'\n"
         "class _T:\n"
         "    dtype = 'torch.float32'\n"
         "    def to(self, *a): return self\n"
         "    def requires_grad_(self, v): return self\n"
         "def from_numpy(a): return _T()\n"
         "def matmul(*a, **k): return _T()\n"
         "relu = add = matmul\n"
         "def autocast(**k): return contextlib.nullcontext()\n"
         "def compile(f): return f\n"
         "def get_num_threads(): return 1\n"
         "class cuda:\n"
         "    is_available = staticmethod(lambda: False)\n"
         "class version:\n"
         "    cuda = None\n"
         "from . import nn\n";
  std::ofstream(dir + "/torch/nn/__init__.py") << "from . import functional\n";
  std::ofstream(dir + "/torch/nn/functional.py") << "from torch import matmul as linear, matmul as conv2d, matmul as gelu\n";
}

}  // namespace

#if STRATA_TEST_PYTHON_BUILD

TEST_CASE("trace --frontend python: python and pybind11 rows above binding, the same inputs as the CLI") {
  TempDir dir;
  const std::string json_path = dir.path() + "/r.json", trace_path = dir.path() + "/t.json";
  const RunResult r = run_strata(cpu({"trace", "matmul", "24x40x8", "--frontend", "python", "--check", "--json",
                                      json_path, "--chrome-trace", trace_path}));
  check_no_crash(r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(read_file(json_path));
  CHECK(doc["frontend"] == "python");
  CHECK(doc["frontend_call"].get<std::string>().rfind(
            std::string("strata.matmul(self, other) in the embedded ") + STRATA_TEST_PYTHON + " ", 0) == 0);
  CHECK(contains(r.out, "\nfrontend: python: " + doc["frontend_call"].get<std::string>() + "\n"));
  // python and pybind11 above binding, in the report and in the table (check_trace_table: same order).
  CHECK(doc["steady"]["rows"][0]["layer"] == "python");
  CHECK(doc["steady"]["rows"][1]["layer"] == "pybind11");
  CHECK(doc["steady"]["rows"][2]["layer"] == "binding");
  check_trace_table(r.out, doc);
  // The wall is timed from Python's entry, not from the binding.
  CHECK(contains(table_line(r.out, "wall"), "python entry -> return"));
  CHECK(doc["check"]["passed"] == true);
  CHECK(doc["steady"]["rows"][0]["time"]["count"] == 3);
  CHECK(doc["steady"]["rows"][0]["time"]["median"].get<double>() > 0);
  check_trace_file(trace_path);
  CHECK(trace_event_counts(trace_path, "python")["strata.matmul"] == 4);  // the cold call and 3 timed ones

  // The Python path is handed the CLI's own seeded tensors: the same kernel on the same inputs gives the
  // same error against the float64 reference, to the last digit.
  const std::string cli_json = dir.path() + "/cli.json";
  const RunResult c = run_strata(cpu({"trace", "matmul", "24x40x8", "--check", "--json", cli_json}));
  REQUIRE(c.exit_code == 0);
  const auto cli = nlohmann::json::parse(read_file(cli_json));
  CHECK(cli["frontend"] == "cli");
  CHECK(cli["check"]["relative_error"] == doc["check"]["relative_error"]);
}

TEST_CASE("--view with --frontend python: the same view of the same buffer made with the Python API, once") {
  TempDir dir;
  const std::string json_path = dir.path() + "/r.json", cli_json = dir.path() + "/cli.json";
  RunResult r = run_strata(cpu({"trace", "matmul", "24x40x8", "--view", "other=t", "--frontend", "python", "--check",
                                "--json", json_path}));
  check_no_crash(r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto doc = nlohmann::json::parse(read_file(json_path));
  CHECK(doc["frontend_call"].get<std::string>().rfind(
            "strata.matmul(self, other) with other = base.t() made once before the calls in the embedded ", 0) == 0);
  CHECK(report_row(doc, "dispatch", "contiguous:CPU").is_null());  // read through the op flag, as from C++
  CHECK(contains(report_row(doc, "library")["what"].get<std::string>(), "cblas_sgemm NT"));
  // The same buffer and the same kernel as the C++ frontend's view: the same error, to the last digit.
  const RunResult c = run_strata(cpu({"trace", "matmul", "24x40x8", "--view", "other=t", "--check", "--json", cli_json}));
  REQUIRE(c.exit_code == 0);
  CHECK(nlohmann::json::parse(read_file(cli_json))["check"]["relative_error"] == doc["check"]["relative_error"]);

  // A stepped view: relu copies it first, its own dispatch row under the python and pybind11 rows.
  r = run_strata(cpu({"trace", "relu", "32x16", "--view", "self=slice3", "--frontend", "python", "--check", "--json",
                      json_path}));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  doc = nlohmann::json::parse(read_file(json_path));
  CHECK(contains(doc["frontend_call"].get<std::string>(), "strata.relu(self) with self = base[..., ::3] made once"));
  CHECK_FALSE(report_row(doc, "dispatch", "contiguous:CPU").is_null());
  CHECK(doc["check"]["passed"] == true);

  // compare: the eager calls through Python on the view.
  r = run_strata(cpu({"compare", "relu", "32x16", "--view", "self=slice2", "--frontend", "python", "--check", "--json",
                      json_path}));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(read_file(json_path))["check"]["passed"] == true);

  // The peer's inputs are contiguous torch tensors: it would not read the view.
  r = run_strata(cpu({"trace", "matmul", "8", "--view", "other=t", "--peer", "torch"}));
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--view with --peer torch: the peer's inputs are contiguous copies of the values"));
}

TEST_CASE("--frontend python passes the CLI's arguments the way the schema says") {
  // The CLI gives add no alpha (the binding layer fills the default, from Python as from C++); conv2d's
  // stride, padding and dilation are int[2] tuples after an optional bias, then groups.
  // The call is the point here: frontend_call is the Python expression the frontend ran.
  const Reported add = run_reported(cpu({"trace", "add", "1000", "--frontend", "python", "--check"}));
  check_no_crash(add.run);
  REQUIRE(add.run.exit_code == 0);
  CHECK(add.doc["frontend_call"].get<std::string>().rfind("strata.add(self, other) in the embedded", 0) == 0);
  CHECK(add.doc["check"]["passed"] == true);
  const Reported conv = run_reported(cpu({"trace", "conv", "1x3x8x8", "--out-channels", "4", "--stride", "2", "--pad",
                                          "1", "--frontend", "python", "--check"}));
  check_no_crash(conv.run);
  REQUIRE(conv.run.exit_code == 0);
  CHECK(conv.doc["frontend_call"].get<std::string>().rfind(
            "strata.conv2d(input, weight, bias, (2, 2), (1, 1), (1, 1), 1) in the embedded", 0) == 0);
  CHECK(conv.doc["check"]["passed"] == true);
}

namespace {

// The operators `strata ops` lists, by name ("mul.Scalar"), and a spec each one's frontend takes.
std::vector<std::pair<std::string, std::string>> every_listed_op() {
  const RunResult r = run_strata({"ops"});
  REQUIRE(r.exit_code == 0);
  std::vector<std::pair<std::string, std::string>> ops;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const size_t paren = line.find('(');
    if (line.empty() || line[0] == ' ' || paren == std::string::npos || !contains(line, ") -> ")) continue;
    const std::string name = line.substr(0, paren);
    const std::string spec = name == "matmul" || name == "linear" || name == "gemm" ? "4x6x5"
                             : name.rfind("conv2d", 0) == 0                        ? "1x2x6x6"
                             : name == "squeeze"                                    ? "4x1x6"
                                                                                    : "4x6";
    ops.emplace_back(name, spec);
  }
  return ops;
}

}  // namespace

TEST_CASE("--frontend python runs every listed operator, overloads through the name a user types") {
  const auto ops = every_listed_op();
  CHECK(ops.size() > 60);
  for (const auto& op : ops) {
    const std::string& name = op.first;
    INFO(name << " " << op.second);
    const Reported py = run_reported(cpu({"trace", name, op.second, "--frontend", "python", "--check"}));
    check_no_crash(py.run);
    REQUIRE(py.run.exit_code == 0);
    // mul.Scalar is strata.mul(self, 2.0), as aten::mul.Scalar is torch.mul(x, 2.0).
    const std::string base = name.substr(0, name.find('.'));
    CHECK(py.doc["frontend_call"].get<std::string>().rfind("strata." + base + "(", 0) == 0);
    CHECK(py.doc["steady"]["rows"][0]["layer"] == "python");
    // The same operator on the same seeded inputs as from C++: the same error, to the last digit.
    const Reported cli = run_reported(cpu({"trace", name, op.second, "--check"}));
    REQUIRE(cli.run.exit_code == 0);
    CHECK(cli.doc["check"]["relative_error"] == py.doc["check"]["relative_error"]);
  }
}

TEST_CASE("compare --frontend python: the eager calls go through Python, the replay does not") {
  const Reported r = run_reported(cpu({"compare", "relu", "4096", "--frontend", "python", "--check"}));
  check_no_crash(r.run);
  INFO(r.run.out << r.run.err);
  REQUIRE(r.run.exit_code == 0);
  CHECK(contains(r.run.out, "\nfrontend: python: strata.relu(self) in the embedded "));
  const double python = r.doc["eager"]["python_and_pybind11"].get<double>();
  CHECK(python > 0);
  CHECK(r.doc["replay"]["python_and_pybind11"] == 0);
  // The table's python row: the eager figure, and none for the replay.
  const std::string line = table_line(r.run.out, "python");
  CHECK(contains(line, strata::reports::format_ns(python)));
  CHECK(line.back() == '-');
  // What the verdict counts as host overhead is what a user needs to read it: its wording is the point.
  CHECK(contains(r.doc["verdict"].get<std::string>(), "host overhead (python + pybind11 + binding + dispatch)"));
  CHECK(r.doc["check"]["passed"] == true);
}

TEST_CASE("trace --peer torch: torch's wall beside strata's, torch.profiler's rows, the same values") {
  if (const std::string why = torch_missing(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  TempDir dir;
  const std::string json_path = dir.path() + "/r.json", trace_path = dir.path() + "/t.json";
  const RunResult r = run_strata(cpu({"trace", "linear", "8x16x4", "--frontend", "python", "--peer", "torch", "--json",
                                      json_path, "--chrome-trace", trace_path}));
  check_no_crash(r);
  INFO(r.out << r.err);
  REQUIRE((r.exit_code == 0 || rows_refused_by_old_torch(r)));
  const auto doc = nlohmann::json::parse(read_file(json_path));
  const auto& peer = doc["peer"];
  CHECK(peer["name"] == "torch");
  CHECK(peer["expression"] == "torch.nn.functional.linear(input, weight, bias)");
  CHECK(peer["version"].get<std::string>().rfind("PyTorch ", 0) == 0);
  // Which torch and which Python: the report names where torch was imported from.
  CHECK(contains(peer["version"].get<std::string>(), std::string(" embedded from ") + STRATA_TEST_PYTHON + ")"));
  CHECK(contains(peer["version"].get<std::string>(), "/torch, Python 3."));
  // The table prints what the report holds: the peer line, both walls side by side, torch.profiler's rows.
  CHECK(contains(r.out, "\npeer: " + peer["expression"].get<std::string>() + "   " + peer["version"].get<std::string>() + "\n"));
  const std::string wall = table_line(r.out, "wall median");
  CHECK(contains(wall, strata::reports::format_ns(peer["strata_untraced_wall"]["median"].get<double>())));
  CHECK(contains(wall, strata::reports::format_ns(peer["wall"]["median"].get<double>())));
  for (const auto& row : peer["profiler"]["rows"]) {
    const std::string name = row["name"].get<std::string>();
    CHECK_MESSAGE(contains(r.out, "\n  " + name.substr(0, 37)), name);
    CHECK(name.rfind("aten::", 0) == 0);  // CPU only: aten ops, no kernels
  }
  for (const auto& note : doc["notes"])  // like with like: no advice to add --frontend python
    CHECK_FALSE(contains(note.get<std::string>(), "add --frontend python"));
  CHECK(peer["wall"]["count"] == 3);
  CHECK(peer["strata_untraced_wall"]["count"] == 3);
  CHECK(peer["wall"]["median"].get<double>() > 0);
  CHECK(peer["profiler"]["rows"].size() > 0);
  // The same input values in torch: the results agree to f32 rounding.
  CHECK(peer["relative_difference_vs_strata"].get<double>() < 1e-5);
  check_trace_file(trace_path);
  CHECK(trace_event_counts(trace_path, "harness")["torch peer call"] == peer["wall"]["count"].get<int>());

  // From the CLI frontend the comparison is not like with like, and the report says so.
  const Reported cli = run_reported(cpu({"trace", "relu", "64", "--peer", "torch"}));
  REQUIRE((cli.run.exit_code == 0 || rows_refused_by_old_torch(cli.run)));
  if (cli.run.exit_code != 0) return;  // run_reported reads the JSON of a run that exited 0 only
  // The advice is the point of the note, so its wording is checked; the table prints it.
  std::string advice;
  for (const auto& note : cli.doc["notes"])
    if (contains(note.get<std::string>(), "add --frontend python to compare like with like")) advice = note;
  CHECK_FALSE(advice.empty());
  CHECK(contains(cli.run.out, "\nnote: " + advice + "\n"));
}

TEST_CASE("--peer torch times the same work as strata: --backward and --autocast on both sides") {
  if (const std::string why = torch_missing(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  TempDir dir;
  const std::string json_path = dir.path() + "/r.json";
  const RunResult bw = run_strata(cpu({"trace", "linear", "8x16x4", "--requires-grad", "--backward", "--frontend",
                                       "python", "--peer", "torch", "--json", json_path}));
  INFO(bw.out << bw.err);
  REQUIRE((bw.exit_code == 0 || rows_refused_by_old_torch(bw)));
  auto peer = nlohmann::json::parse(read_file(json_path))["peer"];
  CHECK(peer["work"] == "forward + y.sum().backward()");
  CHECK(contains(bw.out, "\n  each call, on both sides: " + peer["work"].get<std::string>() + "\n"));
  CHECK(peer["relative_difference_vs_strata"].get<double>() < 1e-5);
  // The version compared against is in the report; the peer's environment (scripts/install-python-deps,
  // passed to the tests as VIRTUAL_ENV) holds torch 2.x.
  const std::string version = peer["version"];
  CHECK(version.rfind("PyTorch ", 0) == 0);
  if (const char* venv = std::getenv("VIRTUAL_ENV"); venv != nullptr && *venv != '\0') {
    CHECK(version.rfind("PyTorch 2.", 0) == 0);
  }

  const RunResult ac = run_strata(cpu({"trace", "linear", "8x16x4", "--autocast", "bf16", "--frontend", "python",
                                       "--peer", "torch", "--json", json_path}));
  INFO(ac.out << ac.err);
  REQUIRE((ac.exit_code == 0 || rows_refused_by_old_torch(ac)));
  peer = nlohmann::json::parse(read_file(json_path))["peer"];
  CHECK(peer["work"] == "forward, under torch.autocast(\"cpu\", torch.bfloat16)");
  // Both computed in bfloat16 from the same f32 values: the results agree to bf16 rounding, not f32's.
  CHECK(peer["relative_difference_vs_strata"].get<double>() < 1e-2);
}

TEST_CASE("--peer torch compares an in-place op's result: one call each on fresh copies of the inputs") {
  if (const std::string why = torch_missing(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  int in_place = 0;
  for (const auto& op : every_listed_op()) {
    const std::string base = op.first.substr(0, op.first.find('.'));
    if (base.back() != '_') continue;
    ++in_place;
    INFO(op.first);
    // div_ by values under 1 grows self to inf over the timed calls: the last results could not compare.
    const Reported r = run_reported(cpu({"trace", op.first, "64", "--frontend", "python", "--peer", "torch"}));
    check_no_crash(r.run);
    REQUIRE(r.run.exit_code == 0);
    const auto& peer = r.doc["peer"];
    REQUIRE(peer.contains("relative_difference_vs_strata"));
    CHECK(peer["relative_difference_vs_strata"].get<double>() < 1e-6);
    CHECK(contains(peer["relative_difference_of"].get<std::string>(), "fresh copies of the inputs"));
    CHECK(contains(r.run.out, "\nstrata's result vs torch's: relative difference "));
  }
  CHECK(in_place >= 9);
  // An out-of-place op compares its last results, and says nothing more.
  const Reported plain = run_reported(cpu({"trace", "div", "64", "--frontend", "python", "--peer", "torch"}));
  REQUIRE(plain.run.exit_code == 0);
  CHECK(plain.doc["peer"]["relative_difference_vs_strata"].get<double>() < 1e-6);
  CHECK_FALSE(plain.doc["peer"].contains("relative_difference_of"));
}

// torch's rows of a JSON report's peer: "layer" or "layer/key" -> median.
std::map<std::string, double> peer_rows(const nlohmann::json& peer) {
  std::map<std::string, double> rows;
  for (const auto& row : peer["rows"]) {
    const std::string id = row["layer"].get<std::string>() + (row.contains("key") ? "/" + row["key"].get<std::string>() : "");
    rows[id] = row["time"]["median"].get<double>();
  }
  return rows;
}

TEST_CASE("trace --peer torch: torch's call in strata's rows, one per key, reconciled with its untraced wall") {
  if (const std::string why = torch_missing(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  TempDir dir;
  const std::string json_path = dir.path() + "/r.json", trace_path = dir.path() + "/t.json";
  // 100 calls (cpu()'s 3 are too few for medians that reconcile on a shared machine): five blocks. add: a
  // call of 1-2 us whose rows reconciled within 3% at load 4 on the 2-core VM.
  const RunResult r = run_strata({"trace", "add", "4096", "--peer", "torch", "--repeat", "100", "--warmup", "2", "--device",
                                  "cpu", "--json", json_path, "--chrome-trace", trace_path});
  check_no_crash(r);
  INFO(r.out << r.err);
  if (rows_refused_by_old_torch(r)) {
    MESSAGE("skipped: torch's rows need the peer environment's torch 2.x (docs/torch-layers.md): " << r.err);
    return;
  }
  REQUIRE(r.exit_code == 0);
  const auto peer = nlohmann::json::parse(read_file(json_path))["peer"];
  REQUIRE_FALSE(peer.contains("rows_note"));
  const auto rows = peer_rows(peer);
  // torch.add: its C function, then the dispatcher's AutogradCPU and CPU kernels, ATen's loop driver under
  // them.
  for (const char* id : {"python", "binding", "dispatch/AutogradCPU", "dispatch/CPU", "library"})
    CHECK_MESSAGE(rows.count(id) == 1, id);
  CHECK(rows.at("library") > 0);
  const auto& measure = peer["rows_measure"];
  CHECK(measure["probed_calls"] == 100);
  CHECK(measure["probe_cost_outer_ns"].get<double>() > 0);
  // What no row holds is the untraced wall less the rows, and small beside it: the probes' cost was taken
  // out (left in, 4 probes per call would put the rows some 10% over on this call).
  double sum = 0;
  for (const auto& [id, median] : rows) sum += median;
  const double wall = measure["untraced_wall"]["median"].get<double>();
  CHECK(measure["in_no_row_ns"].get<double>() == doctest::Approx(wall - sum).epsilon(1e-9));
  CHECK(std::fabs(wall - sum) < 0.15 * wall);
  // The table prints the same rows, torch's column beside strata's.
  CHECK(contains(table_line(r.out, "dispatch  AutogradCPU"), strata::reports::format_ns(rows.at("dispatch/AutogradCPU"))));
  CHECK(contains(table_line(r.out, "in no row"), strata::reports::format_ns(measure["in_no_row_ns"].get<double>())));
  // Each aten op's self time from the probes stands beside torch.profiler's own on its line.
  const double add_self = measure["op_self_ns_per_call"]["aten::add"].get<double>();
  CHECK(add_self > rows.at("library"));  // add's self time holds the loop under it
  CHECK(contains(table_line(r.out, "  aten::add"), "probes: " + strata::reports::format_ns(add_self)));
  // The probes changed nothing torch computes.
  CHECK(peer["relative_difference_vs_strata"].get<double>() == 0);
  CHECK(measure["probed_result_identical"] == true);
  CHECK(contains(r.out, "\n  torch's result with the probes in: bit for bit the same as without\n"));
  // The Chrome trace's torch peer process holds every probed call's spans, per layer.
  check_trace_file(trace_path);
  CHECK(trace_event_counts(trace_path, "harness")["torch peer call, probed"] == 100);
  CHECK(trace_event_counts(trace_path, "dispatch")["AutogradCPU: aten::add.Tensor"] == 100);
  CHECK(trace_event_counts(trace_path, "library")["TensorIteratorBase::for_each"] == 100);

  // Under autocast the AutocastCPU key has its row; an in-place op's ADInplaceOrView too.
  const Reported ac = run_reported(cpu({"trace", "matmul", "16", "--autocast", "bf16", "--peer", "torch"}));
  REQUIRE(ac.run.exit_code == 0);
  CHECK(peer_rows(ac.doc["peer"]).count("dispatch/AutocastCPU") == 1);
  const Reported ip = run_reported(cpu({"trace", "relu_", "256", "--peer", "torch"}));
  REQUIRE(ip.run.exit_code == 0);
  CHECK(peer_rows(ip.doc["peer"]).count("dispatch/ADInplaceOrView") == 1);
}

// A stand-in torch without torch's libraries: the op runs, its rows cannot be measured.
void write_libraryless_torch(const std::string& dir) {
  REQUIRE(system(("mkdir -p " + dir + "/torch/nn").c_str()) == 0);
  std::ofstream(dir + "/torch/__init__.py") << "__version__ = '0.0-libraryless'\n"
                                               "float32, float64, float16, bfloat16 = 'f32', 'f64', 'f16', 'bf16'\n"
                                               "class Tensor:\n"
                                               "    dtype = 'torch.float32'\n"
                                               "    def to(self, *a): return self\n"
                                               "    def requires_grad_(self, v): return self\n"
                                               "    def relu_(self): return self\n"
                                               "    def detach(self): return self\n"
                                               "    def numpy(self):\n"
                                               "        import numpy\n"
                                               "        return numpy.zeros(64)\n"
                                               "def from_numpy(a): return Tensor()\n"
                                               "def get_num_threads(): return 1\n"
                                               "class cuda:\n"
                                               "    is_available = staticmethod(lambda: False)\n"
                                               "class version:\n"
                                               "    cuda = None\n"
                                               "from . import nn\n";
  std::ofstream(dir + "/torch/nn/__init__.py") << "from . import functional\n";
  std::ofstream(dir + "/torch/nn/functional.py") << "\n";
}

TEST_CASE("--peer torch whose libraries are not found: strata's rows and torch's wall, then exit 4 saying why") {
  TempDir dir;
  write_libraryless_torch(dir.path());
  RunOptions options;
  options.env = {"PYTHONPATH=" + dir.path()};
  const std::string json_path = dir.path() + "/r.json";
  const RunResult r = run_strata(cpu({"trace", "relu_", "64", "--peer", "torch", "--json", json_path}), options);
  check_no_crash(r);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 4);
  CHECK(contains(r.err, "--peer torch: torch's rows: none of libtorch_python.so, libtorch_cpu.so, libtorch.so is mapped"));
  CHECK(contains(r.out, "\nbinding "));  // strata's own table is printed
  const auto peer = nlohmann::json::parse(read_file(json_path))["peer"];
  CHECK(peer["rows"].empty());
  CHECK(peer["wall"]["median"].get<double>() > 0);
}

TEST_CASE("--peer torch whose autocast computes another dtype than strata's: exit 4, nothing written") {
  TempDir dir;
  write_float32_only_torch(dir.path());
  RunOptions options;
  options.env = {"PYTHONPATH=" + dir.path()};
  const std::string json_path = dir.path() + "/r.json";
  const RunResult r = run_strata(cpu({"trace", "matmul", "8", "--autocast", "bf16", "--frontend", "python", "--peer",
                                      "torch", "--json", json_path}),
                                 options);
  check_refused(r, 4, "computed float32 where strata computed bfloat16: this PyTorch (0.0-float32-only) does not do "
                      "the same work here");
  CHECK(!file_exists(json_path));
}

TEST_CASE("compare --peer torch: torch's eager rounds and its torch.compile rounds beside strata's, per op") {
  TempDir dir;
  write_float32_only_torch(dir.path());
  RunOptions options;
  options.env = {"PYTHONPATH=" + dir.path()};
  const std::string json_path = dir.path() + "/c.json";
  const RunResult r = run_strata(cpu({"compare", "matmul", "8", "--frontend", "python", "--peer", "torch",
                                      "--ops-per-graph", "4", "--json", json_path}),
                                 options);  // cpu(): 3 rounds, no warm-up
  check_no_crash(r);
  INFO(r.out << r.err);
  // The stand-in has no torch libraries to probe: every figure is written, then exit 4 for torch's rows
  // (docs/torch-layers.md; the rows themselves are tested with the real torch on trace).
  REQUIRE(r.exit_code == 4);
  CHECK(contains(r.err, "strata: --peer torch: torch's rows: none of libtorch_python.so"));
  const auto doc = nlohmann::json::parse(read_file(json_path));
  const auto& peer = doc["peer"];
  CHECK(peer["rows"].empty());
  CHECK(contains(peer["rows_note"].get<std::string>(), "none of libtorch_python.so"));
  CHECK(peer["expression"] == "torch.matmul(self, other)");
  CHECK(peer["version"].get<std::string>().rfind("PyTorch 0.0-float32-only ", 0) == 0);
  CHECK(peer["replay_kind"] == "torch.compile (inductor)");
  // The table prints the report's peer line, and each mode's per-op figures beside strata's.
  CHECK(contains(r.out, "\npeer: " + peer["expression"].get<std::string>() + "   " + peer["version"].get<std::string>() + "\n"));
  const std::string eager = table_line(r.out, "eager"), replay = table_line(r.out, "replay");
  CHECK(contains(eager, strata::reports::format_ns(doc["eager"]["wall"].get<double>())));
  CHECK(contains(eager, strata::reports::format_ns(peer["eager"].get<double>())));
  CHECK(contains(replay, strata::reports::format_ns(doc["replay"]["wall"].get<double>())));
  CHECK(contains(replay, strata::reports::format_ns(peer["replay"].get<double>())));
  CHECK(contains(replay, "(strata: " + doc["replay"]["label"].get<std::string>() + "; torch: " +
                             peer["replay_kind"].get<std::string>() + ")"));
  CHECK(peer["rounds"] == 3);
  CHECK(peer["eager"].get<double>() > 0);
  CHECK(peer["replay"].get<double>() > 0);
  CHECK(peer["setup_ns"].get<double>() > 0);
  CHECK(peer["work"] == "forward");
}

TEST_CASE("--peer torch without an importable torch: exit 4 naming the python and what to install") {
  TempDir dir;
  write_broken_torch(dir.path());
  RunOptions options;
  options.env = {"PYTHONPATH=" + dir.path()};
  const std::string json_path = dir.path() + "/r.json";
  const RunResult r = run_strata(cpu({"trace", "matmul", "8", "--frontend", "python", "--peer", "torch", "--json",
                                      json_path}),
                                 options);
  check_refused(r, 4, std::string("PyTorch is not importable by the embedded ") + STRATA_TEST_PYTHON +
                          " with environment ");
  CHECK(contains(r.err, " (ImportError: no torch in this test): run scripts/install-python-deps"));
  CHECK(contains(r.err, "install python3-torch"));
  CHECK(!file_exists(json_path));
  const RunResult devices = run_strata({"devices"}, options);
  CHECK(devices.exit_code == 0);
  CHECK(contains(devices.out, "torch: not importable (ImportError: no torch in this test)"));
}

namespace {

// A virtual environment at `venv` for the embedded Python's version whose torch is a stand-in reporting
// `version`: which environment the embedded interpreter found shows in the version the peer reports.
void write_environment_with_torch(const std::string& venv, const std::string& version) {
  FILE* p = popen(STRATA_TEST_PYTHON " -c \"import sys; print('%d.%d' % sys.version_info[:2], end='')\"", "r");
  REQUIRE(p != nullptr);
  char version_text[16] = {};
  const size_t n = fread(version_text, 1, sizeof version_text - 1, p);
  REQUIRE(pclose(p) == 0);
  const std::string torch = venv + "/lib/python" + std::string(version_text, n) + "/site-packages/torch";
  REQUIRE(system(("mkdir -p " + torch + "/nn").c_str()) == 0);
  std::ofstream(torch + "/__init__.py") << "__version__ = '" << version << "'\n"
                                          "float32, float64, float16, bfloat16 = 'f32', 'f64', 'f16', 'bf16'\n"
                                          "class version:\n    cuda = None\n"
                                          "class cuda:\n    is_available = staticmethod(lambda: False)\n"
                                          "from . import nn\n";
  std::ofstream(torch + "/nn/__init__.py") << "from . import functional\n";
  std::ofstream(torch + "/nn/functional.py") << "";
}

}  // namespace

TEST_CASE("the embedded Python finds the project's environment without VIRTUAL_ENV, and says which") {
  TempDir dir;
  // Where scripts/install-python-deps makes it: $STRATA_VENV, else $XDG_CACHE_HOME/strata/venv.
  write_environment_with_torch(dir.path() + "/cache/strata/venv", "0.0-project");
  write_environment_with_torch(dir.path() + "/chosen", "0.0-chosen");
  write_environment_with_torch(dir.path() + "/active", "0.0-active");
  struct Case {
    std::vector<std::string> env;
    std::string environment, torch;
  };
  const std::string cache = "XDG_CACHE_HOME=" + dir.path() + "/cache";
  const Case cases[] = {
      {{"VIRTUAL_ENV=", "STRATA_VENV=", cache}, dir.path() + "/cache/strata/venv (the project's", "0.0-project"},
      {{"VIRTUAL_ENV=", "STRATA_VENV=" + dir.path() + "/chosen", cache}, dir.path() + "/chosen (STRATA_VENV)",
       "0.0-chosen"},
      {{"VIRTUAL_ENV=" + dir.path() + "/active", "STRATA_VENV=" + dir.path() + "/chosen", cache},
       dir.path() + "/active (VIRTUAL_ENV)", "0.0-active"},
  };
  for (const Case& c : cases) {
    RunOptions options;
    options.env = c.env;
    const RunResult r = run_strata({"devices"}, options);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "\n  environment: " + c.environment));
    CHECK(contains(r.out, "\n  torch: " + c.torch + " (built without CUDA): --peer torch works"));
  }
  // None there: the report says so, and where it looked.
  RunOptions none;
  none.env = {"VIRTUAL_ENV=", "STRATA_VENV=", "XDG_CACHE_HOME=" + dir.path() + "/empty"};
  const RunResult r = run_strata({"devices"}, none);
  CHECK(contains(r.out, "\n  environment: none (the project's, made by scripts/install-python-deps: " + dir.path() +
                            "/empty/strata/venv has no lib/python3."));
}

TEST_CASE("--peer torch when torch refuses the op: exit 4 with torch's message, nothing written") {
  TempDir dir;
  write_refusing_torch(dir.path());
  RunOptions options;
  options.env = {"PYTHONPATH=" + dir.path()};
  const std::string json_path = dir.path() + "/r.json";
  const RunResult r = run_strata(cpu({"trace", "matmul", "8", "--frontend", "python", "--peer", "torch", "--json",
                                      json_path}),
                                 options);
  check_refused(r, 4, "--peer torch: torch.matmul(self, other) (forward) raised RuntimeError: \"addmm_impl_cpu_\" not "
                      "implemented");
  CHECK(!file_exists(json_path));
}

TEST_CASE("--frontend python without the package or the module: exit 4 saying what is missing") {
  RunOptions no_package;
  no_package.env = {"STRATA_PYTHONPATH=/nonexistent/strata-python"};
  check_refused(run_strata(cpu({"trace", "matmul", "8", "--frontend", "python"}), no_package), 4,
                "STRATA_PYTHONPATH=/nonexistent/strata-python holds no strata package");
  RunOptions no_module;
  no_module.env = {"STRATA_PYTHON_MODULE=/nonexistent/libstrata_python.so"};
  check_refused(run_strata(cpu({"trace", "matmul", "8", "--frontend", "python"}), no_module), 4,
                "the Python module could not be loaded: /nonexistent/libstrata_python.so");
  // A plain trace never loads the module: the same environment does not matter to it.
  const RunResult plain = run_strata(cpu({"trace", "matmul", "8"}), no_module);
  CHECK(plain.exit_code == 0);
  CHECK(table_line(plain.out, "python").empty());
}

TEST_CASE("strata devices names the Python --frontend python uses, the package and torch") {
  const RunResult r = run_strata({"devices"});
  check_no_crash(r);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, std::string("python: ") + STRATA_TEST_PYTHON + " 3."));
  CHECK(contains(r.out, "libpython3"));
  CHECK(contains(r.out, "strata package: "));
  CHECK(contains(r.out, "/python/strata"));
  CHECK(contains(r.out, "torch: "));
}

#else

TEST_CASE("--frontend python in a build without the Python module: exit 4 saying so") {
  check_refused(run_strata(cpu({"trace", "matmul", "8", "--frontend", "python"})), 4,
                "this strata was built without its Python module");
  check_refused(run_strata(cpu({"trace", "matmul", "8", "--peer", "torch"})), 4,
                "this strata was built without its Python module");
}

#endif

TEST_CASE("--frontend and --peer take only the values they list") {
  check_refused(run_strata(cpu({"trace", "matmul", "8", "--frontend", "foo"})), 2,
                "--frontend 'foo' is not a frontend; allowed: cli");
  check_refused(run_strata(cpu({"compare", "matmul", "8", "--frontend", "Python"})), 2,
                "--frontend 'Python' is not a frontend; allowed: cli");
  check_refused(run_strata(cpu({"trace", "matmul", "8", "--peer", "jax"})), 2,
                "--peer 'jax' is not a peer; allowed: torch");
  check_refused(run_strata(cpu({"compare", "matmul", "8", "--peer", "jax"})), 2,
                "--peer 'jax' is not a peer; allowed: torch");
}
