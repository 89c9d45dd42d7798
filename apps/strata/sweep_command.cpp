// `strata sweep`: the same op at many sizes, each measured as `strata trace` measures one (and, with
// --compare, as `strata compare` does), then where host overhead stops mattering. See docs/sweep.md.
//
// Each size (and its --compare rounds) traces into a timeline of its own, under op ids no other size
// uses, and the device session is finished once, at the end: CUPTI allows one profiling session per
// process (docs/design.md), so finishing per size would leave every size after the first without GPU records.
// The device records are then handed to each timeline, only those of its own op ids. Separate timelines
// because the breakdown reads the whole timeline for every call it is asked about: one timeline for the
// whole sweep made --compare quadratic in the number of sizes (minutes for 13 relu sizes).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <unordered_set>
#include <unistd.h>

#include "apps/strata/ceiling.h"
#include "apps/strata/command_output.h"
#include "apps/strata/commands.h"
#include "apps/strata/sweep_range.h"
#include "lib/error.h"
#include "lib/output_file.h"
#include "lib/zone.h"
#include "measure/device_session.h"
#include "measure/harness.h"
#include "reports/formats/sweep_formats.h"
#include "reports/model/sweep.h"
#include "reports/formats/sweep_plot.h"

namespace strata::app {
namespace {

// Progress on stderr, only when a person is watching: sizes done, the one being measured, time left.
class SweepProgress {
 public:
  explicit SweepProgress(size_t total) : total_(total), enabled_(isatty(STDERR_FILENO) != 0) {}
  void at(size_t done, const std::string& current, double elapsed_s, double left_s) {
    if (!enabled_) return;
    char buf[200];
    if (done == 0) std::snprintf(buf, sizeof buf, "  sweep: 0/%zu sizes, measuring %s", total_, current.c_str());
    else std::snprintf(buf, sizeof buf, "  sweep: %zu/%zu sizes in %.0f s, measuring %s, about %.0f s left", done,
                       total_, elapsed_s, current.c_str(), left_s);
    std::fprintf(stderr, "\r%-90s", buf);
    shown_ = true;
  }
  ~SweepProgress() {
    if (shown_) std::fprintf(stderr, "\r%90s\r", "");
  }

 private:
  size_t total_;
  bool enabled_;
  bool shown_ = false;
};

struct Measured {  // what one size left behind, to be read after finish()
  Timeline timeline, compare_timeline;
  std::vector<uint32_t> timed_ids;
  std::optional<CompareRounds> rounds;
  uint32_t first_id = 0, last_id = 0;  // the op ids this size used
};

// The device records of the ops numbered first..last: the external correlations that name them, and the
// API calls, kernels and copies those correlations lead to (a graph's replayed kernels carry the id of
// the graph launch, which is among them).
DeviceTrace records_of(const DeviceTrace& all, uint32_t first, uint32_t last) {
  DeviceTrace d;
  d.enabled = all.enabled;
  d.unavailable_reason = all.unavailable_reason;
  d.dropped_records = all.dropped_records;
  d.untimed_records = all.untimed_records;
  d.overhead = all.overhead;
  std::unordered_set<uint32_t> corr;
  for (const ExternalCorrelation& e : all.external) {
    if (e.external_id >= first && e.external_id <= last) {
      d.external.push_back(e);
      corr.insert(e.correlation_id);
    }
  }
  for (const ApiCallRecord& a : all.api_calls)
    if (corr.count(a.correlation_id)) d.api_calls.push_back(a);
  for (const KernelRecord& k : all.kernels)
    if (corr.count(k.correlation_id)) d.kernels.push_back(k);
  for (const MemoryRecord& m : all.memory)
    if (corr.count(m.correlation_id)) d.memory.push_back(m);
  for (const GraphNodeOrigin& g : all.graph_nodes)
    if (g.op_id >= first && g.op_id <= last) d.graph_nodes.push_back(g);
  return d;
}

void check_outputs(const SweepOptions& options) {
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!options.trace.json_path.empty()) outputs.push_back({"--json", options.trace.json_path});
  if (!options.csv_path.empty()) outputs.push_back({"--csv", options.csv_path});
  if (!options.plot_path.empty()) outputs.push_back({"--plot", options.plot_path});
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_output_path(outputs[i].second);
    for (size_t j = 0; j < i; ++j) {
      if (same_output_file(outputs[i].second, outputs[j].second)) {
        throw UsageError(outputs[j].first + " and " + outputs[i].first + " name the same file '" + outputs[i].second + "'");
      }
    }
  }
}

