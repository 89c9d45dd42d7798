// The sequence's section of `strata trace`: op log, per-step table, totals and verdict, from
// SequenceFigures (reports/model/sequence.h). It formats; it computes nothing beyond per-step row medians.
#include "reports/formats/sequence_table.h"

#include <algorithm>
#include <cstdio>

#include "reports/model/units.h"
#include "reports/model/report.h"

namespace strata::reports {

void print_sequence_table(const SequenceFigures& f, std::ostream& out, const std::string& what) {
  size_t name_width = 11;
  for (const SequenceStepFigures& s : f.per_step) name_width = std::max(name_width, s.op.size() + 2);
  // Columns as wide as their longest cell plus two spaces: autocast's keys ("to_copy:Autograd > ...") run
  // past any fixed width, and a cell must never touch the next one.
  size_t description_width = 30, keys_width = 20, keys_width_steps = 28;
  for (const SequenceStepFigures& s : f.per_step) {
    description_width = std::max(description_width, s.description.size() + 2);
    keys_width = std::max(keys_width, s.keys.size() + 2);
    keys_width_steps = std::max(keys_width_steps, s.keys.size() + 2);
  }
  size_t calls = 0;
  for (const SequenceStepFigures& s : f.per_step) calls += s.backend_calls;
  if (what == "forward") {
    out << "op log (one forward, " << f.steps << " ops, as dispatched):\n";
  } else {
    out << "op log (one " << what << ", " << f.steps << " steps, " << calls << " kernel calls, as dispatched):\n";
  }
  for (size_t j = 0; j < f.per_step.size(); ++j) {
    const SequenceStepFigures& s = f.per_step[j];
    char num[32];
    std::snprintf(num, sizeof num, "%4zu  ", j + 1);
    if (what == "forward") {
      out << num << pad(s.op, std::max<size_t>(8, s.op.size() + 2)) << pad(s.description, description_width)
          << pad(s.keys, keys_width) << s.backend << "\n";
    } else {
      out << num << pad(s.op, name_width) << pad(std::to_string(s.backend_calls) + (s.backend_calls == 1 ? " call" : " calls"), 10) << pad(s.keys, keys_width_steps) << s.backend
          << "\n";
    }
  }
  // One line per step: the medians of its rows (host rows summed: dispatch is every key).
  const bool gpu = f.on_gpu;
  out << pad("per " + std::string(what == "forward" ? "op" : "step") + " (median)", name_width + 6) << lpad("binding", 10) << lpad("dispatch", 10) << lpad("library", 11);
  if (gpu) out << lpad("launch", 10) << lpad("queue", 10) << lpad("gpu", 10);
  out << lpad("wall", 11) << "\n";
  // The median of the step's rows of `kind` summed per call (dispatch: every key).
  auto row_median = [](const LayerBreakdown& b, RowKind kind) {
    std::vector<double> sum(b.calls, 0);
    for (const BreakdownRow& r : b.rows)
      if (r.kind == kind && r.applicable)
        for (size_t i = 0; i < sum.size() && i < r.ns.samples.size(); ++i) sum[i] += r.ns.samples[i];
    return Distribution::of(std::move(sum)).median;
  };
  // Marked as in the breakdown table: a median under twice one probe's cost is below what the timers resolve.
  // A layer the step never entered (a backward node has no binding) is "-", not a measured zero.
  auto cell = [&](double ns, size_t width, bool entered = true) {
    return lpad(entered ? format_ns(ns) + (ns < 2 * f.probe_ns ? "*" : "") : "-", width);
  };
  auto entered = [](const LayerBreakdown& b, RowKind kind) {
    for (const BreakdownRow& r : b.rows)
      if (r.kind == kind && r.applicable && (!r.names.empty() || r.kind == RowKind::kDispatch)) return true;
    return false;
  };
  for (size_t j = 0; j < f.per_step.size(); ++j) {
    const LayerBreakdown& b = f.per_step[j].breakdown;
    char num[32];
    std::snprintf(num, sizeof num, "%4zu  ", j + 1);
    out << num << pad(f.per_step[j].op, name_width) << cell(row_median(b, RowKind::kBinding), 10, entered(b, RowKind::kBinding))
        << cell(row_median(b, RowKind::kDispatch), 10) << cell(row_median(b, RowKind::kLibrary), 11, entered(b, RowKind::kLibrary));
    if (gpu) {
      out << cell(row_median(b, RowKind::kLaunch), 10) << lpad(format_ns(row_median(b, RowKind::kQueue)), 10)
          << lpad(format_ns(row_median(b, RowKind::kGpu)), 10);
    }
    out << lpad(format_ns(b.wall.median), 11) << "\n";
  }
  out << what << ": " << format_ns(f.forward_wall.median) << " median wall (p90 " << format_ns(f.forward_wall.p90)
      << ") = host tax " << format_ns(f.host_tax.median) << " + compute " << format_ns(f.compute.median);
  if (gpu) {
    out << " (kernels, overlapping the host); GPU idle between kernels " << format_ns(f.kernel_idle.median);
  } else {
    out << " + outside the zones " << format_ns(f.outside.median) << " (all medians)";
  }
  out << "\n";
  out << what << " profile: " << f.verdict << ": " << f.verdict_reason << "\n";
}

}  // namespace strata::reports
