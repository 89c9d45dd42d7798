// strata._strata._Profile: the recording behind strata.profile() (layers/python/strata/_profile.py).
// The reports are the ones `strata trace` prints (reports/): one TraceReport per operator called.
#include "layers/python/profile.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <sstream>
#include <thread>
#include <vector>

#include "layers/binding/binding.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/error.h"
#include "lib/machine.h"
#include "lib/output_file.h"
#include "lib/zone.h"
#include "reports/chrome_trace.h"
#include "reports/json_report.h"
#include "reports/table.h"

namespace py = pybind11;

namespace strata::python {
namespace {

class Profile;
thread_local Profile* t_recording = nullptr;

// The labels of compiled functions, by index - kCompiledCallBase (never shrinks: indices stay valid).
std::deque<std::string>& compiled_labels() {
  static std::deque<std::string> labels;
  return labels;
}

// "strata.matmul", or "strata.compile(relu_matmul)" for a compiled function's calls.
std::string call_title(uint16_t index) {
  if (index >= kCompiledCallBase)
    return "strata.compile(" + compiled_labels().at(index - kCompiledCallBase) + ")";
  return "strata." + binding::all_operators().at(index)->schema().name;
}

class Profile {
 public:
  Profile() : timeline_(1 << 16) {}
  ~Profile() {
    if (t_recording == this) stop();
  }
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  void start() {
    if (recording_) throw UsageError("strata.profile(): this profile is already recording");
    if (t_recording != nullptr || tracing::active() != nullptr)
      throw UsageError("strata.profile(): another profile is already recording on this thread; profiles do not nest "
                       "(put one profile around everything you want measured)");
    if (stopped_)
      throw UsageError("strata.profile(): a profile records once; start a new strata.profile() for another recording");
    tracing::t_active = &timeline_;
    t_recording = this;
    recording_ = true;
  }
  // The recording is the thread's that started it (its active timeline is thread-local): ending it from
  // another thread could not switch that thread's recording off, so it is refused and nothing changes.
  void stop() {
    if (!recording_) return;
    if (t_recording != this) {
      throw UsageError("strata.profile(): this profile records on the thread that entered it; exit it on that "
                       "thread (this is another one; nothing was changed)");
    }
    tracing::t_active = nullptr;
    t_recording = nullptr;
    recording_ = false;
    stopped_ = true;
  }
  // On any thread: whether this profile is recording (on the thread that started it).
  bool recording() const { return recording_; }

  uint32_t next_call(uint16_t op_index) {
    const uint32_t id = next_id_++;
    ids_.push_back(id);
    ops_.push_back(op_index);
    failed_.push_back(0);
    // Grow the span buffer between calls, never inside one (a realloc in the middle of a timed call
    // would be charged to whichever zone pushed the span).
    if (timeline_.spans().capacity() - timeline_.spans().size() < 64) timeline_.reserve_more(timeline_.spans().size());
    return id;
  }

  // Ids are 1, 2, ... in call order, so a call's index in ids_ is its id - 1.
  void mark_failed(uint32_t id) {
    if (id >= 1 && id <= failed_.size()) failed_[id - 1] = 1;
  }
  // Calls that returned (the figures are theirs) and calls that raised (counted apart).
  size_t calls() const { return ids_.size() - failed_calls(); }
  size_t failed_calls() const { return size_t(std::count(failed_.begin(), failed_.end(), uint8_t{1})); }

  void note(const binding::BoundOperator& op, std::span<const binding::IValue> args,
            std::span<const binding::Kwarg> kwargs) {
    for (const auto& [known, text] : arguments_)
      if (known == &op) return;
    std::string text;
    for (const binding::IValue& v : args) text += (text.empty() ? "" : ", ") + v.repr();
    for (const binding::Kwarg& k : kwargs) text += (text.empty() ? "" : ", ") + std::string(k.name) + "=" + k.value.repr();
    arguments_.emplace_back(&op, "(" + text + ")");
  }

