#include "reports/formats/sweep_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "reports/model/report.h"

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

void text(std::ostringstream& svg, double x, double y, const std::string& s, const char* anchor = "middle",
          int size = 12, const char* fill = "#222") {
  svg << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" font-family=\"sans-serif\" font-size=\"" << size
    << "\" text-anchor=\"" << anchor << "\" fill=\"" << fill << "\">" << escape(s) << "</text>\n";
}

void line(std::ostringstream& svg, double x0, double y0, double x1, double y1, const char* stroke, double width = 1,
          const char* dash = nullptr) {
  svg << "<line x1=\"" << num(x0) << "\" y1=\"" << num(y0) << "\" x2=\"" << num(x1) << "\" y2=\"" << num(y1)
    << "\" stroke=\"" << stroke << "\" stroke-width=\"" << width << "\"";
  if (dash) svg << " stroke-dasharray=\"" << dash << "\"";
  svg << "/>\n";
}

void polyline(std::ostringstream& svg, const std::vector<std::pair<double, double>>& pts, const char* stroke,
              const char* dash = nullptr) {
  svg << "<polyline fill=\"none\" stroke=\"" << stroke << "\" stroke-width=\"2.5\"";
  if (dash) svg << " stroke-dasharray=\"" << dash << "\"";
  svg << " points=\"";
  for (const auto& [x, y] : pts) svg << num(x) << "," << num(y) << " ";
  svg << "\"/>\n";
  for (const auto& [x, y] : pts)
    svg << "<circle cx=\"" << num(x) << "\" cy=\"" << num(y) << "\" r=\"3.5\" fill=\"" << stroke << "\"/>\n";
}

// Where sizes and times land in pixels: x (log size) across both panels, y (log time) in the top panel.
struct PlotAxes {
  LogAxis x, time;
  double left, right;  // the panels' pixel edges
};

double share_y(double share) { return kBotY1 - std::clamp(share, 0.0, 1.0) * (kBotY1 - kBotY0); }

PlotAxes plot_axes(const SweepReport& sweep) {
  const double x_lo = double(sweep.points.front().size), x_hi = std::max(double(sweep.points.back().size), x_lo * 1.01);
  const double px0 = kLeft, px1 = kWidth - kRight;
  // Time panel: decade range around everything plotted.
  double t_lo = 1e300, t_hi = 0;
  for (const SweepPoint& point : sweep.points)
    for (double v : {point.wall.median, point.compute_ns, point.host_ns, point.replay ? point.replay->wall : 0.0})
      if (v > 0) t_lo = std::min(t_lo, v), t_hi = std::max(t_hi, v);
  if (t_hi <= 0) t_lo = 1, t_hi = 10;
  t_lo = std::pow(10, std::floor(std::log10(t_lo)));
  t_hi = std::pow(10, std::ceil(std::log10(t_hi)));
  if (t_hi <= t_lo) t_hi = t_lo * 10;
  return {LogAxis{x_lo / 1.15, x_hi * 1.15, px0, px1}, LogAxis{t_lo, t_hi, kTopY1, kTopY0}, px0, px1};
}

// Frames, grid, tick labels, axis titles and the 5% and 50% levels the crossovers refer to.
void draw_frames(std::ostringstream& svg, const SweepReport& sweep, const PlotAxes& axes) {
  const double px0 = axes.left, px1 = axes.right;
  for (double y0 : {kTopY0, kBotY0}) {
    const double y1 = y0 == kTopY0 ? kTopY1 : kBotY1;
    svg << "<rect x=\"" << px0 << "\" y=\"" << y0 << "\" width=\"" << px1 - px0 << "\" height=\"" << y1 - y0
        << "\" fill=\"none\" stroke=\"#444\"/>\n";
  }
  for (double t = axes.time.lo; t <= axes.time.hi * 1.001; t *= 10) {
    const double y = axes.time.at(t);
    line(svg, px0, y, px1, y, "#ddd");
    text(svg, px0 - 6, y + 4, decade_label(t), "end", 11);
  }
  for (double s : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    line(svg, px0, share_y(s), px1, share_y(s), "#ddd");
    text(svg, px0 - 6, share_y(s) + 4, num(s * 100).substr(0, num(s * 100).find('.')) + "%", "end", 11);
  }
  const size_t every = std::max<size_t>(1, (sweep.points.size() + 11) / 12);  // at most ~12 size labels
  for (size_t i = 0; i < sweep.points.size(); i += every) {
    const double x = axes.x.at(double(sweep.points[i].size));
    line(svg, x, kTopY0, x, kTopY1, "#eee");
    line(svg, x, kBotY0, x, kBotY1, "#eee");
    text(svg, x, kTopY1 + 16, std::to_string(sweep.points[i].size), "middle", 11);
    text(svg, x, kBotY1 + 16, std::to_string(sweep.points[i].size), "middle", 11);
  }
  text(svg, (px0 + px1) / 2, kBotY1 + 36, sweep.swept + " (log scale)", "middle", 12);
  svg << "<text transform=\"translate(18," << num((kTopY0 + kTopY1) / 2)
      << ") rotate(-90)\" font-family=\"sans-serif\" font-size=\"12\" text-anchor=\"middle\">time per call (median, log)</text>\n";
  svg << "<text transform=\"translate(18," << num((kBotY0 + kBotY1) / 2)
      << ") rotate(-90)\" font-family=\"sans-serif\" font-size=\"12\" text-anchor=\"middle\">host share of wall</text>\n";
  line(svg, px0, share_y(0.05), px1, share_y(0.05), "#999", 1, "4 3");
  line(svg, px0, share_y(0.5), px1, share_y(0.5), "#999", 1, "4 3");
  text(svg, px1 - 4, share_y(0.05) - 4, "5%", "end", 10, "#666");
  text(svg, px1 - 4, share_y(0.5) - 4, "50%", "end", 10, "#666");
}

