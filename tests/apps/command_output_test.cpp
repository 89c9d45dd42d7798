// The output step trace and compare share (apps/strata/command_output.cpp): the table first, then the files
// asked for, each announced, and a failed check as the exit code.
#include "apps/strata/command_output.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "lib/error.h"
#include "reports/formats/json_text.h"
#include "tests/support/subprocess.h"

using namespace strata;
using namespace strata::app;

namespace {

CommandOutput sample_output(int& json_calls) {
  CommandOutput output;
  output.print_table = [](std::ostream& out) { out << "the table\n"; };
  output.json = [&json_calls] {
    ++json_calls;
    return std::string("{}\n");
  };
  output.chrome_trace = [](reports::ChromeTraceWriter& writer) { writer.add_metadata("op", "relu 8"); };
  output.chrome_trace_hint = " (hint)";
  output.tolerance_name = "f32 tolerance";
  return output;
}

}  // namespace

TEST_CASE("the output step prints the table and writes only the files asked for") {
  test::TempDir dir;
  int json_calls = 0;
  CommandOutput output = sample_output(json_calls);
  TraceOptions o;
  std::ostringstream out, err;
  CHECK(write_command_output(o, output, out, err) == 0);
  CHECK(out.str() == "the table\n");
  CHECK(json_calls == 0);  // no --json: the document is never built

  o.json_path = dir.file("r.json");
  o.chrome_trace_path = dir.file("t.json");
  out.str("");
  CHECK(write_command_output(o, output, out, err) == 0);
  CHECK(json_calls == 1);
  CHECK(out.str() == "the table\nwrote " + o.json_path + "\nwrote " + o.chrome_trace_path + " (hint)\n");
  CHECK(test::read_file(o.json_path) == "{}\n");
  // The trace's "strata" header holds the command's own metadata beside the version the step adds.
  const auto header = nlohmann::json::parse(test::read_file(o.chrome_trace_path))["strata"];
  CHECK(header.contains("strata version"));
  CHECK(header["op"] == "relu 8");
  CHECK(err.str().empty());
}

TEST_CASE("a failed check is the exit code, after every output was written") {
  test::TempDir dir;
  int json_calls = 0;
  CommandOutput output = sample_output(json_calls);
  output.check.ran = true;
  output.check.relative_error = 0.5;
  output.check.tolerance = 1e-5;
  TraceOptions o;
  o.json_path = dir.file("r.json");
  std::ostringstream out, err;
  CHECK(write_command_output(o, output, out, err) == static_cast<int>(ExitCode::kCheckFailed));
  CHECK(test::exists(o.json_path));
  CHECK(err.str() == "strata: check failed: relative error 0.5 exceeds the f32 tolerance 1e-05\n");
}

// Note [JSON text is valid UTF-8]: a finished run keeps its file when a name is not UTF-8, and says so.
TEST_CASE("a JSON document with a name that is not UTF-8 is written all the same, with a warning") {
  test::TempDir dir;
  int json_calls = 0;
  CommandOutput output = sample_output(json_calls);
  output.json = [] { return reports::json_text({{"kernel", "fused\x9f"}, {"gpu_ns", 5950}}); };
  TraceOptions o;
  o.json_path = dir.file("r.json");
  std::ostringstream out, err;
  CHECK(write_command_output(o, output, out, err) == 0);
  const auto doc = nlohmann::json::parse(test::read_file(o.json_path));
  CHECK(doc["kernel"] == "fused\xef\xbf\xbd");
  CHECK(doc["gpu_ns"] == 5950);
  CHECK(out.str() == "the table\nwrote " + o.json_path + "\n");
  CHECK(err.str().find("strata: warning: " + o.json_path + ": some strings held bytes that are not UTF-8") == 0);
}

TEST_CASE("a Chrome trace with a name that is not UTF-8 is written all the same, with the same warning") {
  test::TempDir dir;
  int json_calls = 0;
  CommandOutput output = sample_output(json_calls);
  output.chrome_trace = [](reports::ChromeTraceWriter& writer) { writer.add_metadata("op", "fused\x9f"); };
  TraceOptions o;
  o.chrome_trace_path = dir.file("t.json");
  std::ostringstream out, err;
  CHECK(write_command_output(o, output, out, err) == 0);
  const auto doc = nlohmann::json::parse(test::read_file(o.chrome_trace_path));
  CHECK(doc["strata"]["op"] == "fused\xef\xbf\xbd");
  CHECK(doc["strata"][reports::kInvalidUtf8Key] == "1 byte");
  CHECK(out.str() == "the table\nwrote " + o.chrome_trace_path + " (hint)\n");
  CHECK(err.str().find("strata: warning: " + o.chrome_trace_path + ": some strings held bytes that are not UTF-8") ==
        0);
}
