// `strata sweep`: one op measured at many sizes, as named figures (SweepPoint per size), the crossovers
// computed from them, and their views (table, JSON, CSV; the SVG plot is reports/sweep_plot.h).
// Measuring is separate from printing: apps/strata/sweep_command.cpp fills SweepReport, nothing here
// runs an op.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "reports/breakdown.h"
#include "reports/comparison.h"

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
  std::string compute_row;   // "library" / "gpu"
  std::string host_rows;     // "binding + dispatch + runtime" as measured
  std::string replay_kind;   // "CUDA Graph" / "plan replay" with --compare
  int64_t ops_per_replay = 0;
  double budget_s = 0;
  double elapsed_s = 0;
  std::vector<SweepPoint> points;
  std::vector<std::string> notes;

  Crossover host_under(double share) const;  // host overhead under `share` of the wall
  Crossover replay_stops_helping() const;    // speed-up within noise
  std::vector<std::string> crossover_words() const;
};

void print_sweep_table(const SweepReport& report, std::ostream& out);
std::string sweep_json(const SweepReport& report);
std::string sweep_csv(const SweepReport& report);

}  // namespace strata::reports