// The curves; returns whether a replay curve was drawn (the legend names it only then).
bool draw_curves(std::ostringstream& svg, const SweepReport& sweep, const PlotAxes& axes) {
  std::vector<std::pair<double, double>> wall, compute, host, share, replay;
  for (const SweepPoint& point : sweep.points) {
    const double x = axes.x.at(double(point.size));
    if (point.wall.median > 0) wall.push_back({x, axes.time.at(point.wall.median)});
    if (point.compute_ns > 0) compute.push_back({x, axes.time.at(point.compute_ns)});
    if (point.host_ns > 0) host.push_back({x, axes.time.at(point.host_ns)});
    if (point.replay && point.replay->wall > 0) replay.push_back({x, axes.time.at(point.replay->wall)});
    share.push_back({x, share_y(point.host_share)});
  }
  polyline(svg, wall, "#1f4e9c");
  polyline(svg, compute, "#e07b00");
  polyline(svg, host, "#6a6a6a", "6 4");
  if (!replay.empty()) polyline(svg, replay, "#2a9d3a", "2 3");
  polyline(svg, share, "#b8232f");
  return !replay.empty();
}

// Crossovers: a vertical line through both panels at each interpolated size.
void draw_crossovers(std::ostringstream& svg, const SweepReport& sweep, const PlotAxes& axes) {
  struct Mark { Crossover c; std::string label; const char* colour; };
  std::vector<Mark> marks = {{sweep.host_under(0.5), "host < 50%", "#b8232f"}, {sweep.host_under(0.05), "host < 5%", "#7a1020"}};
  if (!sweep.replay_kind.empty()) marks.push_back({sweep.replay_stops_helping(), "replay within noise", "#2a9d3a"});
  double label_y = kTopY0 + 14;
  for (const Mark& m : marks) {
    if (m.c.kind != Crossover::Kind::kAt) continue;
    const double x = axes.x.at(m.c.x);
    line(svg, x, kTopY0, x, kBotY1, m.colour, 1.5, "8 4");
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s above ~%.0f", m.label.c_str(), m.c.x);
    text(svg, x + 3, label_y, buf, "start", 11, m.colour);
    label_y += 14;
  }
}

void draw_legend(std::ostringstream& svg, const SweepReport& sweep, const PlotAxes& axes, bool with_replay) {
  struct Key { const char* label; const char* colour; const char* dash; };
  std::vector<Key> keys = {{"wall", "#1f4e9c", nullptr}, {"compute", "#e07b00", nullptr}, {"host overhead", "#6a6a6a", "6 4"}};
  if (with_replay) keys.push_back({"replay wall", "#2a9d3a", "2 3"});
  keys.push_back({"host share", "#b8232f", nullptr});
  const double px1 = axes.right;
  double ly = kTopY0 + 10;
  for (const Key& k : keys) {
    line(svg, px1 + 14, ly, px1 + 44, ly, k.colour, 2.5, k.dash);
    text(svg, px1 + 50, ly + 4, k.label, "start", 12);
    ly += 20;
  }
  text(svg, px1 + 14, ly + 10, "compute = " + sweep.compute_row, "start", 10, "#555");
}

}  // namespace

std::string sweep_svg(const SweepReport& sweep) {
  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  text(svg, kWidth / 2, 24, "strata sweep " + sweep.op + " " + sweep.pattern + "  " + sweep.dtype + "  " + sweep.device,
       "middle", 15);
  if (!sweep.points.empty()) {
    const PlotAxes axes = plot_axes(sweep);
    draw_frames(svg, sweep, axes);
    const bool with_replay = draw_curves(svg, sweep, axes);
    draw_crossovers(svg, sweep, axes);
    draw_legend(svg, sweep, axes, with_replay);
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace strata::reports
