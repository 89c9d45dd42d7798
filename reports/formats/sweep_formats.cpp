// The sweep's formats: the table, the JSON and the CSV of a SweepReport (reports/model/sweep.h). They compute
// nothing the model does not give them; the SVG plot is sweep_plot.cpp.
#include "reports/formats/sweep_formats.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "reports/formats/figures_json.h"
#include "reports/formats/json_text.h"
#include "reports/model/units.h"
#include "reports/model/report.h"

namespace strata::reports {
namespace {

// Row names in first-seen order over all points (the same op on the same device has the same rows).
std::vector<std::string> row_names(const SweepReport& sweep) {
  std::vector<std::string> names;
  for (const SweepPoint& point : sweep.points)
    for (const SweepRow& r : point.rows)
      if (std::find(names.begin(), names.end(), r.name) == names.end()) names.push_back(r.name);
  return names;
}

const SweepRow* find_row(const SweepPoint& point, const std::string& name) {
  for (const SweepRow& r : point.rows)
    if (r.name == name) return &r;
  return nullptr;
}

std::string rate_text(double rate, bool bytes) {
  if (rate <= 0) return "-";
  return bytes ? format_bandwidth(rate) : format_rate(rate);
}
std::string rate_text(const SweepPoint& point) { return rate_text(point.rate(), point.bytes_moved > 0); }

std::string share_text(double share) { return share > 0 ? format_percent(share) : "-"; }

// The lines above the columns: what was swept, where, and what the rates are set against.
void print_sweep_heading(const SweepReport& sweep, std::ostream& out) {
  out << "sweep " << sweep.op << " " << sweep.pattern << "  (" << sweep.points.size() << " sizes, " << sweep.swept
      << " swept)  " << sweep.dtype << "  " << sweep.device << "   keys: " << sweep.keys << "\n";
  if (!sweep.device_reason.empty()) out << "device: " << sweep.device_reason << "\n";  // as trace's table says it
  if (sweep.ceiling.rate > 0) {
    out << "ceiling: " << rate_text(sweep.ceiling.rate, sweep.memory_bound())
        << (sweep.ceiling.measured ? ", measured: " : ", datasheet peak (not measured): ") << sweep.ceiling.how << "\n";
  } else if (!sweep.ceiling.how.empty()) {
    out << "ceiling: none (" << sweep.ceiling.how << ")\n";
  }
}

// A row's column is at least 11 wide, wider for a long key ("to_copy:Autograd", the casts' own rows).
std::string column_header(const std::string& name) { return name.size() > 10 ? name.substr(name.find('/') + 1) : name; }
size_t column_width(const std::string& name) { return std::max<size_t>(11, column_header(name).size() + 1); }

// One size's line. Rows with a cell under the timers' resolution are added to `unresolved`.
std::string sweep_line(const SweepReport& sweep, const SweepPoint& point, const std::vector<std::string>& names,
                       std::vector<std::string>& unresolved) {
  std::ostringstream line;
  line << pad(std::to_string(point.size), 8);
  for (const std::string& n : names) {
    const SweepRow* r = find_row(point, n);
    const bool below = r && sweep.below_resolution(*r);
    if (below && std::find(unresolved.begin(), unresolved.end(), n) == unresolved.end()) unresolved.push_back(n);
    line << lpad(r ? format_ns(r->median) + (below ? "*" : "") : "-", column_width(n));
  }
  line << lpad(format_ns(point.wall.median), 11) << lpad(format_ns(point.wall.p90), 11) << lpad(format_ns(point.host_ns), 11)
       << lpad(format_percent(point.host_share), 7) << lpad(format_percent(point.compute_share), 9) << "  " << pad(rate_text(point), 14)
       << lpad(share_text(sweep.ceiling_share(point)), 12);
  if (!sweep.replay_kind.empty() && point.eager && point.replay) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", point.speedup());
    line << "  " << pad(format_ns(point.eager->wall), 10) << lpad(format_ns(point.replay->wall), 11) << lpad(buf, 9)
         << lpad(format_percent(point.noise()), 7);
  }
  std::string text = line.str();
  text.erase(text.find_last_not_of(' ') + 1);  // no trailing blanks when a column is left empty
  return text;
}

}  // namespace

void print_sweep_table(const SweepReport& sweep, std::ostream& out) {
  print_sweep_heading(sweep, out);
  const std::vector<std::string> names = row_names(sweep);
  const bool compare = !sweep.replay_kind.empty();
  out << pad("size", 8);
  for (const std::string& n : names) out << lpad(column_header(n), column_width(n));
  out << lpad("wall", 11) << lpad("wall p90", 11) << lpad("host", 11) << lpad("host%", 7) << lpad("compute%", 9)
      << "  " << pad("rate", 14) << lpad("% of ceiling", 12);
  if (compare) out << "  " << pad("eager/op", 10) << lpad("replay/op", 11) << lpad("speed-up", 9) << lpad("noise", 7);
  out << "\n";
  std::vector<std::string> unresolved;  // rows with a marked cell, in column order
  for (const SweepPoint& point : sweep.points) out << sweep_line(sweep, point, names, unresolved) << "\n";
  out << "host = " << sweep.host_rows << "; compute = " << sweep.compute_row << "; every figure is the median per call";
  if (compare) out << "; eager/op and replay/op from rounds of " << sweep.ops_per_replay << " ops";
  out << "\n";
  for (const std::string& w : sweep.crossover_words()) out << "crossover: " << w << "\n";
  if (!unresolved.empty()) {
    std::string rows;
    for (const std::string& n : unresolved) rows += (rows.empty() ? "" : ", ") + n;
    out << "note: " << marked_cells_note("in " + rows, sweep.probe_ns) << "\n";
  }
  for (const std::string& n : sweep.notes) out << "note: " << n << "\n";
}

