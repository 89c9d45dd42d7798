#include "reports/sweep_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "reports/report.h"

namespace strata::reports {
namespace {

constexpr double kWidth = 860, kHeight = 640;
constexpr double kLeft = 90, kRight = 170;  // the right margin holds the legend
constexpr double kTopY0 = 50, kTopY1 = 370;  // time panel
constexpr double kBotY0 = 430, kBotY1 = 580;  // share panel

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// "10 us", "1 ms": a power of ten in ns, without format_ns's decimals.
std::string decade_label(double ns) {
  const char* unit = ns >= 1e9 ? "s" : ns >= 1e6 ? "ms" : ns >= 1e3 ? "us" : "ns";
  const double scale = ns >= 1e9 ? 1e9 : ns >= 1e6 ? 1e6 : ns >= 1e3 ? 1e3 : 1;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g %s", ns / scale, unit);
  return buf;
}

struct LogAxis {
  double lo, hi, p0, p1;  // data range (positive) onto pixels p0..p1
  double at(double v) const {
    const double f = (std::log(std::max(v, lo)) - std::log(lo)) / (std::log(hi) - std::log(lo));
    return p0 + f * (p1 - p0);
  }
};

void text(std::ostringstream& o, double x, double y, const std::string& s, const char* anchor = "middle",
          int size = 12, const char* fill = "#222") {
  o << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" font-family=\"sans-serif\" font-size=\"" << size
    << "\" text-anchor=\"" << anchor << "\" fill=\"" << fill << "\">" << escape(s) << "</text>\n";
}

void line(std::ostringstream& o, double x0, double y0, double x1, double y1, const char* stroke, double width = 1,
          const char* dash = nullptr) {
  o << "<line x1=\"" << num(x0) << "\" y1=\"" << num(y0) << "\" x2=\"" << num(x1) << "\" y2=\"" << num(y1)
    << "\" stroke=\"" << stroke << "\" stroke-width=\"" << width << "\"";
  if (dash) o << " stroke-dasharray=\"" << dash << "\"";
  o << "/>\n";
}

void polyline(std::ostringstream& o, const std::vector<std::pair<double, double>>& pts, const char* stroke,
              const char* dash = nullptr) {
  o << "<polyline fill=\"none\" stroke=\"" << stroke << "\" stroke-width=\"2.5\"";
  if (dash) o << " stroke-dasharray=\"" << dash << "\"";
  o << " points=\"";
  for (const auto& [x, y] : pts) o << num(x) << "," << num(y) << " ";
  o << "\"/>\n";
  for (const auto& [x, y] : pts)
    o << "<circle cx=\"" << num(x) << "\" cy=\"" << num(y) << "\" r=\"3.5\" fill=\"" << stroke << "\"/>\n";
}

}  // namespace

std::string sweep_svg(const SweepReport& rep) {
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  text(o, kWidth / 2, 24, "strata sweep " + rep.op + " " + rep.pattern + "  " + rep.dtype + "  " + rep.device, "middle", 15);
  if (rep.points.empty()) {
    o << "</svg>\n";
    return o.str();
  }
  const double x_lo = double(rep.points.front().size), x_hi = std::max(double(rep.points.back().size), x_lo * 1.01);
  const double px0 = kLeft, px1 = kWidth - kRight;
  const LogAxis xa{x_lo / 1.15, x_hi * 1.15, px0, px1};

  // Time panel: decade range around everything plotted.
  double t_lo = 1e300, t_hi = 0;
  for (const SweepPoint& p : rep.points)
    for (double v : {p.wall.median, p.compute_ns, p.host_ns, p.replay ? p.replay->wall : 0.0})
      if (v > 0) t_lo = std::min(t_lo, v), t_hi = std::max(t_hi, v);
  if (t_hi <= 0) t_lo = 1, t_hi = 10;
  t_lo = std::pow(10, std::floor(std::log10(t_lo)));
  t_hi = std::pow(10, std::ceil(std::log10(t_hi)));
  if (t_hi <= t_lo) t_hi = t_lo * 10;
  const LogAxis ya{t_lo, t_hi, kTopY1, kTopY0};
  const auto share_y = [](double share) { return kBotY1 - std::clamp(share, 0.0, 1.0) * (kBotY1 - kBotY0); };

  // Frames, grid, tick labels.
  for (double y0 : {kTopY0, kBotY0}) {
    const double y1 = y0 == kTopY0 ? kTopY1 : kBotY1;
    o << "<rect x=\"" << px0 << "\" y=\"" << y0 << "\" width=\"" << px1 - px0 << "\" height=\"" << y1 - y0
      << "\" fill=\"none\" stroke=\"#444\"/>\n";
  }
  for (double t = t_lo; t <= t_hi * 1.001; t *= 10) {
    const double y = ya.at(t);
    line(o, px0, y, px1, y, "#ddd");
    text(o, px0 - 6, y + 4, decade_label(t), "end", 11);
  }
  for (double s : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    line(o, px0, share_y(s), px1, share_y(s), "#ddd");
    text(o, px0 - 6, share_y(s) + 4, num(s * 100).substr(0, num(s * 100).find('.')) + "%", "end", 11);
  }
  const size_t every = std::max<size_t>(1, (rep.points.size() + 11) / 12);  // at most ~12 size labels
  for (size_t i = 0; i < rep.points.size(); i += every) {
    const double x = xa.at(double(rep.points[i].size));
    line(o, x, kTopY0, x, kTopY1, "#eee");
    line(o, x, kBotY0, x, kBotY1, "#eee");
    text(o, x, kTopY1 + 16, std::to_string(rep.points[i].size), "middle", 11);
    text(o, x, kBotY1 + 16, std::to_string(rep.points[i].size), "middle", 11);
  }
  text(o, (px0 + px1) / 2, kBotY1 + 36, rep.swept + " (log scale)", "middle", 12);
  o << "<text transform=\"translate(18," << num((kTopY0 + kTopY1) / 2)
    << ") rotate(-90)\" font-family=\"sans-serif\" font-size=\"12\" text-anchor=\"middle\">time per call (median, log)</text>\n";
  o << "<text transform=\"translate(18," << num((kBotY0 + kBotY1) / 2)
    << ") rotate(-90)\" font-family=\"sans-serif\" font-size=\"12\" text-anchor=\"middle\">host share of wall</text>\n";
  // The 5% and 50% levels the crossovers refer to.
  line(o, px0, share_y(0.05), px1, share_y(0.05), "#999", 1, "4 3");
  line(o, px0, share_y(0.5), px1, share_y(0.5), "#999", 1, "4 3");
  text(o, px1 - 4, share_y(0.05) - 4, "5%", "end", 10, "#666");
  text(o, px1 - 4, share_y(0.5) - 4, "50%", "end", 10, "#666");

  // Curves.
  std::vector<std::pair<double, double>> wall, compute, host, share, replay;
  for (const SweepPoint& p : rep.points) {
    const double x = xa.at(double(p.size));
    if (p.wall.median > 0) wall.push_back({x, ya.at(p.wall.median)});
    if (p.compute_ns > 0) compute.push_back({x, ya.at(p.compute_ns)});
    if (p.host_ns > 0) host.push_back({x, ya.at(p.host_ns)});
    if (p.replay && p.replay->wall > 0) replay.push_back({x, ya.at(p.replay->wall)});
    share.push_back({x, share_y(p.host_share)});
  }
  polyline(o, wall, "#1f4e9c");
  polyline(o, compute, "#e07b00");
  polyline(o, host, "#6a6a6a", "6 4");
  if (!replay.empty()) polyline(o, replay, "#2a9d3a", "2 3");
  polyline(o, share, "#b8232f");

  // Crossovers: a vertical line through both panels at each interpolated size.
  struct Mark { Crossover c; std::string label; const char* colour; };
  std::vector<Mark> marks = {{rep.host_under(0.5), "host < 50%", "#b8232f"}, {rep.host_under(0.05), "host < 5%", "#7a1020"}};
  if (!rep.replay_kind.empty()) marks.push_back({rep.replay_stops_helping(), "replay within noise", "#2a9d3a"});
  double label_y = kTopY0 + 14;
  for (const Mark& m : marks) {
    if (m.c.kind != Crossover::Kind::kAt) continue;
    const double x = xa.at(m.c.x);
    line(o, x, kTopY0, x, kBotY1, m.colour, 1.5, "8 4");
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s above ~%.0f", m.label.c_str(), m.c.x);
    text(o, x + 3, label_y, buf, "start", 11, m.colour);
    label_y += 14;
  }

  // Legend.
  struct Key { const char* label; const char* colour; const char* dash; };
  std::vector<Key> keys = {{"wall", "#1f4e9c", nullptr}, {"compute", "#e07b00", nullptr}, {"host overhead", "#6a6a6a", "6 4"}};
  if (!replay.empty()) keys.push_back({"replay wall", "#2a9d3a", "2 3"});
  keys.push_back({"host share", "#b8232f", nullptr});
  double ly = kTopY0 + 10;
  for (const Key& k : keys) {
    line(o, px1 + 14, ly, px1 + 44, ly, k.colour, 2.5, k.dash);
    text(o, px1 + 50, ly + 4, k.label, "start", 12);
    ly += 20;
  }
  text(o, px1 + 14, ly + 10, "compute = " + rep.compute_row, "start", 10, "#555");
  o << "</svg>\n";
  return o.str();
}

}  // namespace strata::reports
