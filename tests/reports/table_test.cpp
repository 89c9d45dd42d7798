// The breakdown table (reports/formats/table.cpp): rows, units and the summary lines.
#include "reports/formats/table.h"
#include "reports/model/units.h"

#include <doctest/doctest.h>

#include <sstream>

using namespace strata;
using namespace strata::reports;

TEST_CASE("format_ns picks a unit that keeps the digits readable") {
  CHECK(format_ns(90) == "0.09 us");
  CHECK(format_ns(41700) == "41.70 us");
  CHECK(format_ns(2.5e6) == "2.50 ms");
  CHECK(format_ns(3.25e9) == "3.250 s");
  CHECK(format_rate(60.1e12) == "60.1 TFLOP/s");
  CHECK(format_rate(20.6e9) == "20.6 GFLOP/s");
  CHECK(format_rate(5e6) == "5.0 MFLOP/s");
}

TEST_CASE("the table: header, one line per row, n/a rows, wall with the rate, check and notes") {
  TraceReport r;
  r.op = "matmul";
  r.description = "[64x64] @ [64x64]";
  r.dtype = "f32";
  r.device = "cpu";
  r.keys = "CPU";
  r.flops = 1e5;
  r.steady.rows.push_back({RowKind::kBinding, "", {"matmul"}, Distribution::of({100}), true, {}, {}});
  r.steady.rows.push_back({RowKind::kDispatch, "CPU", {"CPU"}, Distribution::of({100}), true, {}, {}});
  r.steady.rows.push_back({RowKind::kLibrary, "", {"cblas_sgemm"}, Distribution::of({800}), true, {}, {}});
  r.steady.rows.push_back({RowKind::kLaunch, "", {}, {}, false, {}, {}});
  r.steady.wall = Distribution::of({1000});
  r.describe_na(RowKind::kLaunch, "n/a on the CPU: no launch");
  r.describe(RowKind::kWall, "", "binding begin -> library end");
  r.check.ran = true;
  r.check.relative_error = 2e-7;
  r.check.tolerance = 1e-5;
  r.notes = {"GPU timing unavailable"};
  add_rate_figures(r);
  std::ostringstream out;
  print_trace_table(r, out);
  const std::string t = out.str();
  INFO(t);
  CHECK(t.find("matmul  [64x64] @ [64x64]  f32  cpu   keys: CPU\n") == 0);
  CHECK(t.find("layer     what") != std::string::npos);
  CHECK(t.find("binding   matmul") != std::string::npos);
  CHECK(t.find("0.10 us") != std::string::npos);
  CHECK(t.find("10.0%") != std::string::npos);  // binding share of the wall
  CHECK(t.find("80.0%") != std::string::npos);
  CHECK(t.find("launch    n/a on the CPU: no launch\n") != std::string::npos);
  CHECK(t.find("wall      binding begin -> library end") != std::string::npos);
  CHECK(t.find("100.0 GFLOP/s (f32)") != std::string::npos);  // 1e5 flops in 1 us
  CHECK(t.find("check: relative error 2e-07") != std::string::npos);
  CHECK(t.find("PASS") != std::string::npos);
  CHECK(t.find("note: GPU timing unavailable\n") != std::string::npos);
  CHECK(t.find("*") == std::string::npos);  // no row is marked below resolution unless measured so
}

TEST_CASE("a row below the probe's resolution is marked, not printed as a plain figure") {
  TraceReport r;
  r.steady.rows.push_back({RowKind::kBinding, "", {"matmul"}, Distribution::of({30}), true, {}, {}});
  r.steady.rows.back().below_resolution = true;
  r.steady.rows.push_back({RowKind::kLibrary, "", {"cblas_sgemm"}, Distribution::of({800}), true, {}, {}});
  r.steady.wall = Distribution::of({830});
  std::ostringstream out;
  print_trace_table(r, out);
  const std::string t = out.str();
  INFO(t);
  CHECK(t.find("0.03 us*") != std::string::npos);
  CHECK(t.find("0.80 us*") == std::string::npos);
}

TEST_CASE("a memory-bound op's rate is its bandwidth, not FLOP/s") {
  CHECK(format_bandwidth(12.34e9) == "12.3 GB/s");
  CHECK(format_bandwidth(3.3e12) == "3.30 TB/s");
  TraceReport r;
  r.op = "relu";
  r.dtype = "f32";
  r.flops = 1000;
  r.bytes_moved = 8000;  // 1000 f32 read + 1000 written
  r.steady.rows.push_back({RowKind::kLibrary, "", {"relu (cpu loop)"}, Distribution::of({1000}), true, {}, {}});
  r.steady.wall = Distribution::of({1000});
  add_rate_figures(r);
  std::ostringstream out;
  print_trace_table(r, out);
  INFO(out.str());
  CHECK(out.str().find("8.0 GB/s (bytes read + written)") != std::string::npos);  // 8000 B in 1 us
  CHECK(out.str().find("FLOP/s") == std::string::npos);
}

TEST_CASE("timed calls say when the time limit ended an automatic run early") {
  TraceReport r;
  r.steady.rows.push_back({RowKind::kLibrary, "", {"cblas_sgemm"}, Distribution::of({800}), true, {}, {}});
  r.steady.wall = Distribution::of({800});
  r.repeat = 12;
  r.repeat_auto = true;
  r.planned_repeat = 12;
  std::ostringstream full;
  print_trace_table(r, full);
  CHECK(full.str().find("timed calls: 12 (auto) after") != std::string::npos);
  r.planned_repeat = 5000;
  std::ostringstream stopped;
  print_trace_table(r, stopped);
  CHECK(stopped.str().find("timed calls: 12 (auto; of 5000 planned: stopped at twice --budget) after") != std::string::npos);
}