// Everything typed is checked before any tensor exists: the range, every size's spec, the options.
std::vector<frontend::OpSpec> check_sweep_options(const SweepOptions& options, const SweepSizes& sizes) {
  std::vector<frontend::OpSpec> specs;
  for (size_t i = 0; i < sizes.values.size(); ++i)
    specs.push_back(frontend::parse_op_spec(options.trace.op, sizes.spec(i), options.trace.conv));
  if (!(options.sweep_budget_s > 0 && options.sweep_budget_s <= 86400)) {
    std::ostringstream got;
    got << options.sweep_budget_s;  // as --budget's message writes it ("1e+308"), not std::to_string's 309 digits
    throw UsageError("--sweep-budget must be more than 0 and at most 86400 seconds, got " + got.str());
  }
  if (options.trace.repeat && options.sweep_budget_given) {
    throw UsageError("--sweep-budget shares time among the sizes when --repeat is not given; with --repeat " +
                     std::to_string(*options.trace.repeat) + " every size runs exactly that many calls and it would be "
                     "ignored: give one of them");
  }
  check_ops_per_graph(options.ops_per_graph);
  if (options.ops_per_graph_given && !options.compare) {
    throw UsageError("--ops-per-graph " + std::to_string(options.ops_per_graph) + " sizes the replay of --compare, and "
                     "this sweep replays nothing: add --compare, or leave --ops-per-graph out");
  }
  check_outputs(options);
  return specs;
}

// Sizes that would not fit are refused now, not after minutes of measuring the ones that do.
void check_sizes_fit(const SweepOptions& options, const SweepSizes& sizes, const std::vector<frontend::OpSpec>& specs,
                     const Prepared& prepared) {
  const size_t available = measure::available_bytes(prepared.choice.device);
  // Each size's peak as prepare_call will check it (Note [Peak bytes of a call]).
  auto peak = [&](size_t i) { return frontend::peak_bytes(specs[i], prepared.dtype, prepared.compute_dtype(), prepared.choice.device); };
  for (size_t i = 0; i < specs.size(); ++i) {
    const size_t need = peak(i);
    if (need <= available) continue;
    // Sizes ascend, and so does the memory they need: the one before is the largest that fits.
    const std::string largest = i == 0 ? "none (not even the smallest)"
                                       : std::to_string(sizes.values[i - 1]) + " (" + format_bytes(double(peak(i - 1))) + ")";
    throw UsageError(options.trace.op + " " + sizes.spec(i) + " needs " + format_bytes(double(need)) + " on " +
                     prepared.choice.device.str() + ", more than the " + format_bytes(double(available)) +
                     " available; the largest size of this range that fits is " + largest + ": end the range there");
  }
}

// What the whole sweep measures every size against, before the first size: the ceiling the achieved rates
// are set against is measured on the CPU now, before the sweep (and outside its budget): a large GEMM through
// the same BLAS, or a streaming copy for memory-bound ops. A GPU gets the datasheet peak after finish()
// (describe_sweep_device): nothing is measured there.
reports::SweepReport start_sweep_report(const SweepOptions& options, const SweepSizes& sizes, const Prepared& prepared) {
  reports::SweepReport report;
  report.op = prepared.spec.op;
  report.pattern = options.trace.spec;
  report.swept = sizes.swept();
  const bool on_gpu = prepared.choice.device.is_cuda();
  report.compute_row = on_gpu ? "gpu" : "library";
  report.budget_s = options.trace.budget_s;
  report.probe_ns = measure_zone_cost_ns();
  report.ops_per_replay = options.compare ? options.ops_per_graph : 0;
  if (!on_gpu) {
    if (isatty(STDERR_FILENO) != 0) std::fprintf(stderr, "\r  sweep: measuring the ceiling");
    report.ceiling = measure_cpu_ceiling(prepared.call.bytes_moved > 0, prepared.compute_dtype());
  }
  return report;
}