  // Operator indices in the order they were first called, of the calls that returned (`failed` false)
  // or of those that raised (true).
  std::vector<uint16_t> called_ops(bool failed = false) const {
    std::vector<uint16_t> out;
    for (size_t i = 0; i < ops_.size(); ++i)
      if ((failed_[i] != 0) == failed && std::find(out.begin(), out.end(), ops_[i]) == out.end()) out.push_back(ops_[i]);
    return out;
  }
  // The op ids of one operator's calls that returned, or of those that raised.
  std::vector<uint32_t> calls_of(uint16_t op_index, bool failed) const {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < ids_.size(); ++i)
      if (ops_[i] == op_index && (failed_[i] != 0) == failed) out.push_back(ids_[i]);
    return out;
  }

  reports::TraceReport report(uint16_t op_index, double python_probe_ns) const {
    const bool compiled = op_index >= kCompiledCallBase;
    const binding::BoundOperator* op = compiled ? nullptr : binding::all_operators().at(op_index);
    const std::vector<uint32_t> ids = calls_of(op_index, false);
    const size_t failed = calls_of(op_index, true).size();
    reports::TraceReport rep;
    rep.op = call_title(op_index);
    rep.spec = rep.op;
    rep.schema =
        compiled ? "compiled graph: guards, then one dispatched call per fused kernel" : op->schema().text;
    rep.description = std::to_string(ids.size()) + " call" + (ids.size() == 1 ? "" : "s") + " from Python" +
                      (failed > 0 ? " (+" + std::to_string(failed) + " that raised, left out)" : "");
    rep.figures.set("python.failed_calls", double(failed), "count");
    for (const auto& [known, text] : arguments_)
      if (known == op) rep.description = text + "  " + rep.description + " (arguments of the first)";
    rep.dtype = "";
    rep.steady = reports::compute_breakdown(timeline_, ids);
    const uint32_t first = ids.front();
    rep.cold = reports::compute_breakdown(timeline_, std::span<const uint32_t>(&first, 1));
    rep.keys = key_path(first);
    rep.device = rep.keys.find("CUDA") != std::string::npos ? "cuda" : "cpu";
    rep.repeat = ids.size();
    const auto clock = host_clock::info();
    rep.env.strata_version = STRATA_VERSION;
    rep.env.cpu_model = cpu_model();
    rep.env.cpu_threads = static_cast<int>(std::thread::hardware_concurrency());
    rep.env.blas_config = kernels::cpu::blas_config();
    rep.env.blas_threads = kernels::cpu::blas_threads();
    rep.env.clock_source = std::string(clock.source);
    rep.env.clock_ns_per_tick = clock.ns_per_tick;
    rep.env.clock_read_ns = clock.read_cost_ns;
    if (rep.device == "cpu") rep.device = "cpu (" + std::to_string(rep.env.blas_threads) + " OpenBLAS threads)";
    rep.probe_ns = measure_zone_cost_ns();
    std::vector<bool> mine(next_id_, false);  // op ids are 1 .. next_id_ - 1
    for (uint32_t id : ids) mine[id] = true;
    size_t spans = 0;
    for (const Span& s : timeline_.spans())
      if (s.op_id < mine.size() && mine[s.op_id]) ++spans;
    rep.probes_per_call = double(spans) / double(ids.size());

    using reports::RowKind;
    describe_python_rows(rep);
    if (compiled) {  // Note [Compiled calls in strata.profile()] in compile.cpp
      rep.describe(RowKind::kPybind11, "", "_CompiledGraph.run: the call's C++ outside the zones below");
      rep.describe(RowKind::kBinding, "", "guards (+ extern kernels' binding)");
    } else {
      rep.describe(RowKind::kBinding, "", "schema " + rep.schema.substr(0, rep.schema.find(" ->")));
    }
    for (const reports::BreakdownRow& row : rep.steady.rows)
      if (row.kind == RowKind::kDispatch && row.key != "Autograd")
        rep.describe(RowKind::kDispatch, row.key, row.key + " kernel: key set + table lookup");
    if (rep.keys.find("CUDA") == std::string::npos) {
      reports::describe_cpu_device_rows(rep);
    } else {
      rep.describe_na(RowKind::kLaunch, "not recorded: strata.profile() takes host spans only (use strata trace)");
      rep.describe_na(RowKind::kQueue, "not recorded: strata.profile() takes host spans only (use strata trace)");
      rep.describe_na(RowKind::kGpu, "not recorded: strata.profile() takes host spans only (use strata trace)");
    }
    if (compiled) {
      rep.describe(RowKind::kWall, "", "the compiled graph's run, entry -> return");
      rep.notes.push_back(
          "a compiled call's rows start at the C++ run: the Python wrapper's guard check before it "
          "(strata.compile's __call__) is not in them");
    } else {
      rep.describe(RowKind::kWall, "", "python entry -> python return");
      rep.notes.push_back(
          "the python and pybind11 rows come from probes in the frontend and the extension's entry "
          "costing about " +
          std::to_string(std::lround(python_probe_ns)) +
          " ns per call together (Note [The python and pybind11 rows])");
    }
    // The python and pybind11 rows are bounded by the Python-side probes (a CPython call each), the others
    // by a zone: each row against the instrument that measured it. The probes of one call make two spans,
    // so one span's open + close costs half of them (Note [Rows below resolution]).
    reports::mark_rows_below_resolution(rep, {.zone_ns = rep.probe_ns, .python_ns = python_probe_ns / 2.0});
    rep.notes.push_back("the 'cold first call' is the first call of " + rep.op +
                        " inside this profile that returned: cold only if nothing called it before");
    if (failed > 0) {
      rep.notes.push_back(std::to_string(failed) + " call" + (failed == 1 ? "" : "s") + " of " + rep.op +
                          " raised an exception: counted apart, in no figure above (median, p90, cold call, "
                          "call count)");
    }
    if (std::string warning = kernels::cpu::blas_kernel_warning(); !warning.empty()) rep.notes.push_back(warning);
    return rep;
  }

