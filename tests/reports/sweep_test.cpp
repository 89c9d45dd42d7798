// The figures and crossovers of `strata sweep` on made-up numbers whose answers are known.
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "reports/formats/sweep_formats.h"
#include "reports/model/sweep.h"
#include "reports/formats/sweep_plot.h"

using namespace strata::reports;

namespace {

// A breakdown of `calls` identical calls: binding + dispatch/CPU host work, library compute.
LayerBreakdown synthetic(double host_ns, double compute_ns, size_t calls = 5) {
  LayerBreakdown b;
  b.calls = calls;
  b.rows.push_back({RowKind::kBinding, "", {"binding"}, Distribution::of(std::vector<double>(calls, host_ns / 2)), true, "", "", false});
  b.rows.push_back({RowKind::kDispatch, "CPU", {"CPU"}, Distribution::of(std::vector<double>(calls, host_ns / 2)), true, "", "", false});
  b.rows.push_back({RowKind::kLibrary, "", {"cblas_sgemm"}, Distribution::of(std::vector<double>(calls, compute_ns)), true, "", "", false});
  b.rows.push_back({RowKind::kLaunch, "", {}, Distribution::of(std::vector<double>(calls, 0.0)), false, "", "", false});
  b.wall = Distribution::of(std::vector<double>(calls, host_ns + compute_ns));
  return b;
}

// Host cost fixed at 1000 ns, compute growing as size^3 / 1000 ns: host share 1000 / (1000 + s^3/1000).
SweepReport cubic_sweep() {
  SweepReport rep;
  rep.op = "matmul";
  rep.swept = "size";
  rep.pattern = "16:1024";
  rep.host_rows = "binding + dispatch";
  rep.compute_row = "library";
  for (int64_t s = 16; s <= 1024; s *= 2) {
    const double compute = double(s) * double(s) * double(s) / 1000.0;
    rep.points.push_back(sweep_point(s, std::to_string(s), "", 2.0 * double(s * s * s), 0, synthetic(1000, compute),
                                     "library"));
  }
  return rep;
}

}  // namespace

TEST_CASE("find_crossover: a straight line in log-log is crossed exactly where the power law says") {
  // y = 1e6 / x^2: below 1 above x = 1000; measured at 100 and 10000 only.
  const Crossover c = find_crossover({100, 10000}, {100, 0.01}, 1.0);
  REQUIRE(c.kind == Crossover::Kind::kAt);
  CHECK(c.x == doctest::Approx(1000).epsilon(1e-9));
  CHECK(c.below == 100);
  CHECK(c.above == 10000);
}

TEST_CASE("find_crossover: from the start, never, no data, and a dip that does not last") {
  CHECK(find_crossover({1, 2, 4}, {0.1, 0.05, 0.01}, 0.5).kind == Crossover::Kind::kFromStart);
  const Crossover never = find_crossover({1, 2, 4}, {0.9, 0.8, 0.7}, 0.5);
  CHECK(never.kind == Crossover::Kind::kNever);
  CHECK(never.x == 4);
  CHECK(find_crossover({}, {}, 0.5).kind == Crossover::Kind::kNoData);
  // Below at 2, above again at 4, below from 8 on: the crossover is the last one, between 4 and 8.
  const Crossover last = find_crossover({1, 2, 4, 8, 16}, {0.9, 0.1, 0.9, 0.1, 0.05}, 0.5);
  REQUIRE(last.kind == Crossover::Kind::kAt);
  CHECK(last.below == 4);
  CHECK(last.above == 8);
  // A zero (a speed-up ratio cannot be logged) falls back to linear in y against log x: halfway in y
  // is halfway between 4 and 8 in log x.
  const Crossover linear = find_crossover({4, 8}, {1.0, 0.0}, 0.5);
  REQUIRE(linear.kind == Crossover::Kind::kAt);
  CHECK(linear.x == doctest::Approx(std::sqrt(32.0)));
}

TEST_CASE("sweep_point: host is every row but the compute, shares of the wall per call") {
  const SweepPoint p = sweep_point(64, "64", "[64x64] @ [64x64]", 2.0 * 64 * 64 * 64, 0, synthetic(300, 700), "library");
  CHECK(p.host_ns == doctest::Approx(300));
  CHECK(p.compute_ns == doctest::Approx(700));
  CHECK(p.host_share == doctest::Approx(0.3));
  CHECK(p.compute_share == doctest::Approx(0.7));
  CHECK(p.rows.size() == 3);  // the n/a launch row is left out
  CHECK(p.rows[1].name == "dispatch/CPU");
  CHECK(p.rate() == doctest::Approx(2.0 * 64 * 64 * 64 / 1e-6));
}