namespace {

nlohmann::json crossover_json(const Crossover& c) {
  static const char* kinds[] = {"at", "from_start", "never", "no_data"};
  nlohmann::json j{{"kind", kinds[static_cast<int>(c.kind)]}};
  if (c.kind != Crossover::Kind::kNoData) j["size"] = c.x;
  if (c.kind == Crossover::Kind::kAt) j["between"] = {c.below, c.above};
  return j;
}

nlohmann::json point_json(const SweepReport& sweep, const SweepPoint& point) {
  using nlohmann::json;
  json rows = json::array();
  for (const SweepRow& r : point.rows) rows.push_back({{"row", r.name}, {"median_ns", r.median}, {"p90_ns", r.p90}});
  json jp{{"size", point.size},
          {"spec", point.spec},
          {"description", point.description},
          {"calls", point.calls},
          {"flops", point.flops},
          {"bytes_moved", point.bytes_moved},
          {"rows", rows},
          {"wall_ns", {{"median", point.wall.median}, {"p90", point.wall.p90}, {"min", point.wall.min}, {"max", point.wall.max}}},
          {"host_ns", {{"median", point.host_ns}, {"p90", point.host_p90}}},
          {"compute_ns", {{"median", point.compute_ns}, {"p90", point.compute_p90}}},
          {"host_share", point.host_share},
          {"compute_share", point.compute_share},
          {"rate", point.rate()},
          {"rate_unit", point.bytes_moved > 0 ? "bytes/s" : "FLOP/s"},
          {"figures", figures_json(sweep.point_figures(point))}};
  if (point.eager && point.replay) {
    jp["compare"] = {{"eager_wall_ns", point.eager->wall},   {"eager_wall_p90_ns", point.eager->wall_p90},
                     {"replay_wall_ns", point.replay->wall}, {"replay_wall_p90_ns", point.replay->wall_p90},
                     {"speedup", point.speedup()},           {"noise", point.noise()}};
  }
  return jp;
}

}  // namespace

std::string sweep_json(const SweepReport& sweep) {
  using nlohmann::json;
  json points = json::array();
  for (const SweepPoint& point : sweep.points) points.push_back(point_json(sweep, point));
  json j{{"op", sweep.op},
         {"pattern", sweep.pattern},
         {"swept", sweep.swept},
         {"dtype", sweep.dtype},
         {"device", sweep.device},
         {"device_reason", sweep.device_reason},
         {"keys", sweep.keys},
         {"host_rows", sweep.host_rows},
         {"compute_row", sweep.compute_row},
         {"budget_s_per_size", sweep.budget_s},
         {"elapsed_s", sweep.elapsed_s},
         {"probe_ns", sweep.probe_ns},
         {"ceiling", {{"rate", sweep.ceiling.rate}, {"unit", sweep.rate_unit()}, {"measured", sweep.ceiling.measured},
                      {"how", sweep.ceiling.how}}},
         {"figures", figures_json(sweep.figures())},
         {"points", points},
         {"crossovers",
          {{"host_under_50_percent", crossover_json(sweep.host_under(0.5))},
           {"host_under_5_percent", crossover_json(sweep.host_under(0.05))}}},
         {"crossover_words", sweep.crossover_words()},
         {"notes", sweep.notes}};
  if (!sweep.replay_kind.empty()) {
    j["replay_kind"] = sweep.replay_kind;
    j["ops_per_replay"] = sweep.ops_per_replay;
    j["crossovers"]["replay_within_noise"] = crossover_json(sweep.replay_stops_helping());
  }
  return json_text(j);
}

std::string sweep_csv(const SweepReport& sweep) {
  std::ostringstream out;
  out.precision(10);
  const std::vector<std::string> names = row_names(sweep);
  const bool compare = !sweep.replay_kind.empty();
  out << "size,spec,calls,wall_median_ns,wall_p90_ns,host_median_ns,host_p90_ns,compute_median_ns,compute_p90_ns,"
         "host_share,compute_share,rate,rate_unit,ceiling,ceiling_share";
  for (const std::string& n : names) out << "," << n << "_median_ns," << n << "_p90_ns";
  if (compare) out << ",eager_wall_ns,replay_wall_ns,speedup,noise";
  out << "\n";
  for (const SweepPoint& point : sweep.points) {
    out << point.size << "," << point.spec << "," << point.calls << "," << point.wall.median << "," << point.wall.p90 << "," << point.host_ns
        << "," << point.host_p90 << "," << point.compute_ns << "," << point.compute_p90 << "," << point.host_share << ","
        << point.compute_share << "," << point.rate() << "," << (point.bytes_moved > 0 ? "bytes/s" : "FLOP/s") << ",";
    if (sweep.ceiling.rate > 0) out << sweep.ceiling.rate << "," << sweep.ceiling_share(point);
    else out << ",";
    for (const std::string& n : names) {
      const SweepRow* r = find_row(point, n);
      if (r) out << "," << r->median << "," << r->p90;
      else out << ",,";
    }
    if (compare) {
      if (point.eager && point.replay) out << "," << point.eager->wall << "," << point.replay->wall << "," << point.speedup() << "," << point.noise();
      else out << ",,,,";
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace strata::reports
