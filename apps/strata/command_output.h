// The tail every measuring command ends with: print the table, write --json, write --chrome-trace, and
// turn a failed --check into the exit code. One step for `strata trace` and `strata compare`, so that
// both check for an interrupt before each output and write every file the same way.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "apps/strata/trace_request.h"
#include "reports/formats/chrome_trace.h"
#include "reports/model/report.h"

namespace strata::app {

struct CommandOutput {
  std::function<void(std::ostream&)> print_table;  // the terminal view, notes included
  std::function<std::string()> json;               // the --json document; called only when asked for
  // Adds the op's metadata and timelines to the --chrome-trace writer, after "strata version".
  std::function<void(reports::ChromeTraceWriter&)> chrome_trace;
  std::string chrome_trace_hint;  // said after "wrote PATH" ("" for none)
  reports::CheckResult check;
  std::string tolerance_name;  // "f32 tolerance": how the failure message names the tolerance
};

// Returns the process exit code: 0, or ExitCode::kCheckFailed when the check failed. A signal that
// arrived after the last call still means "no report": nothing more is printed or written.
int write_command_output(const TraceOptions& options, const CommandOutput& output, std::ostream& out,
                         std::ostream& err);

// Writes `text` to `path` atomically and says "wrote PATH"; warns on `err` when the text is a JSON document
// or Chrome trace that carries the mark of bytes that were not UTF-8 (Note [JSON text is valid UTF-8] in
// reports/formats/json_text.h). For every file a command writes.
void write_output_file(const std::string& path, const std::string& text, std::ostream& out, std::ostream& err,
                       const std::string& hint = "");

}  // namespace strata::app