  std::string table(double python_probe_ns) const {
    check_readable();
    std::ostringstream out;
    bool first = true;
    for (uint16_t op : called_ops()) {
      if (!first) out << "\n";
      first = false;
      reports::print_trace_table(report(op, python_probe_ns), out);
    }
    // An operator whose every call raised has no block above: one line says so.
    const std::vector<uint16_t> measured = called_ops();
    for (uint16_t op : called_ops(true)) {
      if (std::find(measured.begin(), measured.end(), op) != measured.end()) continue;  // its block says it
      const size_t failed = calls_of(op, true).size();
      out << (first ? "" : "\n") << call_title(op) << ": " << failed << " call" << (failed == 1 ? "" : "s")
          << " raised an exception (not measured: in no figure)\n";
      first = false;
    }
    return out.str();
  }

  // {"calls": returned, "failed_calls": raised, "failed": [{"op", "calls"}...], "ops": [...]}: one trace
  // report (the JSON `strata trace --json` writes) per operator with a call that returned, in
  // first-called order; "failed" counts the calls that raised, per operator.
  std::string json(double python_probe_ns) const {
    check_readable();
    std::string out = "{\"calls\":" + std::to_string(calls()) + ",\"failed_calls\":" + std::to_string(failed_calls()) +
                      ",\"failed\":[";
    bool first = true;
    for (uint16_t op : called_ops(true)) {
      out += std::string(first ? "" : ",") + "{\"op\":\"" + call_title(op) +
             "\",\"calls\":" + std::to_string(calls_of(op, true).size()) + "}";
      first = false;
    }
    out += "],\"ops\":[";
    first = true;
    for (uint16_t op : called_ops()) {
      out += (first ? "" : ",") + reports::trace_report_json(report(op, python_probe_ns));
      first = false;
    }
    return out + "]}";
  }

