// The --json report (reports/formats/json_report.cpp): every figure, parseable, with the samples; a name
// that is not UTF-8 written all the same (reports/formats/json_text.h).
#include "reports/formats/json_report.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "reports/formats/json_text.h"

using namespace strata;
using namespace strata::reports;

namespace {

TraceReport sample_report() {
  TraceReport r;
  r.op = "matmul";
  r.spec = "matmul 64";
  r.description = "[64x64] @ [64x64]";
  r.schema = "matmul(Tensor self, Tensor other) -> Tensor";
  r.dtype = "f32";
  r.device = "cpu (2 OpenBLAS threads)";
  r.keys = "Autograd > CPU";
  r.flops = 2.0 * 64 * 64 * 64;
  r.warmup = 1;
  r.repeat = 3;
  r.steady.calls = 3;
  r.steady.rows.push_back({RowKind::kBinding, "", {"matmul"}, Distribution::of({100, 300, 200}), true, {}, {}});
  r.steady.rows.push_back({RowKind::kDispatch, "Autograd", {"Autograd"}, Distribution::of({50, 50, 50}), true, {}, {}});
  r.steady.rows.push_back({RowKind::kLibrary, "", {"cblas_sgemm"}, Distribution::of({1000, 2000, 3000}), true, {}, {}});
  r.steady.rows.push_back({RowKind::kGpu, "", {}, {}, false, {}, {}});
  r.steady.wall = Distribution::of({1200, 2400, 3300});
  r.cold.calls = 1;
  r.cold.wall = Distribution::of({9000});
  r.describe(RowKind::kDispatch, "Autograd", "record MmBackward");
  r.check.ran = true;
  r.check.relative_error = 1e-7;
  r.check.tolerance = 1e-5;
  r.env.clock_source = "steady_clock";
  r.notes = {"a note"};
  add_rate_figures(r);
  return r;
}

}  // namespace

TEST_CASE("the JSON report parses and carries every figure with its samples") {
  const auto doc = nlohmann::json::parse(trace_report_json(sample_report()));
  CHECK(doc["op"] == "matmul");
  CHECK(doc["dispatch_keys"] == "Autograd > CPU");
  CHECK(doc["repeat"] == 3);
  CHECK(doc["steady"]["calls"] == 3);
  const auto& rows = doc["steady"]["rows"];
  REQUIRE(rows.size() == 4);
  CHECK(rows[0]["layer"] == "binding");
  CHECK(rows[0]["time"]["median"] == 200);
  CHECK(rows[0]["time"]["p90"] == 300);
  CHECK(rows[0]["time"]["unit"] == "ns");
  CHECK(rows[0]["time"]["samples"] == nlohmann::json::array({100, 300, 200}));
  CHECK(rows[1]["key"] == "Autograd");
  CHECK(rows[1]["what"] == "record MmBackward");
  CHECK(rows[3]["applicable"] == false);
  CHECK_FALSE(rows[3].contains("time"));  // not applicable: no invented zeros
  CHECK(doc["steady"]["wall"]["median"] == 2400);
  CHECK(doc["cold"]["wall"]["median"] == 9000);
  CHECK(doc["achieved_flops_per_s"].get<double>() == doctest::Approx(2.0 * 64 * 64 * 64 / 2400e-9));
  CHECK(doc["check"]["passed"] == true);
  CHECK(doc["notes"][0] == "a note");
  CHECK(doc["environment"]["clock"]["source"] == "steady_clock");
}

TEST_CASE("a failed check is reported as failed") {
  TraceReport r = sample_report();
  r.check.relative_error = 1.0;
  const auto doc = nlohmann::json::parse(trace_report_json(r));
  CHECK(doc["check"]["passed"] == false);
  r.check.ran = false;
  CHECK_FALSE(nlohmann::json::parse(trace_report_json(r)).contains("check"));
}

TEST_CASE("each breakdown carries its timestamp checks under the names the GPU validation reads") {
  TraceReport r = sample_report();
  r.steady.timestamps.launches_outside_zones = 1;
  r.steady.timestamps.kernels_before_launch = 2;
  r.steady.timestamps.kernels_without_latency = 3;
  r.steady.timestamps.kernels_latency_disordered = 4;
  const auto doc = nlohmann::json::parse(trace_report_json(r));
  const auto& t = doc["steady"]["timestamps"];
  CHECK(t.size() == 4);
  CHECK(t["launches_outside_zones"] == 1);
  CHECK(t["kernels_before_launch"] == 2);
  CHECK(t["kernels_without_latency"] == 3);
  CHECK(t["kernels_latency_disordered"] == 4);
  CHECK(doc["cold"]["timestamps"]["kernels_latency_disordered"] == 0);
}

// Note [JSON text is valid UTF-8]: a name read from freed memory (a span's name pointing into a dead
// std::string, as the compiled GPU path's launch zone once did) reaches the sequence's op log as bytes
// that are not UTF-8. The file is still written, each such byte as U+FFFD, and the document is marked.
TEST_CASE("a name that is not UTF-8 is written as U+FFFD and the document marked, never an exception") {
  const std::string clean = sequence_report_json(sample_report(), SequenceFigures{});
  CHECK_FALSE(json_text_replaced_bytes(clean));
  CHECK_FALSE(nlohmann::json::parse(clean).contains(kInvalidUtf8Key));

  TraceReport r = sample_report();
  r.steady.rows[2].names = {"cblas_sgemm", "launch\x9f"};
  SequenceFigures f;
  f.steps = 1;
  SequenceStepFigures step;
  step.op = "gelu_tanh";
  step.backend = "fused_gelu<<<>>> (generated, PTX) > c\x9f";  // the dead name's bytes after the separator
  f.per_step.push_back(step);
  std::string text;
  REQUIRE_NOTHROW(text = sequence_report_json(r, f));
  CHECK(json_text_replaced_bytes(text));
  const auto doc = nlohmann::json::parse(text);  // the parser checks UTF-8 too
  CHECK(doc[kInvalidUtf8Key].is_string());
  CHECK(doc["sequence"]["op_log"][0]["backend"] == "fused_gelu<<<>>> (generated, PTX) > c\xef\xbf\xbd");
  CHECK(doc["steady"]["rows"][2]["names"][1] == "launch\xef\xbf\xbd");
  CHECK(doc["op"] == "matmul");  // the rest of the report is all there
  CHECK(doc["steady"]["rows"][2]["time"]["median"] == 2000);
}
