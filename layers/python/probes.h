// The python and pybind11 rows: probes the Python frontend calls, and what an embedder needs to record
// them into its own timeline.
//
// Note [The python and pybind11 rows]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A call from Python passes two layers before the binding zone opens: the frontend function in
// strata/_ops.py (type checks, the fast path, building the argument tuple) and the pybind11 crossing
// (pybind11's dispatcher: overload resolution, loading `name`, `args`, `kwargs`, boxing each value into
// an IValue; on the way back the result becomes a Python object). Both are measured per call, on the one
// host clock (Note [One host clock]), by three probes that are plain CPython functions of the extension
// (METH_O / METH_NOARGS, not pybind11 defs: a pybind11 def costs ~200 ns more per call):
//
//   _enter(i)   first statement of the frontend function: opens a Layer::kPython span named
//               "strata.<op>" (i = the operator's index in binding::all_operators())
//   _cross()    the statement before the extension call: opens a Layer::kPybind11 span "_strata.call"
//               as the python span's child; the binding zone then opens as ITS child
//   _exit()     in the frontend's `finally`: closes both spans with one clock read
//
// So the python row = _enter -> _cross (self time of the python span), the pybind11 row = _cross ->
// binding zone begin plus binding zone end -> _exit (the return path: IValue -> Python object). The
// frontend calls the probes only while strata._ops._rows_on is true (one module attribute load per
// call otherwise): strata.profile() sets it, and so can an embedder (strata._ops.set_rows(True)).
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

}  // namespace strata::python
