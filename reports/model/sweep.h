// Role: model.
// `strata sweep`: one op measured at many sizes, as named figures (SweepPoint per size), and
// the crossovers computed from them. Its views are reports/formats/sweep_formats.h (table, JSON, CSV) and
// reports/formats/sweep_plot.h (SVG). Measuring is separate from printing: apps/strata/sweep_command.cpp fills
// SweepReport, nothing here runs an op.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/model/breakdown.h"
#include "reports/model/comparison.h"
#include "reports/model/figures.h"

namespace strata::reports {

// One breakdown row at one size ("binding", "dispatch/Autograd", "library", ...), in ns.
struct SweepRow {
  std::string name;
  double median = 0, p90 = 0;
};

struct SweepPoint {
  int64_t size = 0;          // the swept dimension's value
  std::string spec;          // the full spec measured ("32x768x256")
  std::string description;   // "[1024x1024] @ [1024x1024]"
  double flops = 0, bytes_moved = 0;  // of one call
  std::vector<SweepRow> rows;  // applicable rows only
  Distribution wall;           // per call
  double host_ns = 0, host_p90 = 0;      // median / p90 over calls of (everything but the compute, queue)
  double compute_ns = 0, compute_p90 = 0;
  double host_share = 0;     // median over calls of host / wall, 0..1
  double compute_share = 0;  // median over calls of compute / wall
  size_t calls = 0;
  // --compare: eager and replay per op (rounds of K), and the run-to-run noise of both.
  std::optional<ModeFigures> eager, replay;
  double speedup() const { return eager && replay && replay->wall > 0 ? eager->wall / replay->wall : 0; }
  // Relative spread of the walls, (p90 - median) / median, the larger of the two modes: a speed-up
  // smaller than 1 + noise is not distinguishable from run-to-run variation.
  double noise() const;
  double rate() const;  // FLOP/s, or bytes/s for memory-bound ops, from the median wall
};

// What the achieved rates are set against: the best rate this machine reached on a large problem of the
// same kind in the same run (a square GEMM through the same BLAS for FLOP-bound ops, a streaming copy
// for memory-bound ones), or, where nothing was measured (a GPU), the datasheet peak, labelled as such.
struct Ceiling {
  double rate = 0;        // FLOP/s or bytes/s (the sweep's rate unit); 0 when there is none
  bool measured = false;  // true: measured in this run; false: a datasheet figure (or none)
  std::string how;        // in words: what was run and how, or where the datasheet figure comes from
  double spent_ns = 0;    // what measuring it took (0 for a datasheet figure)
};

// rate / ceiling, or 0 when either is not positive (no ceiling, nothing achieved): never a division by 0.
double ceiling_share(double rate, double ceiling);

// Figures of one size from the breakdown of its timed calls. `compute_row` is "library" on the CPU
// and "gpu" on a GPU; host overhead is every other applicable row except "queue" (waiting, not work).
SweepPoint sweep_point(int64_t size, const std::string& spec, const std::string& description, double flops,
                       double bytes_moved, const LayerBreakdown& steady, const std::string& compute_row);

// Where a measured curve y(x) falls below a threshold and stays there: "the size above which ...".
// Interpolated between the two measured sizes around the crossing, log-log where both y are positive
// (figures that scale as powers of the size are straight lines there), else linear in y against log x.
struct Crossover {
  enum class Kind { kAt, kFromStart, kNever, kNoData };
  Kind kind = Kind::kNoData;
  double x = 0;                // kAt: interpolated size; kFromStart: the smallest size
  int64_t below = 0, above = 0;  // kAt: the measured sizes around it
};
Crossover find_crossover(const std::vector<double>& xs, const std::vector<double>& ys, double threshold);

struct SweepReport {
  std::string op, swept;     // "matmul", "N" / "the last size" words for the swept dimension
  std::string pattern;       // "32x768x[256:8192]" as typed
  std::string dtype, device, keys;
  std::string device_reason;  // why this device (--device auto), as trace says it; "" when requested
  std::string compute_row;   // "library" / "gpu"
  std::string host_rows;     // "binding + dispatch + runtime" as measured
  std::string replay_kind;   // "CUDA Graph" / "plan replay" with --compare
  int64_t ops_per_replay = 0;
  double budget_s = 0;
  double elapsed_s = 0;
  // One host zone's open + close (measure_zone_cost_ns): a host-timed row's cell under twice it is below
  // what the timers resolve and is marked (0: not measured, nothing marked). launch/queue/gpu come from
  // CUPTI and are never marked against it.
  double probe_ns = 0;
  bool below_resolution(const SweepRow& r) const;
  std::vector<SweepPoint> points;
  std::vector<std::string> notes;
  Ceiling ceiling;

  bool memory_bound() const { return !points.empty() && points.front().bytes_moved > 0; }
  const char* rate_unit() const { return memory_bound() ? "bytes/s" : "FLOP/s"; }
  double ceiling_share(const SweepPoint& p) const { return reports::ceiling_share(p.rate(), ceiling.rate); }
  // The run's named figures (Note [Figures, not prose]): "ceiling.rate" (FLOP/s or bytes/s),
  // "ceiling.measured" (bool), "ceiling.measure_ns"; per point, point_figures: "ceiling.share" (ratio).
  Figures figures() const;
  Figures point_figures(const SweepPoint& p) const;

  Crossover host_under(double share) const;  // host overhead under `share` of the wall
  Crossover replay_stops_helping() const;    // speed-up within noise
  std::vector<std::string> crossover_words() const;
};

}  // namespace strata::reports

// The formats (print_sweep_table, sweep_json, sweep_csv) for the callers that include this header for them
// (apps/strata/sweep_command.cpp); new code includes reports/formats/sweep_formats.h itself.