// Every size's timelines and op ids, what each size's call was, and how long the sizes took.
struct SweepRun {
  std::vector<Measured> measured;
  std::vector<std::string> descriptions;
  std::vector<std::pair<double, double>> work;  // flops, bytes moved per size
  std::string replay_kind;
  uint64_t start = 0;  // host clock ticks at the first size
};

// One size: the harness as trace runs it, then with --compare the eager and replayed rounds.
void measure_size(const SweepOptions& options, Prepared& prepared, double budget, uint32_t& next_id, Measured& m,
                  std::string& replay_kind) {
  measure::HarnessOptions h;
  h.warmup = options.trace.warmup;
  h.repeat = options.trace.repeat.value_or(0);
  h.budget_s = options.compare ? budget / 2 : budget;
  if (!options.trace.repeat) h.stop_after_s = 2 * h.budget_s;  // an explicit --repeat is run in full
  h.first_op_id = next_id;
  m.first_id = next_id;
  measure::HarnessResult run = measure::run_harness(prepared.call, h, m.timeline, *prepared.session);
  next_id = run.timed_ids.back() + 1;
  m.timed_ids = std::move(run.timed_ids);
  run.last_result = binding::IValue();
  if (options.compare) {
    CompareOptions c;
    c.trace = options.trace;
    c.trace.budget_s = budget / 2;
    c.ops_per_graph = options.ops_per_graph;
    m.rounds = run_compare_rounds(prepared, c, m.compare_timeline, next_id);
    m.rounds->eager_out = binding::IValue();
    if (replay_kind.empty()) replay_kind = m.rounds->replay->kind();
    m.rounds->replay.reset();  // a replay holds its outputs (on a GPU, K of them)
  }
  m.last_id = next_id - 1;
}

SweepRun measure_sizes(const SweepOptions& options, const SweepSizes& sizes, const std::vector<frontend::OpSpec>& specs,
                       Prepared& prepared) {
  SweepRun run;
  run.measured.resize(sizes.values.size());
  uint32_t next_id = 1;
  SweepProgress progress(sizes.values.size());
  run.start = host_clock::ticks();
  double last_size_s = 0;
  for (size_t i = 0; i < sizes.values.size(); ++i) {
    measure::stop_if_interrupted();
    const double elapsed_s = host_clock::elapsed_ns(run.start) * 1e-9;
    const size_t left = sizes.values.size() - i;
    // Per size: --budget, or the share of what is left of --sweep-budget if that is smaller. Each size
    // still runs at least the harness's minimum of calls, so the sweep budget is a target, not a wall.
    const double budget = std::max(0.01, std::min(options.trace.budget_s, (options.sweep_budget_s - elapsed_s) / double(left)));
    // Sizes grow, and so does their time once the minimum of calls outlasts the budget: the last size's
    // time (or the budget, if more) times the sizes left, rather than the mean so far.
    progress.at(i, sizes.spec(i), elapsed_s, std::max(budget, last_size_s) * double(left));
    const uint64_t size_start = host_clock::ticks();
    if (i > 0) {
      prepared.call = frontend::PreparedCall();  // the previous size's tensors go before the next ones are made
      prepared.spec = specs[i];
      prepared.call = frontend::prepare_call(prepared.spec, prepared.dtype, prepared.choice.device, options.trace.seed, options.trace.requires_grad,
                                      measure::available_bytes(prepared.choice.device), prepared.compute_dtype());
    }
    run.descriptions.push_back(prepared.call.description);
    run.work.push_back({prepared.call.flops, prepared.call.bytes_moved});
    measure_size(options, prepared, budget, next_id, run.measured[i], run.replay_kind);
    last_size_s = host_clock::elapsed_ns(size_start) * 1e-9;
  }
  return run;
}

