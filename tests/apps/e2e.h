// Shared checks for the end-to-end tests: they run the real strata binary (STRATA_BIN) and look at what
// a user would see: the exit code, stdout, stderr and the files left behind.
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "reports/model/units.h"
#include "reports/model/report.h"  // format_ns and friends: the tables print the JSON's figures through them
#include "tests/support/subprocess.h"

namespace strata::test {

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline int count_of(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// Short runs: the e2e tests check behaviour, never speed.
inline std::vector<std::string> fast(std::vector<std::string> args) {
  for (const char* a : {"--repeat", "3", "--warmup", "0"}) args.push_back(a);
  return args;
}

// A short run on the CPU stack, whatever this build and machine have: with a GPU, --device auto would
// pick it, and these tests are about the CPU path.
inline std::vector<std::string> cpu(std::vector<std::string> args) {
  args = fast(std::move(args));
  args.push_back("--device");
  args.push_back("cpu");
  return args;
}

// What every run, good or bad, must not show: a crash, a sanitizer report, an uncaught exception.
inline void check_no_crash(const RunResult& r) {
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.term_signal == 0);
  for (const char* bad : {"terminate called", "Aborted", "AddressSanitizer", "LeakSanitizer",
                          "runtime error:", "Segmentation fault", "what():", "internal error"}) {
    CHECK_MESSAGE(!contains(r.err, bad), "stderr contains '" << std::string(bad) << "'");
  }
}

// A refusal: the exit code, one strata message on stderr that contains `message`, and nothing on stdout
// (no partial table).
inline void check_refused(const RunResult& r, int exit_code, const std::string& message) {
  check_no_crash(r);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == exit_code);
  CHECK(contains(r.err, message));
  CHECK(count_of(r.err, "strata: ") == 1);
  CHECK(r.err.rfind("strata: ", 0) == 0);
  CHECK(r.out.empty());
}

// A run that also wrote its report with --json: what the user saw, and the report (null when the run
// failed or wrote none). The tests assert on the report's figures and fields rather than on the table's
// wording, and check_trace_table ties the table to the report.
struct Reported {
  RunResult run;
  nlohmann::json doc;
};

inline Reported run_reported(std::vector<std::string> args) {
  TempDir dir;
  const std::string path = dir.file("report.json");
  args.push_back("--json");
  args.push_back(path);
  Reported r{run_strata(args), nullptr};
  if (r.run.exit_code == 0) r.doc = nlohmann::json::parse(read_file(path));
  return r;
}

// The lines of `out` from the line that starts with `first` (excluded) up to the next line that starts
// with `last` (included): one table of a report.
inline std::vector<std::string> lines_between(const std::string& out, const std::string& first,
                                              const std::string& last) {
  std::istringstream in(out);
  std::vector<std::string> lines;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (inside) {
      lines.push_back(line);
      if (line.rfind(last, 0) == 0) break;
    } else {
      inside = line.rfind(first, 0) == 0;
    }
  }
  return lines;
}

// The first line whose first column is `label` (the label, then spaces), or "".
inline std::string table_line(const std::string& out, const std::string& label) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(label + " ", 0) == 0) return line;
  return "";
}

// The trace table printed what the JSON report holds: one line per steady row, in the report's order,
// labelled with its layer, showing its `what` (as far as the column holds it) and its median as
// format_ns prints it; a row that does not apply shows no figure and a reason in its place; the wall
// line shows the wall's median.
inline void check_trace_table(const std::string& out, const nlohmann::json& doc) {
  const std::vector<std::string> lines = lines_between(out, "layer     what", "wall ");
  const nlohmann::json& rows = doc["steady"]["rows"];
  INFO("stdout:\n" << out);
  REQUIRE(lines.size() == rows.size() + 1);
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& row = rows[i];
    const std::string& line = lines[i];
    CAPTURE(line);
    const std::string layer = row["layer"].get<std::string>();
    CHECK(line.rfind(layer + std::string(10 - layer.size(), ' '), 0) == 0);
    const std::string rest = line.substr(std::min<size_t>(10, line.size()));
    if (row["applicable"].get<bool>()) {
      if (row.contains("what")) CHECK(contains(rest, row["what"].get<std::string>().substr(0, 48)));
      CHECK(contains(rest, reports::format_ns(row["time"]["median"].get<double>())));
    } else {
      CHECK_FALSE(row.contains("time"));
      CHECK(rest.size() > 3);  // the reason the row does not apply, not an empty row
      CHECK_FALSE(contains(rest, " us"));
      CHECK_FALSE(contains(rest, " ms"));
    }
  }
  CHECK(contains(lines.back(), reports::format_ns(doc["steady"]["wall"]["median"].get<double>())));
}

// How many complete ("X") events of each name a Chrome trace file holds, of category `cat` when given.
inline std::map<std::string, int> trace_event_counts(const std::string& path, const std::string& cat = "") {
  std::map<std::string, int> counts;
  const nlohmann::json events = nlohmann::json::parse(read_file(path))["traceEvents"];
  for (const nlohmann::json& e : events)
    if (e.value("ph", "") == "X" && (cat.empty() || e.value("cat", "") == cat)) ++counts[e.value("name", "")];
  return counts;
}

// The row of the report's steady breakdown for `layer` (and dispatch `key`, when given), or null.
inline nlohmann::json report_row(const nlohmann::json& doc, const std::string& layer, const std::string& key = "") {
  for (const nlohmann::json& row : doc["steady"]["rows"])
    if (row["layer"] == layer && (key.empty() || row.value("key", "") == key)) return row;
  return nullptr;
}

}  // namespace strata::test