TEST_CASE("host-share crossovers of a synthetic sweep are where the formula puts them") {
  const SweepReport rep = cubic_sweep();
  // share = 1000 / (1000 + s^3/1000) = 0.5 at s^3 = 1e6, s = 100; = 0.05 at s^3 = 1.9e7, s ~ 266.8.
  const Crossover half = rep.host_under(0.5), five = rep.host_under(0.05);
  REQUIRE(half.kind == Crossover::Kind::kAt);
  REQUIRE(five.kind == Crossover::Kind::kAt);
  CHECK(half.below == 64);
  CHECK(half.above == 128);
  CHECK(five.below == 256);
  CHECK(five.above == 512);
  // The log-log interpolation between two measured sizes: within 15% of the exact crossing.
  CHECK(half.x == doctest::Approx(100).epsilon(0.15));
  CHECK(five.x == doctest::Approx(std::cbrt(1.9e7)).epsilon(0.15));
  const std::vector<std::string> words = rep.crossover_words();
  REQUIRE(words.size() == 2);
  CHECK(words[1].find("under 5.0% of the wall above size ~ ") != std::string::npos);
  CHECK(words[1].find("between the measured 256 and 512") != std::string::npos);
}

// A measured size is written as it was measured: "(size = 1)", not "(size = 1.0)" beside "(size = 16)".
TEST_CASE("a crossover at the smallest measured size names that size as an integer") {
  SweepReport rep;
  rep.op = "relu";
  rep.swept = "size";
  rep.host_rows = "binding + dispatch";
  rep.compute_row = "library";
  for (int64_t s : {1, 16}) rep.points.push_back(sweep_point(s, std::to_string(s), "", 0, 8.0 * double(s), synthetic(1, 1000), "library"));
  const std::vector<std::string> words = rep.crossover_words();
  REQUIRE(words.size() == 2);
  CHECK(words[0].find("from the smallest (size = 1)") != std::string::npos);
  CHECK(words[0].find("1.0") == std::string::npos);
}

TEST_CASE("replay stops helping where the speed-up falls within the noise") {
  SweepReport rep = cubic_sweep();
  rep.replay_kind = "plan replay";
  for (SweepPoint& p : rep.points) {
    ModeFigures eager, replay;
    eager.wall = p.wall.median;
    eager.wall_p90 = eager.wall * 1.02;  // 2% noise
    replay.wall = p.compute_ns;          // replay removes all host work
    replay.wall_p90 = replay.wall * 1.02;
    p.eager = eager;
    p.replay = replay;
  }
  // speed-up = 1 + 1e6/s^3 > 1.02 until s^3 = 5e7, s ~ 368: between 256 and 512.
  const Crossover c = rep.replay_stops_helping();
  REQUIRE(c.kind == Crossover::Kind::kAt);
  CHECK(c.below == 256);
  CHECK(c.above == 512);
  CHECK(c.x == doctest::Approx(std::cbrt(5e7)).epsilon(0.15));
}

TEST_CASE("JSON and CSV carry every size and the crossovers") {
  const SweepReport rep = cubic_sweep();
  const auto j = nlohmann::json::parse(sweep_json(rep));
  CHECK(j["points"].size() == 7);
  CHECK(j["crossovers"]["host_under_5_percent"]["kind"] == "at");
  CHECK(j["crossovers"]["host_under_5_percent"]["between"][0] == 256);
  CHECK(j["points"][0]["rows"][0]["row"] == "binding");
  const std::string csv = sweep_csv(rep);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 8);  // header + 7 sizes
  CHECK(csv.rfind("size,spec,calls,wall_median_ns", 0) == 0);
  CHECK(csv.find("binding_median_ns,binding_p90_ns,dispatch/CPU_median_ns") != std::string::npos);
}

TEST_CASE("ceiling_share: rate over ceiling, 0 when either is missing") {
  CHECK(ceiling_share(50e9, 100e9) == doctest::Approx(0.5));
  CHECK(ceiling_share(120e9, 100e9) == doctest::Approx(1.2));  // a run can beat the measured ceiling
  CHECK(ceiling_share(50e9, 0) == 0);                          // no ceiling: no share, no division by 0
  CHECK(ceiling_share(0, 100e9) == 0);
  CHECK(ceiling_share(-1, 100e9) == 0);
  CHECK(ceiling_share(std::nan(""), 100e9) == 0);
}