// After finish(): a GPU session's description (device name, CUPTI notes) is complete only then. The GPU's
// ceiling is its datasheet peak, labelled as such.
void describe_sweep_device(reports::SweepReport& report, const Prepared& prepared, const TraceOptions& first) {
  reports::TraceReport ctx = describe_context(prepared, first);
  prepared.session->describe(ctx);
  report.dtype = ctx.dtype;
  report.device = ctx.device;
  report.device_reason = ctx.device_reason;
  report.notes = ctx.notes;
  if (!prepared.choice.device.is_cuda()) return;
  if (prepared.call.bytes_moved > 0) {
    report.ceiling.how = "no bandwidth ceiling on a GPU: nothing measured, and reports/peak_table has no "
                         "datasheet bandwidth";
  } else if (ctx.peak_flops > 0) {
    report.ceiling.rate = ctx.peak_flops;
    report.ceiling.how = ctx.peak_source;
  } else {
    report.ceiling.how = ctx.peak_source.empty() ? "no datasheet peak for this device" : ctx.peak_source;
  }
}

// The first size's key path and the rows that make up host overhead, as the table's header says them.
void describe_sweep_rows(reports::SweepReport& report, const reports::LayerBreakdown& steady, const Prepared& prepared) {
  std::string keys, host;
  for (const reports::BreakdownRow& row : steady.rows) {
    const std::string kind = reports::row_kind_name(row.kind);
    // Calls made by a wrapper kernel ("to_copy:CPU") have rows but are not on the op's key path.
    if (row.kind == reports::RowKind::kDispatch && row.key.find(':') == std::string::npos)
      keys += (keys.empty() ? "" : " > ") + row.key;
    if (row.applicable && kind != report.compute_row && row.kind != reports::RowKind::kQueue &&
        host.find(kind) == std::string::npos)
      host += (host.empty() ? "" : " + ") + kind;
  }
  describe_autocast_fallthrough(prepared, keys, report.notes);
  report.keys = keys;
  report.host_rows = host;
}

void add_sweep_points(reports::SweepReport& report, const SweepRun& run, const SweepSizes& sizes, const Prepared& prepared,
                      int64_t ops_per_graph) {
  report.replay_kind = run.replay_kind;
  for (size_t i = 0; i < sizes.values.size(); ++i) {
    const Measured& m = run.measured[i];
    const reports::LayerBreakdown steady = reports::compute_breakdown(m.timeline, m.timed_ids);
    reports::SweepPoint point = reports::sweep_point(sizes.values[i], sizes.spec(i), run.descriptions[i],
                                                     run.work[i].first, run.work[i].second, steady, report.compute_row);
    if (m.rounds) {
      const CompareRounds& r = *m.rounds;
      point.eager = reports::mode_figures("eager", m.compare_timeline, r.eager_ids, r.eager_wall, ops_per_graph);
      point.replay =
          reports::mode_figures(report.replay_kind, m.compare_timeline, r.replay_ids, r.replay_wall, ops_per_graph);
    }
    if (i == 0) describe_sweep_rows(report, steady, prepared);
    report.points.push_back(std::move(point));
  }
}

// A size beat the ceiling: the first measurement may have shared the cores with another process (it is a
// few calls, a fraction of a second). Measured once more, after the sweep, and the better kept. Not for
// memory-bound sizes whose data fits in the caches (less than the copy moves): they beat a copy larger
// than the caches by design.
void remeasure_cpu_ceiling(reports::SweepReport& report, const Prepared& prepared) {
  const bool memory_bound = prepared.call.bytes_moved > 0;
  const double cache_free_bytes = 2.0 * double(CeilingOptions{}.copy_bytes);
  if (!std::any_of(report.points.begin(), report.points.end(), [&](const reports::SweepPoint& pt) {
        return report.ceiling_share(pt) > 1 && (!memory_bound || pt.bytes_moved >= cache_free_bytes);
      }))
    return;
  const reports::Ceiling again = measure_cpu_ceiling(memory_bound, prepared.compute_dtype());
  const double spent = report.ceiling.spent_ns + again.spent_ns;
  if (again.rate > report.ceiling.rate) report.ceiling = again;
  report.ceiling.spent_ns = spent;
  report.ceiling.how += "; measured again after the sweep, because a size beat it, and the better of the two kept";
}

