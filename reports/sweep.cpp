#include "reports/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "reports/report.h"

namespace strata::reports {
namespace {

std::string row_name(const BreakdownRow& r) { return r.id(); }


std::string size_words(double x) {
  char buf[64];
  if (x >= 10) std::snprintf(buf, sizeof buf, "%.0f", x);
  else std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}



// Row names in first-seen order over all points (the same op on the same device has the same rows).
std::vector<std::string> row_names(const SweepReport& rep) {
  std::vector<std::string> names;
  for (const SweepPoint& p : rep.points)
    for (const SweepRow& r : p.rows)
      if (std::find(names.begin(), names.end(), r.name) == names.end()) names.push_back(r.name);
  return names;
}

const SweepRow* find_row(const SweepPoint& p, const std::string& name) {
  for (const SweepRow& r : p.rows)
    if (r.name == name) return &r;
  return nullptr;
}

std::string rate_text(double rate, bool bytes) {
  if (rate <= 0) return "-";
  return bytes ? format_bandwidth(rate) : format_rate(rate);
}
std::string rate_text(const SweepPoint& p) { return rate_text(p.rate(), p.bytes_moved > 0); }

std::string share_text(double share) { return share > 0 ? format_percent(share) : "-"; }

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
    host_share[i] = w > 0 ? host[i] / w : 0;
    compute_share[i] = w > 0 ? compute[i] / w : 0;
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

void print_sweep_table(const SweepReport& rep, std::ostream& out) {
  out << "sweep " << rep.op << " " << rep.pattern << "  (" << rep.points.size() << " sizes, " << rep.swept
      << " swept)  " << rep.dtype << "  " << rep.device << "   keys: " << rep.keys << "\n";
  if (!rep.device_reason.empty()) out << "device: " << rep.device_reason << "\n";  // as trace's table says it
  if (rep.ceiling.rate > 0) {
    out << "ceiling: " << rate_text(rep.ceiling.rate, rep.memory_bound())
        << (rep.ceiling.measured ? ", measured: " : ", datasheet peak (not measured): ") << rep.ceiling.how << "\n";
  } else if (!rep.ceiling.how.empty()) {
    out << "ceiling: none (" << rep.ceiling.how << ")\n";
  }
  const std::vector<std::string> names = row_names(rep);
  const bool compare = !rep.replay_kind.empty();
  out << pad("size", 8);
  // A row's column is at least 11 wide, wider for a long key ("to_copy:Autograd", the casts' own rows).
  auto header = [](const std::string& n) { return n.size() > 10 ? n.substr(n.find('/') + 1) : n; };
  auto width = [&](const std::string& n) { return std::max<size_t>(11, header(n).size() + 1); };
  for (const std::string& n : names) out << lpad(header(n), width(n));
  out << lpad("wall", 11) << lpad("wall p90", 11) << lpad("host", 11) << lpad("host%", 7) << lpad("compute%", 9)
      << "  " << pad("rate", 14) << lpad("% of ceiling", 12);
  if (compare) out << "  " << pad("eager/op", 10) << lpad("replay/op", 11) << lpad("speed-up", 9) << lpad("noise", 7);
  out << "\n";
  std::vector<std::string> unresolved;  // rows with a marked cell, in column order
  for (const SweepPoint& p : rep.points) {
    std::ostringstream line;
    line << pad(std::to_string(p.size), 8);
    for (const std::string& n : names) {
      const SweepRow* r = find_row(p, n);
      const bool below = r && rep.below_resolution(*r);
      if (below && std::find(unresolved.begin(), unresolved.end(), n) == unresolved.end()) unresolved.push_back(n);
      line << lpad(r ? format_ns(r->median) + (below ? "*" : "") : "-", width(n));
    }
    line << lpad(format_ns(p.wall.median), 11) << lpad(format_ns(p.wall.p90), 11) << lpad(format_ns(p.host_ns), 11)
         << lpad(format_percent(p.host_share), 7) << lpad(format_percent(p.compute_share), 9) << "  " << pad(rate_text(p), 14)
         << lpad(share_text(rep.ceiling_share(p)), 12);
    if (compare && p.eager && p.replay) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2fx", p.speedup());
      line << "  " << pad(format_ns(p.eager->wall), 10) << lpad(format_ns(p.replay->wall), 11) << lpad(buf, 9)
           << lpad(format_percent(p.noise()), 7);
    }
    std::string text = line.str();
    text.erase(text.find_last_not_of(' ') + 1);  // no trailing blanks when a column is left empty
    out << text << "\n";
  }
  out << "host = " << rep.host_rows << "; compute = " << rep.compute_row << "; every figure is the median per call";
  if (compare) out << "; eager/op and replay/op from rounds of " << rep.ops_per_replay << " ops";
  out << "\n";
  for (const std::string& w : rep.crossover_words()) out << "crossover: " << w << "\n";
  if (!unresolved.empty()) {
    std::string rows;
    for (const std::string& n : unresolved) rows += (rows.empty() ? "" : ", ") + n;
    out << "note: " << marked_cells_note("in " + rows, rep.probe_ns) << "\n";
  }
  for (const std::string& n : rep.notes) out << "note: " << n << "\n";
}

std::string sweep_json(const SweepReport& rep) {
  using nlohmann::json;
  // Every named figure as the trace JSON carries them: {"ceiling.rate": {"value": ..., "unit": ...}}.
  auto figures = [](const Figures& f) {
    json out = json::object();
    for (const Figure& x : f.all()) out[x.name] = {{"value", x.value}, {"unit", x.unit}};
    return out;
  };
  auto crossover = [](const Crossover& c) {
    static const char* kinds[] = {"at", "from_start", "never", "no_data"};
    json j{{"kind", kinds[static_cast<int>(c.kind)]}};
    if (c.kind != Crossover::Kind::kNoData) j["size"] = c.x;
    if (c.kind == Crossover::Kind::kAt) j["between"] = {c.below, c.above};
    return j;
  };
  json points = json::array();
  for (const SweepPoint& p : rep.points) {
    json rows = json::array();
    for (const SweepRow& r : p.rows) rows.push_back({{"row", r.name}, {"median_ns", r.median}, {"p90_ns", r.p90}});
    json jp{{"size", p.size},
            {"spec", p.spec},
            {"description", p.description},
            {"calls", p.calls},
            {"flops", p.flops},
            {"bytes_moved", p.bytes_moved},
            {"rows", rows},
            {"wall_ns", {{"median", p.wall.median}, {"p90", p.wall.p90}, {"min", p.wall.min}, {"max", p.wall.max}}},
            {"host_ns", {{"median", p.host_ns}, {"p90", p.host_p90}}},
            {"compute_ns", {{"median", p.compute_ns}, {"p90", p.compute_p90}}},
            {"host_share", p.host_share},
            {"compute_share", p.compute_share},
            {"rate", p.rate()},
            {"rate_unit", p.bytes_moved > 0 ? "bytes/s" : "FLOP/s"},
            {"figures", figures(rep.point_figures(p))}};
    if (p.eager && p.replay) {
      jp["compare"] = {{"eager_wall_ns", p.eager->wall},   {"eager_wall_p90_ns", p.eager->wall_p90},
                       {"replay_wall_ns", p.replay->wall}, {"replay_wall_p90_ns", p.replay->wall_p90},
                       {"speedup", p.speedup()},           {"noise", p.noise()}};
    }
    points.push_back(jp);
  }
  json j{{"op", rep.op},
         {"pattern", rep.pattern},
         {"swept", rep.swept},
         {"dtype", rep.dtype},
         {"device", rep.device},
         {"device_reason", rep.device_reason},
         {"keys", rep.keys},
         {"host_rows", rep.host_rows},
         {"compute_row", rep.compute_row},
         {"budget_s_per_size", rep.budget_s},
         {"elapsed_s", rep.elapsed_s},
         {"probe_ns", rep.probe_ns},
         {"ceiling", {{"rate", rep.ceiling.rate}, {"unit", rep.rate_unit()}, {"measured", rep.ceiling.measured},
                      {"how", rep.ceiling.how}}},
         {"figures", figures(rep.figures())},
         {"points", points},
         {"crossovers",
          {{"host_under_50_percent", crossover(rep.host_under(0.5))},
           {"host_under_5_percent", crossover(rep.host_under(0.05))}}},
         {"crossover_words", rep.crossover_words()},
         {"notes", rep.notes}};
  if (!rep.replay_kind.empty()) {
    j["replay_kind"] = rep.replay_kind;
    j["ops_per_replay"] = rep.ops_per_replay;
    j["crossovers"]["replay_within_noise"] = crossover(rep.replay_stops_helping());
  }
  return j.dump(2) + "\n";
}

std::string sweep_csv(const SweepReport& rep) {
  std::ostringstream out;
  out.precision(10);
  const std::vector<std::string> names = row_names(rep);
  const bool compare = !rep.replay_kind.empty();
  out << "size,spec,calls,wall_median_ns,wall_p90_ns,host_median_ns,host_p90_ns,compute_median_ns,compute_p90_ns,"
         "host_share,compute_share,rate,rate_unit,ceiling,ceiling_share";
  for (const std::string& n : names) out << "," << n << "_median_ns," << n << "_p90_ns";
  if (compare) out << ",eager_wall_ns,replay_wall_ns,speedup,noise";
  out << "\n";
  for (const SweepPoint& p : rep.points) {
    out << p.size << "," << p.spec << "," << p.calls << "," << p.wall.median << "," << p.wall.p90 << "," << p.host_ns
        << "," << p.host_p90 << "," << p.compute_ns << "," << p.compute_p90 << "," << p.host_share << ","
        << p.compute_share << "," << p.rate() << "," << (p.bytes_moved > 0 ? "bytes/s" : "FLOP/s") << ",";
    if (rep.ceiling.rate > 0) out << rep.ceiling.rate << "," << rep.ceiling_share(p);
    else out << ",";
    for (const std::string& n : names) {
      const SweepRow* r = find_row(p, n);
      if (r) out << "," << r->median << "," << r->p90;
      else out << ",,";
    }
    if (compare) {
      if (p.eager && p.replay) out << "," << p.eager->wall << "," << p.replay->wall << "," << p.speedup() << "," << p.noise();
      else out << ",,,,";
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace strata::reports
