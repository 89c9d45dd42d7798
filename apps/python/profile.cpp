// strata._strata._Profile: the recording behind strata.profile() (apps/python/strata/_profile.py).
// The reports are the ones `strata trace` prints (reports/): one TraceReport per operator called.
#include "apps/python/profile.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <sstream>
#include <vector>

#include "layers/binding/binding.h"
#include "lib/error.h"
#include "lib/machine.h"
#include "lib/output_file.h"
#include "lib/zone.h"
#include "measure/report_builder.h"
#include "reports/formats/chrome_trace.h"
#include "reports/formats/json_report.h"
#include "reports/formats/json_text.h"
#include "reports/formats/table.h"

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

  // One operator's (or compiled function's) block: the same report `strata trace` prints, built by the
  // same builder (Note [One report builder] in measure/report_builder.h) from this profile's calls.
  reports::TraceReport report(uint16_t op_index, double python_probe_ns) const {
    const ProfiledCalls calls = profiled_calls(op_index);
    reports::TraceReport report = describe_calls(calls);
    describe_rows(report, calls, python_probe_ns);
    // The python and pybind11 rows are bounded by the Python-side probes (a CPython call each), the others
    // by a zone: each row against the instrument that measured it. The probes of one call make two spans,
    // so one span's open + close costs half of them (Note [Rows below resolution]).
    measure::mark_rows_below_resolution(report, {.zone_ns = report.probe_ns, .python_ns = python_probe_ns / 2.0, .scope = ""});
    add_profile_notes(report, calls);
    return report;
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
      // A compiled function's title carries its Python label: written by the JSON library, escaped.
      const nlohmann::ordered_json entry{{"op", call_title(op)}, {"calls", calls_of(op, true).size()}};
      out += (first ? "" : ",") + entry.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      first = false;
    }
    out += "],\"ops\":[";
    first = true;
    for (uint16_t op : called_ops()) {
      out += (first ? "" : ",") + reports::trace_report_json(report(op, python_probe_ns));
      first = false;
    }
    warn_if_bytes_replaced(out, "strata.profile().json()");
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
    const std::string text = writer.str();
    write_file_atomically(path, text);
    warn_if_bytes_replaced(text, path);
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
  // The calls of one operator (or compiled function) in this profile: those that returned, and how many raised.
  struct ProfiledCalls {
    uint16_t op_index = 0;
    bool compiled = false;                          // a strata.compile function's calls
    const binding::BoundOperator* op = nullptr;     // null for a compiled function
    std::vector<uint32_t> ids;                      // of the calls that returned
    size_t failed = 0;                              // calls that raised
  };
  ProfiledCalls profiled_calls(uint16_t op_index) const {
    ProfiledCalls calls;
    calls.op_index = op_index;
    calls.compiled = op_index >= kCompiledCallBase;
    calls.op = calls.compiled ? nullptr : binding::all_operators().at(op_index);
    calls.ids = calls_of(op_index, false);
    calls.failed = calls_of(op_index, true).size();
    return calls;
  }

  // The block's header, its breakdowns and the machine: what the calls were and what they measured.
  reports::TraceReport describe_calls(const ProfiledCalls& calls) const {
    reports::TraceReport report;
    report.op = call_title(calls.op_index);
    report.spec = report.op;
    report.schema = calls.compiled ? "compiled graph: guards, then one dispatched call per fused kernel"
                                   : calls.op->schema().text;
    const size_t returned = calls.ids.size();
    report.description = std::to_string(returned) + " call" + (returned == 1 ? "" : "s") + " from Python" +
                         (calls.failed > 0 ? " (+" + std::to_string(calls.failed) + " that raised, left out)" : "");
    report.figures.set("python.failed_calls", double(calls.failed), "count");
    for (const auto& [known, text] : arguments_)
      if (known == calls.op) report.description = text + "  " + report.description + " (arguments of the first)";
    report.dtype = "";  // each argument's dtype is in the description
    report.frontend = "python";
    report.steady = reports::compute_breakdown(timeline_, calls.ids);
    const uint32_t first = calls.ids.front();
    report.cold = reports::compute_breakdown(timeline_, std::span<const uint32_t>(&first, 1));
    report.keys = measure::key_path(timeline_, first);
    report.repeat = returned;
    report.env = measure::host_environment();
    report.device = on_cuda(report) ? "cuda" : measure::cpu_device_name(report.env);
    report.probe_ns = measure_zone_cost_ns();
    report.probes_per_call = double(spans_of(calls.ids)) / double(returned);
    return report;
  }

  // What the CLI says on stderr (write_output_file), as a Python RuntimeWarning: the document is complete,
  // a name in it was not UTF-8 (Note [JSON text is valid UTF-8] in reports/formats/json_text.h).
  static void warn_if_bytes_replaced(const std::string& text, const std::string& what) {
    if (!reports::json_text_replaced_bytes(text)) return;
    const std::string message = reports::json_text_replaced_warning(what);
    if (PyErr_WarnEx(PyExc_RuntimeWarning, message.c_str(), 1) < 0) throw py::error_already_set();
  }

  static bool on_cuda(const reports::TraceReport& report) { return report.keys.find("CUDA") != std::string::npos; }

  // The spans the calls `ids` wrote.
  size_t spans_of(const std::vector<uint32_t>& ids) const {
    std::vector<bool> mine(next_id_, false);  // op ids are 1 .. next_id_ - 1
    for (uint32_t id : ids) mine[id] = true;
    size_t spans = 0;
    for (const Span& span : timeline_.spans())
      if (span.op_id < mine.size() && mine[span.op_id]) ++spans;
    return spans;
  }

  // Every row's words, from the builder (Note [One report builder]); a compiled function's python and
  // binding rows say what its C++ run does (Note [Compiled calls in strata.profile()] in compile.cpp).
  static void describe_rows(reports::TraceReport& report, const ProfiledCalls& calls, double python_probe_ns) {
    using reports::RowKind;
    measure::describe_python_rows(report);
    if (calls.compiled) {
      report.describe(RowKind::kPybind11, "", "_CompiledGraph.run: the call's C++ outside the zones below");
      report.describe(RowKind::kBinding, "", "guards (+ extern kernels' binding)");
    } else {
      measure::describe_binding_row(report);
    }
    for (const reports::BreakdownRow& row : report.steady.rows)
      if (row.kind == RowKind::kDispatch && row.key != "Autograd") measure::describe_kernel_row(report, row.key);
    if (on_cuda(report)) {
      measure::describe_unrecorded_device_rows(report);
    } else {
      measure::describe_cpu_device_rows(report);
    }
    if (calls.compiled) {
      report.describe(RowKind::kWall, "", "the compiled graph's run, entry -> return");
      report.notes.push_back(
          "a compiled call's rows start at the C++ run: the Python wrapper's guard check before it "
          "(strata.compile's __call__) is not in them");
    } else {
      measure::describe_wall_row(report, measure::Caller::kPython, measure::WallEnd::kReturn);
      measure::add_python_probe_note(report, python_probe_ns);
    }
  }

  // What a profile's block cannot know (whether its first call was cold) and the calls it left out.
  static void add_profile_notes(reports::TraceReport& report, const ProfiledCalls& calls) {
    report.notes.push_back("the 'cold first call' is the first call of " + report.op +
                           " inside this profile that returned: cold only if nothing called it before");
    if (calls.failed > 0) {
      report.notes.push_back(std::to_string(calls.failed) + " call" + (calls.failed == 1 ? "" : "s") + " of " +
                             report.op + " raised an exception: counted apart, in no figure above (median, p90, "
                             "cold call, call count)");
    }
    if (!on_cuda(report)) measure::add_blas_warning(report);
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