// Above 100%: a memory-bound size whose data fits in the caches (the copy is larger than them), or a GEMM
// that ran faster than the best of the ceiling's few calls (noise, or a size BLAS likes better).
void add_ceiling_notes(reports::SweepReport& report, bool memory_bound) {
  std::string above;
  for (const reports::SweepPoint& pt : report.points)
    if (report.ceiling_share(pt) > 1) above += (above.empty() ? "" : ", ") + std::to_string(pt.size);
  if (above.empty()) return;
  report.notes.push_back("above 100% of the ceiling at " + report.swept + " = " + above +
                         (memory_bound ? ": the ceiling is a copy larger than the caches, and these sizes' data fits in them"
                                       : ": faster than the ceiling's best call (run-to-run noise, or a size the BLAS "
                                         "kernels suit better)"));
}

// As in trace: a signal that arrived after the last size still means "no report".
int write_sweep_outputs(const reports::SweepReport& report, const SweepOptions& options) {
  measure::stop_if_interrupted();
  reports::print_sweep_table(report, std::cout);
  std::cout.flush();
  const std::pair<const std::string*, std::string (*)(const reports::SweepReport&)> files[] = {
      {&options.trace.json_path, &reports::sweep_json}, {&options.csv_path, &reports::sweep_csv}, {&options.plot_path, &reports::sweep_svg}};
  for (const auto& [path, render] : files) {
    if (path->empty()) continue;
    measure::stop_if_interrupted();
    write_output_file(*path, render(report), std::cout, std::cerr);
  }
  return 0;
}

}  // namespace

int run_sweep(const SweepOptions& options) {
  const SweepSizes sizes = parse_sweep_range(options.trace.spec);
  const std::vector<frontend::OpSpec> specs = check_sweep_options(options, sizes);
  // The smallest size opens the device session (and checks dtype, device, budget as trace does).
  TraceOptions first = options.trace;
  first.spec = sizes.spec(0);
  first.json_path.clear();  // checked above, written at the end
  Prepared prepared = prepare_trace(first);
  check_sizes_fit(options, sizes, specs, prepared);

  reports::SweepReport report = start_sweep_report(options, sizes, prepared);
  SweepRun run = measure_sizes(options, sizes, specs, prepared);
  Timeline device_timeline(16);
  prepared.session->finish(device_timeline);
  for (Measured& m : run.measured) {
    m.timeline.device = records_of(device_timeline.device, m.first_id, m.last_id);
    if (m.rounds) m.compare_timeline.device = m.timeline.device;
  }
  report.elapsed_s = host_clock::elapsed_ns(run.start) * 1e-9;
  describe_sweep_device(report, prepared, first);
  add_sweep_points(report, run, sizes, prepared, options.ops_per_graph);

  const bool on_gpu = prepared.choice.device.is_cuda();
  if (!on_gpu) {
    report.notes.push_back("on the CPU the library row is the compute; it includes the BLAS routine's own host work "
                           "and the output allocation, which cannot be timed apart from it");
    remeasure_cpu_ceiling(report, prepared);
  }
  add_ceiling_notes(report, prepared.call.bytes_moved > 0);
  if (on_gpu && !device_timeline.device.enabled) {
    report.notes.push_back("GPU timing unavailable (" + device_timeline.device.unavailable_reason +
                           "): no gpu row, so compute and host shares are not measured");
  }
  return write_sweep_outputs(report, options);
}

}  // namespace strata::app