TEST_CASE("the ceiling: a share per size in the table, JSON figures and CSV column") {
  SweepReport rep = cubic_sweep();
  // Size s: 2 s^3 FLOP in 1000 + s^3/1000 ns. At 1024 that is about 2e12 FLOP/s; a ceiling of 4e12 puts it
  // at 50%, and the share of every size is its rate over the ceiling.
  rep.ceiling.rate = 4e12;
  rep.ceiling.measured = true;
  rep.ceiling.how = "best of 5 cblas_sgemm 1024x1024x1024 calls";
  rep.ceiling.spent_ns = 1.2e8;
  const SweepPoint& last = rep.points.back();
  const double s3 = 1024.0 * 1024 * 1024;
  CHECK(last.rate() == doctest::Approx(2 * s3 / ((1000 + s3 / 1000) * 1e-9)));
  CHECK(rep.ceiling_share(last) == doctest::Approx(last.rate() / 4e12));
  CHECK(rep.ceiling_share(last) == doctest::Approx(0.5).epsilon(0.01));

  std::ostringstream table;
  print_sweep_table(rep, table);
  CHECK(table.str().find("ceiling: 4.0 TFLOP/s, measured: best of 5 cblas_sgemm") != std::string::npos);
  CHECK(table.str().find("% of ceiling") != std::string::npos);
  CHECK(table.str().find("50.0%\n") != std::string::npos);  // the last size, the last column

  const auto j = nlohmann::json::parse(sweep_json(rep));
  CHECK(j["figures"]["ceiling.rate"]["value"] == 4e12);
  CHECK(j["figures"]["ceiling.rate"]["unit"] == "FLOP/s");
  CHECK(j["figures"]["ceiling.measured"]["value"] == 1);
  CHECK(j["ceiling"]["how"] == rep.ceiling.how);
  CHECK(j["points"][6]["figures"]["ceiling.share"]["value"].get<double>() == doctest::Approx(rep.ceiling_share(last)));
  CHECK(j["points"][6]["figures"]["ceiling.share"]["unit"] == "ratio");

  const std::string csv = sweep_csv(rep);
  CHECK(csv.find("rate,rate_unit,ceiling,ceiling_share,") != std::string::npos);
  CHECK(csv.find(",FLOP/s,4e+12,0.499") != std::string::npos);

  // A datasheet figure says so; no ceiling leaves the column empty and the figures out.
  rep.ceiling.measured = false;
  rep.ceiling.how = "NVIDIA datasheet, H100 SXM";
  std::ostringstream datasheet;
  print_sweep_table(rep, datasheet);
  CHECK(datasheet.str().find("datasheet peak (not measured): NVIDIA datasheet") != std::string::npos);
  CHECK(nlohmann::json::parse(sweep_json(rep))["figures"]["ceiling.measured"]["value"] == 0);
  rep.ceiling = Ceiling{0, false, "no datasheet peak for this device", 0};
  std::ostringstream none;
  print_sweep_table(rep, none);
  CHECK(none.str().find("ceiling: none (no datasheet peak") != std::string::npos);
  const auto jn = nlohmann::json::parse(sweep_json(rep));
  CHECK(!jn["figures"].contains("ceiling.rate"));
  CHECK(jn["points"][0]["figures"].empty());
}

TEST_CASE("the SVG has both panels, every curve and the crossover marks, and escapes text") {
  SweepReport rep = cubic_sweep();
  rep.device = "cpu <2 threads> & more";
  const std::string svg = sweep_svg(rep);
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(std::count(svg.begin(), svg.end(), '\n') > 50);
  for (const char* s : {"host &lt; 50%", "host &lt; 5%", "wall", "compute", "host share", "&lt;2 threads&gt; &amp; more"})
    CHECK_MESSAGE(svg.find(s) != std::string::npos, std::string(s));
  size_t polylines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
  CHECK(polylines == 4);  // wall, compute, host, host share
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("inf") == std::string::npos);
}

TEST_CASE("sweep cells under twice one probe's cost are marked, host-timed rows only") {
  SweepReport rep;
  rep.op = "relu";
  rep.swept = "size";
  rep.host_rows = "binding + dispatch";
  rep.compute_row = "library";
  // binding and dispatch/CPU 15 ns each (host 30 ns), library 5000 ns; a GPU-style row of 10 ns too.
  LayerBreakdown b = synthetic(30, 5000);
  b.rows.push_back({RowKind::kGpu, "", {"kernel"}, Distribution::of(std::vector<double>(5, 10.0)), true, "", "", false});
  rep.points.push_back(sweep_point(1024, "1024", "", 0, 8192, b, "library"));
  rep.probe_ns = 20;
  std::ostringstream marked;
  print_sweep_table(rep, marked);
  const std::string text = marked.str();
  CHECK(text.find("0.01 us*") != std::string::npos);   // binding, dispatch: 15 < 40
  CHECK(text.find("5.00 us*") == std::string::npos);   // the library row is far above
  CHECK(text.find("cells marked * (in binding, dispatch/CPU)") != std::string::npos);  // not the gpu row
  CHECK(nlohmann::json::parse(sweep_json(rep))["probe_ns"] == 20);
  rep.probe_ns = 0;  // not measured: nothing marked
  std::ostringstream plain;
  print_sweep_table(rep, plain);
  CHECK(plain.str().find('*') == std::string::npos);
}