  void export_chrome_trace(const std::string& path) const {
    check_output_path(path);
    check_readable();
    reports::ChromeTraceWriter writer;
    writer.add_metadata("op", "strata.profile(): " + std::to_string(calls()) + " calls from Python" +
                                  (failed_calls() > 0 ? ", " + std::to_string(failed_calls()) + " more that raised" : ""));
    reports::TraceMetadata meta;
    for (uint32_t id : ids_) meta.steps.push_back({id});
    writer.set_trace_metadata(std::move(meta));
    writer.add_timeline(timeline_, "python");
    write_file_atomically(path, writer.str());
  }

  // Raw spans, for embedders and tests: (layer, name, begin_ns, end_ns, parent, op_id).
  py::list spans() const {
    py::list out;
    for (const Span& s : timeline_.spans()) {
      out.append(py::make_tuple(layer_name(s.layer), s.name, timeline_.begin_ns(s), timeline_.end_ns(s), s.parent,
                                s.op_id));
    }
    return out;
  }

  py::list call_ops() const {
    py::list out;
    for (size_t i = 0; i < ids_.size(); ++i) {
      const std::string title = call_title(ops_[i]);  // "strata.matmul": the name without "strata."
      out.append(py::make_tuple(ids_[i], title.substr(title.find('.') + 1)));
    }
    return out;
  }

  // What reading a profile needs: it has ended and it recorded a call (that returned or raised).
  void check_readable() const {
    if (recording())
      throw UsageError("strata.profile(): the profile is still recording; read it after the `with` block ends");
    if (ids_.empty())
      throw UsageError("strata.profile(): no strata operator was called while the profile was recording");
  }

 private:
  std::string key_path(uint32_t op_id) const {
    std::string path;
    for (const Span& s : timeline_.spans())
      if (s.op_id == op_id && s.layer == Layer::kDispatch) path += (path.empty() ? "" : " > ") + std::string(s.name);
    return path;
  }

  Timeline timeline_;
  std::vector<uint32_t> ids_;
  std::vector<uint16_t> ops_;
  std::vector<uint8_t> failed_;  // per call, as ids_: 1 when it raised
  std::atomic<bool> recording_{false};
  std::vector<std::pair<const binding::BoundOperator*, std::string>> arguments_;  // of each op's first call
  uint32_t next_id_ = 1;
  bool stopped_ = false;
};

}  // namespace

uint16_t compiled_call_index(const std::string& label) {
  std::deque<std::string>& labels = compiled_labels();
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] == label) return uint16_t(kCompiledCallBase + i);
  // Past 4095 labels the last one is shared (a block per function stops being distinct, nothing breaks).
  if (labels.size() >= size_t(0xFFFF - kCompiledCallBase))
    return uint16_t(kCompiledCallBase + labels.size() - 1);
  labels.push_back(label);
  return uint16_t(kCompiledCallBase + labels.size() - 1);
}

uint32_t next_profiled_call(uint16_t op_index) {
  return t_recording == nullptr ? 0 : t_recording->next_call(op_index);
}

void mark_profiled_call_failed(uint32_t op_id) {
  if (t_recording != nullptr) t_recording->mark_failed(op_id);
}

void note_arguments(const binding::BoundOperator& op, std::span<const binding::IValue> args,
                    std::span<const binding::Kwarg> kwargs) {
  if (t_recording != nullptr) [[unlikely]]
    t_recording->note(op, args, kwargs);
}

void bind_profile(py::module_& m) {
  const auto probe = py::arg("python_probe_ns");
  py::class_<Profile>(m, "_Profile")
      .def(py::init<>())
      .def("start", &Profile::start)
      .def("stop", &Profile::stop)
      .def_property_readonly("recording", &Profile::recording)
      .def_property_readonly("calls", &Profile::calls)
      .def_property_readonly("failed_calls", &Profile::failed_calls)
      .def("check_readable", &Profile::check_readable)
      .def("table", &Profile::table, probe)
      .def("json", &Profile::json, probe)
      .def("export_chrome_trace", &Profile::export_chrome_trace, py::arg("path"))
      .def("spans", &Profile::spans)
      .def("call_ops", &Profile::call_ops);
}

}  // namespace strata::python
