// The python and pybind11 rows: probes the Python frontend calls, and what an embedder needs to record
// them into its own timeline.
//
// Note [The python and pybind11 rows]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A call from Python passes two layers before the binding zone opens: the frontend function in
// strata/_ops.py (type checks, the fast path) and the crossing into the extension (one of two entries,
// Note [Two entries into the extension] in crossing.cpp: _strata._op or pybind11's dispatcher into
// _strata.call; each value boxed into an IValue; on the way back the result becomes a Python object).
// Both are measured per call, on the one host clock (Note [One host clock]), by probes that are plain
// CPython functions of the extension (METH_O / METH_NOARGS, not pybind11 defs: a pybind11 def costs ~100
// ns more per call) or, on the hot entry, the entry's own first and last statements:
//
//   _enter(i)   first statement of the frontend function: opens a Layer::kPython span named
//               "strata.<op>" (i = the operator's index in binding::all_operators())
//   (crossing)  where the call enters the extension: opens a Layer::kPybind11 span as the python
//               span's child; the binding zone then opens as ITS child. The hot entry opens it itself,
//               as its first statement, when the frontend passes the operator's index as ~index
//               ("_strata._op": one probe call fewer per call); before the general entry the frontend
//               calls _cross_call() ("_strata.call": pybind11's dispatcher runs before any code of
//               ours). _cross() opens an "_strata._op" span from Python, for a caller of _op that
//               passes a plain index and closes with _exit().
//   _exit()     closes both spans with one clock read and ends the call: called by the frontend after
//               the general entry returns; the hot entry does the same itself as it returns its
//               result (one probe call fewer again), so a fully typed call costs two probe calls
//               (_enter, _exit's work inside _op) and three clock reads
//   _exit_failed()  what _exit does, for a call that raised: the profile that numbered the call counts
//               it as failed, and leaves it out of every figure (a failed call's time is not the op's)
//
// So the python row = _enter -> the crossing's open (self time of the python span: the type checks and
// CPython's call of the entry up to its first statement), the pybind11 row = the crossing's open ->
// binding zone begin plus binding zone end -> the close (the return path: IValue -> Python object). The
// frontend calls the probes only while strata._ops._rows_on is true (one global load per call
// otherwise): strata.profile() sets it, and so can an embedder (strata._ops.set_rows(True)).
//
// The probes record into tracing::active() of THIS extension (the static strata libraries inside
// _strata.so are its own copies, with their own thread_local active timeline). With no active timeline
// they do nothing. Op ids: when the active timeline has no op id set (timeline.op() == 0) and a
// strata.profile() is recording, _enter numbers the call itself; when the caller has set one (an
// embedding harness calling set_op(id) before each call), the spans join that id.
//
// An embedder (a binary that embeds the interpreter and owns a Timeline) activates its own timeline in
// the extension through the capsule strata._strata._embed_api (EmbedApi below).
#pragma once

#include <cstdint>

#include "lib/timeline.h"

namespace strata::python {

// The capsule's contents; the capsule is named kEmbedApiCapsule. Check `version` first.
struct EmbedApi {
  uint32_t version;  // kEmbedApiVersion
  // Makes `timeline` (nullptr: none) the active timeline of the calling thread inside the extension and
  // calibrates the extension's copy of the host clock; returns the previous one. The embedder keeps the
  // timeline alive while it is active and sets op ids on it directly (Timeline::set_op is inline).
  Timeline* (*activate)(Timeline* timeline);
  // The extension's clock source ("tsc" or "steady_clock"). Spans hold raw ticks: an embedder must check
  // that its own host_clock::info().source is the same before reading the extension's spans with its
  // own ticks_to_ns (both calibrate against CLOCK_MONOTONIC, so equal sources give one axis).
  const char* (*clock_source)();
};
inline constexpr uint32_t kEmbedApiVersion = 1;
inline constexpr const char* kEmbedApiCapsule = "strata._strata._embed_api";

// Opens the pybind11 span named `entry` for the frontend call in progress on this thread, if its
// python span is recording and no crossing span is open yet (the probes' bookkeeping, probes.cpp).
void open_crossing_span(const char* entry);
// What _exit does: closes the spans of the frontend call in progress on this thread with one clock read
// and ends the call (the hot entry calls it as it returns a result; see the Note).
void close_call_spans();

}  // namespace strata::python
