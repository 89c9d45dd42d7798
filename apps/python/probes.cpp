// The probes of Note [The python and pybind11 rows] (probes.h): plain CPython functions, so that a
// probe costs a METH_O / METH_NOARGS call (tens of ns), not a pybind11 dispatch.
#include "apps/python/probes.h"

#include <Python.h>

#include <deque>
#include <string>

#include "apps/python/profile.h"
#include "layers/binding/binding.h"

namespace strata::python {
namespace {

// "strata.matmul", ...: span names must outlive every timeline (Span::name is a plain pointer), so they
// are built once, at import, and never change.
std::deque<std::string>& python_names() {
  static std::deque<std::string> names;
  return names;
}

// One frame per frontend call in progress on this thread. Frontend functions do not call each other
// today; the stack only keeps a nested call (a future composite op written in Python) from closing its
// caller's spans. Deeper than kMaxDepth, calls are counted but not recorded.
constexpr int kMaxDepth = 8;
struct Frame {
  Timeline* timeline = nullptr;  // nullptr: nothing recorded for this call
  int32_t python = -1;
  int32_t pybind11 = -1;
  bool owns_op = false;  // _enter numbered the call; _exit clears the op id again
};
thread_local Frame t_frames[kMaxDepth];
thread_local int t_depth = 0;

PyObject* enter(PyObject*, PyObject* index_object) {
  const long index = PyLong_AsLong(index_object);
  if (index < 0 || size_t(index) >= python_names().size()) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_ValueError, "_enter(): no operator with index %ld (there are %zu)", index,
                   python_names().size());
    return nullptr;
  }
  const int depth = t_depth++;
  if (depth >= kMaxDepth) Py_RETURN_NONE;
  Frame& f = t_frames[depth];
  f = Frame{};
  Timeline* t = tracing::active();
  if (t == nullptr) Py_RETURN_NONE;
  f.timeline = t;
  if (t->op() == 0) {
    // A profile numbers the calls it sees; everything before the clock read is outside the row.
    if (uint32_t id = next_profiled_call(uint16_t(index)); id != 0) {
      t->set_op(id);
      f.owns_op = true;
    }
  }
  f.python = t->open(Layer::kPython, python_names()[size_t(index)].c_str());
  Py_RETURN_NONE;
}

PyObject* cross(PyObject*, PyObject*) {
  open_crossing_span("_strata._op");
  Py_RETURN_NONE;
}
PyObject* cross_call(PyObject*, PyObject*) {
  open_crossing_span("_strata.call");
  Py_RETURN_NONE;
}

PyObject* exit_probe(PyObject*, PyObject*) {
  close_call_spans();
  Py_RETURN_NONE;
}

// The frontend's exit when the call raised: the profile that numbered the call counts it as failed, apart
// from the calls that returned, then the spans close as on any exit.
PyObject* exit_failed_probe(PyObject*, PyObject*) {
  const int depth = t_depth - 1;
  if (depth >= 0 && depth < kMaxDepth) {
    const Frame& f = t_frames[depth];
    if (f.owns_op && f.timeline != nullptr && f.timeline == tracing::active()) mark_profiled_call_failed(f.timeline->op());
  }
  close_call_spans();
  Py_RETURN_NONE;
}

// The raw host clock, for the differential cross-check and benchmarks timed from Python (ticks, not
// ns: converting costs more than reading).
PyObject* ticks(PyObject*, PyObject*) { return PyLong_FromUnsignedLongLong(host_clock::ticks()); }

PyObject* ticks_to_ns(PyObject*, PyObject* arg) {
  const unsigned long long t = PyLong_AsUnsignedLongLong(arg);
  if (t == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return nullptr;
  return PyLong_FromLongLong(host_clock::ticks_to_ns(t));
}

PyMethodDef g_probe_methods[] = {
    {"_enter", &enter, METH_O, "probe: a frontend function's entry (Note [The python and pybind11 rows])"},
    {"_cross", &cross, METH_NOARGS, "probe: opens the crossing's span before a plain-index call of _strata._op"},
    {"_cross_call", &cross_call, METH_NOARGS, "probe: just before the frontend calls _strata.call (the general entry)"},
    {"_exit", &exit_probe, METH_NOARGS, "probe: the frontend function's return (closes both spans)"},
    {"_exit_failed", &exit_failed_probe, METH_NOARGS, "probe: the frontend function's exit by an exception (the call counts as failed)"},
    {"_ticks", &ticks, METH_NOARGS, "the host clock's raw ticks (Note [One host clock])"},
    {"_ticks_to_ns", &ticks_to_ns, METH_O, "ticks on the CLOCK_MONOTONIC ns axis"},
    {nullptr, nullptr, 0, nullptr}};

Timeline* activate(Timeline* timeline) {
  host_clock::calibrate();
  Timeline* previous = tracing::t_active;
  tracing::t_active = timeline;
  return previous;
}

const char* clock_source() {
  host_clock::calibrate();
  return host_clock::info().source.data();  // a string literal
}

EmbedApi g_embed_api{kEmbedApiVersion, &activate, &clock_source};

}  // namespace

void open_crossing_span(const char* entry) {
  const int depth = t_depth - 1;
  if (depth < 0 || depth >= kMaxDepth) return;
  Frame& f = t_frames[depth];
  if (f.timeline == nullptr || f.pybind11 >= 0 || f.timeline != tracing::active()) return;
  f.pybind11 = f.timeline->open(Layer::kPybind11, entry);
}

void close_call_spans() {
  const uint64_t end = host_clock::ticks();
  if (t_depth == 0) return;  // unbalanced (rows switched on inside a call): nothing to close
  const int depth = --t_depth;
  if (depth >= kMaxDepth) return;
  Frame& f = t_frames[depth];
  // A timeline that is no longer active (the profile ended inside the call) is not touched again.
  if (f.timeline == nullptr || f.timeline != tracing::active()) return;
  if (f.pybind11 >= 0) f.timeline->close_at(f.pybind11, end);
  f.timeline->close_at(f.python, end);
  if (f.owns_op) f.timeline->set_op(0);
  f.timeline = nullptr;
}

void add_probes(PyObject* module) {
  if (python_names().empty())
    for (const binding::BoundOperator* op : binding::all_operators()) python_names().push_back("strata." + op->schema().name);
  if (PyModule_AddFunctions(module, g_probe_methods) < 0) throw std::runtime_error("PyModule_AddFunctions failed");
  PyObject* capsule = PyCapsule_New(&g_embed_api, kEmbedApiCapsule, nullptr);
  if (capsule == nullptr || PyModule_AddObject(module, "_embed_api", capsule) < 0) {
    Py_XDECREF(capsule);
    throw std::runtime_error("cannot add strata._strata._embed_api");
  }
}

}  // namespace strata::python
