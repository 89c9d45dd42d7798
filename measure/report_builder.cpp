#include "measure/report_builder.h"

#include <cmath>
#include <cstdio>
#include <string_view>
#include <thread>
#include <vector>

#include "layers/kernels/cpu/cpu_kernels.h"
#include "lib/machine.h"
#include "lib/parallel.h"

namespace strata::measure {

using reports::BreakdownRow;
using reports::RowKind;
using reports::TraceReport;

reports::Environment host_environment() {
  const auto clock = host_clock::info();
  reports::Environment env;
  env.strata_version = STRATA_VERSION;
  env.cpu_model = cpu_model();
  env.cpu_threads = static_cast<int>(std::thread::hardware_concurrency());
  env.blas_config = kernels::cpu::blas_config();
  env.blas_threads = kernels::cpu::blas_threads();
  env.intra_op_threads = parallel::num_threads();
  env.intra_op_threads_source = parallel::num_threads_source();
  env.cpu_loops = kernels::cpu::cpu_loops();
  env.clock_source = std::string(clock.source);
  env.clock_ns_per_tick = clock.ns_per_tick;
  env.clock_read_ns = clock.read_cost_ns;
  return env;
}

std::string cpu_device_name(const reports::Environment& env) {
  return "cpu (" + std::to_string(env.intra_op_threads) + (env.intra_op_threads == 1 ? " intra-op thread, " : " intra-op threads, ") +
         env.cpu_loops + " loops, " + std::to_string(env.blas_threads) +
         (env.blas_threads == 1 ? " OpenBLAS thread)" : " OpenBLAS threads)");
}

void describe_cpu_device(TraceReport& report) {
  report.device = cpu_device_name(report.env);
  add_blas_warning(report);
}

void add_blas_warning(TraceReport& report) {
  if (std::string warning = kernels::cpu::blas_kernel_warning(); !warning.empty()) report.notes.push_back(warning);
}

std::string key_path(const Timeline& timeline, uint32_t op_id) {
  std::string path;
  for (const Span& span : timeline.spans()) {
    if (span.op_id == op_id && span.layer == Layer::kDispatch &&
        std::string_view(span.name).find(':') == std::string_view::npos)
      path += (path.empty() ? "" : " > ") + std::string(span.name);
  }
  return path;
}

void describe_wall_row(TraceReport& report, Caller caller, WallEnd end, bool sequence) {
  std::string from = caller == Caller::kPython ? "python entry" : "binding begin";
  if (sequence) from = "first " + from;
  std::string to;
  switch (end) {
    case WallEnd::kLibrary:
      to = caller == Caller::kPython ? "return" : sequence ? "last library end" : "library end";
      break;
    case WallEnd::kKernel:
      to = caller == Caller::kPython ? "return / last kernel end" : "last kernel end";
      break;
    case WallEnd::kReturn:
      to = "return";
      break;
  }
  report.describe(RowKind::kWall, "", from + " -> " + to);
}

void describe_binding_row(TraceReport& report) {
  report.describe(RowKind::kBinding, "", "schema " + report.schema.substr(0, report.schema.find(" ->")));
}

void describe_kernel_row(TraceReport& report, const std::string& key, bool all_ops) {
  report.describe(RowKind::kDispatch, key,
                  key + (all_ops ? " kernels: key set + table lookup, all ops" : " kernel: key set + table lookup"));
}

void describe_cpu_device_rows(TraceReport& report) {
  report.describe_na(RowKind::kLaunch, "n/a on the CPU: no launch, the library call computes in place");
  report.describe_na(RowKind::kQueue, "n/a on the CPU: nothing is queued");
  report.describe_na(RowKind::kGpu, "n/a on the CPU: the compute is inside the library row");
}

void describe_unrecorded_device_rows(TraceReport& report) {
  const std::string why = "not recorded: strata.profile() takes host spans only (use strata trace)";
  report.describe_na(RowKind::kLaunch, why);
  report.describe_na(RowKind::kQueue, why);
  report.describe_na(RowKind::kGpu, why);
}

void describe_python_rows(TraceReport& report) {
  std::vector<std::string> functions, entries;  // "strata.matmul"; "_strata._op"
  for (const BreakdownRow& row : report.steady.rows) {
    if (row.kind == RowKind::kPython) functions = row.names;
    if (row.kind == RowKind::kPybind11) entries = row.names;
  }
  report.describe(RowKind::kPython, "", (functions.size() == 1 ? functions[0] + "()" : std::string("the frontend")) +
                                            ": type checks, to the extension call");
  std::string what;
  for (const std::string& entry : entries) {
    if (!what.empty()) what += " + ";
    what += entry == "_strata.call" ? "pybind11 dispatch into _strata.call" : entry;
  }
  report.describe(RowKind::kPybind11, "", (what.empty() ? std::string("the extension call") : what) +
                                              ": boxing, result to Python");
}

void add_python_frontend_note(TraceReport& report) {
  report.notes.push_back("with --frontend python the wall row runs from the frontend function's first statement to "
                         "its return; 'tracing off' (and --peer's wall) is timed from C++ around the whole Python "
                         "call, so it also holds entering and leaving the interpreter and the result's conversion");
}

void add_cpp_beside_python_peer_note(TraceReport& report) {
  report.notes.push_back("strata's calls were made from C++ (--frontend cli) and torch's from Python: add "
                         "--frontend python to compare like with like");
}

void add_python_probe_note(TraceReport& report, double python_probe_ns) {
  report.notes.push_back("the python and pybind11 rows come from probes in the frontend and the extension's entry "
                         "costing about " + std::to_string(std::lround(python_probe_ns)) +
                         " ns per call together (Note [The python and pybind11 rows])");
}

std::string mark_below_resolution(reports::LayerBreakdown& breakdown, const ProbeCost& cost) {
  std::string unresolved;
  for (BreakdownRow& row : breakdown.rows) {
    const bool from_python = row.kind == RowKind::kPython || row.kind == RowKind::kPybind11;
    const double probe = from_python && cost.python_ns > 0 ? cost.python_ns : cost.zone_ns;
    row.below_resolution = row.applicable && row.ns.median < 2 * probe * cost.spans_per_row;
    if (row.below_resolution) unresolved += (unresolved.empty() ? "" : ", ") + row.id();
  }
  return unresolved;
}

void mark_rows_below_resolution(TraceReport& report, const ProbeCost& cost) {
  const std::string unresolved = mark_below_resolution(report.steady, cost);
  if (unresolved.empty()) return;
  char text[96];
  if (cost.python_ns > 0) {
    std::snprintf(text, sizeof text, "%.0f ns; a Python probe's, for python and pybind11: %.0f ns", cost.zone_ns,
                  cost.python_ns);
  } else {
    std::snprintf(text, sizeof text, "%.0f ns", cost.zone_ns);
  }
  report.notes.push_back("rows marked * (" + unresolved + ") have medians under twice the cost of one probe (" + text +
                         ")" + cost.scope +
                         ": below what the host timers resolve; read them as 'about that or less', not as measured");
}

void describe_backward_breakdown(reports::LayerBreakdown& breakdown, double zone_ns) {
  mark_below_resolution(breakdown, {.zone_ns = zone_ns, .scope = ""});
  for (BreakdownRow& row : breakdown.rows) {
    if (row.kind == RowKind::kBinding && row.ns.median <= 0) {
      // An empty row does not apply; it is not a measurement below resolution (the mark above saw a 0 median).
      row.applicable = false;
      row.below_resolution = false;
      row.na_reason = "n/a: the engine calls each operator's typed entry point (as PyTorch's calls at::mm), no boxing";
    }
    if (row.kind == RowKind::kDispatch && row.key == "Autograd") row.what = "Autograd: record SumBackward, redispatch";
    if (row.kind == RowKind::kDispatch && row.key == "engine") row.what = "engine: walk, buffers, accumulate, free";
  }
}

}  // namespace strata::measure
