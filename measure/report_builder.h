// The report builder: the one owner of a trace report's words. Every front end that measures calls
// (the strata program's trace, mlp and program commands, and strata.profile() in the Python package) fills
// its reports::TraceReport through these functions, so the same inputs give the same rows and notes in
// the CLI table, its JSON and Python's table. No Python type here: apps/python calls it from C++.
//
// Note [One report builder]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A row's words (what it spans, why it does not apply), the resolution marks and the note that names the
// marked rows, and the machine's Environment are written here, once. A front end decides which of them
// apply (it knows whether calls came from Python, whether the device left records) and says so through the
// arguments; it writes no row words of its own. A new front end calls the same functions and prints what
// the others print.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "lib/timeline.h"
#include "reports/model/report.h"

namespace strata::measure {

// The machine a run measured on: strata's version, the CPU, the BLAS and the host clock. The device
// session adds the GPU's properties (env.device) when one was used.
reports::Environment host_environment();

// "cpu (8 intra-op threads, AVX-512 + SLEEF loops, 8 OpenBLAS threads)": how a report names the CPU as the
// device, from the Environment.
std::string cpu_device_name(const reports::Environment& env);

// The words a report carries when the CPU computed the call: the device's name (cpu_device_name) and the
// BLAS warning (add_blas_warning).
void describe_cpu_device(reports::TraceReport& report);
// When the BLAS runs a kernel that is not tuned for this CPU, the note that says so.
void add_blas_warning(reports::TraceReport& report);

// The dispatch key path one call took, from the spans of `op_id` ("Autograd > CPU"). Calls a wrapper
// kernel made (Autocast's casts, "to_copy:CPU") have rows of their own but are not on the op's path
// (Note [Calls made by a wrapper kernel]).
std::string key_path(const Timeline& timeline, uint32_t op_id);

// How the calls of a report were made: from C++ (strata trace), or through strata's Python frontend
// (--frontend python, strata.profile()).
enum class Caller { kCpp, kPython };

// What the wall row spans, worded once for every front end: from the binding (C++) or the Python
// function's entry, to the library's end (the CPU), the last kernel's end (a GPU whose records were
// taken), or the return (host spans only). `sequence`: the first op's entry to the last op's end.
enum class WallEnd { kLibrary, kKernel, kReturn };
void describe_wall_row(reports::TraceReport& report, Caller caller, WallEnd end, bool sequence = false);

// The binding row of one operator's call: "schema matmul(Tensor self, Tensor other)".
void describe_binding_row(reports::TraceReport& report);

// A backend key's dispatch row: "CPU kernel: key set + table lookup" (`all_ops`: a sequence's row sums
// every op's).
void describe_kernel_row(reports::TraceReport& report, const std::string& key, bool all_ops = false);

// The launch, queue and gpu rows of a call on the CPU, worded once for every front end.
void describe_cpu_device_rows(reports::TraceReport& report);

// The launch, queue and gpu rows when calls ran on a GPU but only host spans were taken (strata.profile()).
void describe_unrecorded_device_rows(reports::TraceReport& report);

// Words for the python and pybind11 rows of a call made from Python (strata.profile(), --frontend
// python): the pybind11 row is worded by the entry its spans name (Note [Two entries into the
// extension] in apps/python/crossing.cpp), "_strata._op" or "_strata.call".
void describe_python_rows(reports::TraceReport& report);

// The note for --frontend python: where its wall row and its 'tracing off' figure start and end.
void add_python_frontend_note(reports::TraceReport& report);

// The note for --peer torch when strata's calls were made from C++: torch's are made from Python, so the
// two walls differ by the crossing (trace and compare).
void add_cpp_beside_python_peer_note(reports::TraceReport& report);

// The note for strata.profile(): what its Python-side probes cost per call.
void add_python_probe_note(reports::TraceReport& report, double python_probe_ns);

// Note [Rows below resolution]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A row whose median is under twice the cost of the probes that read it is mostly the instrument: it is
// marked (a '*' in the table, "below_resolution" in the JSON) and one note under the table names the rows
// and the probe's cost. Every front end (trace, mlp and programs, --backward's rows, strata.profile())
// marks and words them here, so the rule and its words live in one place.
struct ProbeCost {
  double zone_ns = 0;         // one host zone's open + close (measure_zone_cost_ns)
  double python_ns = 0;       // one Python-side probe span, for the python and pybind11 rows; 0: none
  double spans_per_row = 1;   // a sequence's row sums one span per op of the forward
  std::string scope;          // words after the cost: " per op of the forward"
};
// Marks the report's steady rows and adds the note naming them (none when no row is marked).
void mark_rows_below_resolution(reports::TraceReport& report, const ProbeCost& cost);
// Marks the rows of one breakdown (a backward node's) and returns their ids, "binding, dispatch CPU".
std::string mark_below_resolution(reports::LayerBreakdown& breakdown, const ProbeCost& cost);

// The rows of --backward (the seed's and each node's): the binding row is n/a (the engine calls typed
// entry points), the Autograd and engine rows say what they did, and the rows below resolution are marked
// against one zone's cost, as the forward's are.
void describe_backward_breakdown(reports::LayerBreakdown& breakdown, double zone_ns);

}  // namespace strata::measure
