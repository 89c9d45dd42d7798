#include "apps/strata/command_output.h"

#include "lib/error.h"
#include "lib/output_file.h"
#include "measure/harness.h"
#include "reports/formats/json_text.h"

namespace strata::app {

void write_output_file(const std::string& path, const std::string& text, std::ostream& out, std::ostream& err,
                       const std::string& hint) {
  write_file_atomically(path, text);
  out << "wrote " << path << hint << "\n";
  if (reports::json_text_replaced_bytes(text))  // Note [JSON text is valid UTF-8]
    err << "strata: warning: " << reports::json_text_replaced_warning(path) << "\n";
}

int write_command_output(const TraceOptions& o, const CommandOutput& output, std::ostream& out, std::ostream& err) {
  measure::stop_if_interrupted();
  output.print_table(out);
  out.flush();
  if (!o.json_path.empty()) {
    measure::stop_if_interrupted();
    write_output_file(o.json_path, output.json(), out, err);
  }
  if (!o.chrome_trace_path.empty()) {
    measure::stop_if_interrupted();
    reports::ChromeTraceWriter writer;
    writer.add_metadata("strata version", STRATA_VERSION);
    output.chrome_trace(writer);
    write_output_file(o.chrome_trace_path, writer.str(), out, err, output.chrome_trace_hint);
  }
  if (!output.check.passed()) {
    err << "strata: check failed: relative error " << output.check.relative_error << " exceeds the "
        << output.tolerance_name << " " << output.check.tolerance << "\n";
    return static_cast<int>(ExitCode::kCheckFailed);
  }
  return 0;
}

}  // namespace strata::app
