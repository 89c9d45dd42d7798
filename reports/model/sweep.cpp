// The sweep's model: each size's figures (sweep_point), the crossovers between sizes and their words.
// Its formats (table, JSON, CSV) are in sweep_formats.cpp.
#include "reports/model/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "reports/model/units.h"
#include "reports/model/report.h"

namespace strata::reports {
namespace {

std::string row_name(const BreakdownRow& r) { return r.id(); }

// An interpolated size in words: "1.5", "362".
std::string size_words(double x) {
  char buf[64];
  if (x >= 10) std::snprintf(buf, sizeof buf, "%.0f", x);
  else std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

}  // namespace

double SweepPoint::noise() const {
  if (!eager || !replay || eager->wall <= 0 || replay->wall <= 0) return 0;
  return std::max((eager->wall_p90 - eager->wall) / eager->wall, (replay->wall_p90 - replay->wall) / replay->wall);
}

double SweepPoint::rate() const {
  if (wall.median <= 0) return 0;
  return (bytes_moved > 0 ? bytes_moved : flops) / (wall.median * 1e-9);
}

double ceiling_share(double rate, double ceiling) {
  if (!(rate > 0) || !(ceiling > 0)) return 0;
  return rate / ceiling;
}

Figures SweepReport::figures() const {
  Figures f;
  if (ceiling.rate > 0) {
    f.set("ceiling.rate", ceiling.rate, rate_unit());
    f.set("ceiling.measured", ceiling.measured ? 1 : 0, "bool");
    if (ceiling.measured) f.set("ceiling.measure_ns", ceiling.spent_ns, "ns");
  }
  return f;
}

Figures SweepReport::point_figures(const SweepPoint& p) const {
  Figures f;
  if (ceiling.rate > 0) f.set("ceiling.share", ceiling_share(p), "ratio");
  return f;
}

SweepPoint sweep_point(int64_t size, const std::string& spec, const std::string& description, double flops,
                       double bytes_moved, const LayerBreakdown& steady, const std::string& compute_row) {
  SweepPoint p;
  p.size = size;
  p.spec = spec;
  p.description = description;
  p.flops = flops;
  p.bytes_moved = bytes_moved;
  p.wall = steady.wall;
  p.calls = steady.wall.count();
  const size_t n = p.calls;
  std::vector<double> host(n, 0), compute(n, 0);
  for (const BreakdownRow& r : steady.rows) {
    if (!r.applicable) continue;
    p.rows.push_back({row_name(r), r.ns.median, r.ns.p90});
    if (r.kind == RowKind::kQueue) continue;
    std::vector<double>& into = (row_kind_name(r.kind) == compute_row) ? compute : host;
    for (size_t i = 0; i < n && i < r.ns.samples.size(); ++i) into[i] += r.ns.samples[i];
  }
  std::vector<double> host_share(n), compute_share(n);
  for (size_t i = 0; i < n; ++i) {
    const double w = steady.wall.samples[i];
    host_share[i] = share_of(host[i], w);
    compute_share[i] = share_of(compute[i], w);
  }
  const Distribution h = Distribution::of(host), c = Distribution::of(compute);
  p.host_ns = h.median;
  p.host_p90 = h.p90;
  p.compute_ns = c.median;
  p.compute_p90 = c.p90;
  p.host_share = median_of(host_share);
  p.compute_share = median_of(compute_share);
  return p;
}

Crossover find_crossover(const std::vector<double>& xs, const std::vector<double>& ys, double threshold) {
  Crossover c;
  const size_t n = std::min(xs.size(), ys.size());
  if (n == 0) return c;
  size_t j = n;  // the first index of the final run of points below the threshold
  while (j > 0 && ys[j - 1] < threshold) --j;
  if (j == n) {
    c.kind = Crossover::Kind::kNever;
    c.x = xs[n - 1];
    return c;
  }
  if (j == 0) {
    c.kind = Crossover::Kind::kFromStart;
    c.x = xs[0];
    return c;
  }
  const double y0 = ys[j - 1], y1 = ys[j];  // y0 >= threshold > y1
  double f;
  if (y0 > 0 && y1 > 0 && threshold > 0) f = (std::log(threshold) - std::log(y0)) / (std::log(y1) - std::log(y0));
  else f = (threshold - y0) / (y1 - y0);
  const double lx0 = std::log(xs[j - 1]), lx1 = std::log(xs[j]);
  c.kind = Crossover::Kind::kAt;
  c.x = std::exp(lx0 + f * (lx1 - lx0));
  c.below = static_cast<int64_t>(xs[j - 1]);
  c.above = static_cast<int64_t>(xs[j]);
  return c;
}

Crossover SweepReport::host_under(double share) const {
  std::vector<double> xs, ys;
  for (const SweepPoint& p : points) xs.push_back(double(p.size)), ys.push_back(p.host_share);
  return find_crossover(xs, ys, share);
}

Crossover SweepReport::replay_stops_helping() const {
  std::vector<double> xs, ys;
  for (const SweepPoint& p : points) {
    if (!p.eager || !p.replay) continue;
    // Replay helps beyond the noise while speed-up > 1 + noise, i.e. while this ratio is at least 1.
    xs.push_back(double(p.size));
    ys.push_back(p.speedup() / (1 + p.noise()));
  }
  return find_crossover(xs, ys, 1.0);
}

std::vector<std::string> SweepReport::crossover_words() const {
  std::vector<std::string> words;
  if (points.empty()) return words;
  const std::string last = std::to_string(points.back().size);
  for (double share : {0.5, 0.05}) {
    const Crossover c = host_under(share);
    const std::string what = "host overhead (" + host_rows + ") is under " + format_percent(share) + " of the wall";
    switch (c.kind) {
      case Crossover::Kind::kAt:
        words.push_back(what + " above " + swept + " ~ " + size_words(c.x) + " (interpolated between the measured " +
                        std::to_string(c.below) + " and " + std::to_string(c.above) + ")");
        break;
      case Crossover::Kind::kFromStart:
        // A measured size, written as typed (size_words is for interpolated ones: "(size = 1.0)" beside "= 16").
        words.push_back(what + " at every measured size, from the smallest (" + swept + " = " +
                        std::to_string(points.front().size) + ")");
        break;
      case Crossover::Kind::kNever:
        words.push_back(what.substr(0, what.find(" is under")) + " is still " + format_percent(share) +
                        " of the wall or more at the largest measured size (" + swept + " = " + last +
                        "): the crossover lies above the range");
        break;
      case Crossover::Kind::kNoData:
        break;
    }
  }
  if (!replay_kind.empty()) {
    const Crossover c = replay_stops_helping();
    const std::string what = replay_kind + " no longer helps by more than the run-to-run noise";
    switch (c.kind) {
      case Crossover::Kind::kAt:
        words.push_back(what + " above " + swept + " ~ " + size_words(c.x) + " (between the measured " +
                        std::to_string(c.below) + " and " + std::to_string(c.above) + ")");
        break;
      case Crossover::Kind::kFromStart:
        words.push_back(replay_kind + " helps by no more than the noise at any measured size");
        break;
      case Crossover::Kind::kNever:
        words.push_back(replay_kind + " still helps by more than the noise at the largest measured size (" +
                        swept + " = " + last + ")");
        break;
      case Crossover::Kind::kNoData:
        break;
    }
  }
  return words;
}

bool SweepReport::below_resolution(const SweepRow& r) const {
  const bool host_timed = r.name != "launch" && r.name != "queue" && r.name != "gpu";
  return host_timed && probe_ns > 0 && r.median < 2 * probe_ns;
}

}  // namespace strata::reports
