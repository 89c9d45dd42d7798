// strata: trace one tensor operation through every layer of a real tensor stack.
#include <algorithm>
#include <csignal>
#include <cstring>
#include <iostream>
#include <unistd.h>

#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "apps/strata/commands.h"
#include "apps/strata/harness.h"
#include "lib/error.h"
#include "lib/output_file.h"

namespace {

void on_signal(int) {
  // First signal: stop at the next call boundary. Second: the run is stuck inside a call; leave now,
  // without a partial output file. SIGINT and SIGTERM both end with exit code 130 either way, so a
  // script sees one code for "interrupted, no report" (docs/errors.md).
  if (strata::app::g_interrupted.exchange(true)) {
    strata::remove_pending_output();
    const char msg[] = "\nstrata: interrupted\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(static_cast<int>(strata::ExitCode::kInterrupted));
  }
  // A write waiting for a reader that does not read (a pipe, a terminal) gives up at once.
  strata::interrupt_output_writes();
}

// The options `trace` and `compare` share: the op, its sizes, the device, and what to measure and write.
CLI::Option* add_op_options(CLI::App* cmd, strata::app::TraceOptions& t, int64_t& out_channels) {
  cmd->add_option("op", t.op, "matmul | linear | conv | relu | add")->required();
  cmd->add_option("spec", t.spec, "sizes, e.g. 1024 or 512x1024x256 (see the formats below)")->required();
  cmd->add_option("--device", t.device, "auto | cpu | cuda | cuda:N  (auto: the GPU if one works, else the CPU)")
      ->capture_default_str();
  cmd->add_option("--dtype", t.dtype, "f32 | f64 (CPU and GPU) | f16 | bf16 (GPU)")->capture_default_str();
  cmd->add_option("--repeat", t.repeat, "timed calls (default: as many as fit in --budget, 10 to 10000)");
  cmd->add_option("--warmup", t.warmup, "untraced calls between the cold call and the timed ones")->capture_default_str();
  cmd->add_option("--budget", t.budget_s, "seconds of timed calls when --repeat is not given")->capture_default_str();
  cmd->add_option("--seed", t.seed, "seed of the random inputs (uniform in [-1, 1))")->capture_default_str();
  cmd->add_flag("--requires-grad", t.requires_grad, "inputs require grad: the Autograd key records a backward node");
  cmd->add_flag("--check", t.check, "compare the result with a float64 reference; exit 3 if outside tolerance");
  cmd->add_flag("--tf32", t.tf32, "f32 matmul/linear/conv on TF32 tensor cores (CUDA only)");
  cmd->add_flag("--no-device-timing", t.no_device_timing, "do not start CUPTI: host timers only");
  // An empty path would read as "no file requested" later on: refuse it here instead of ignoring it.
  const CLI::Validator non_empty([](std::string& v) { return v.empty() ? std::string("output path is empty") : ""; },
                                 "FILE");
  cmd->add_option("--json", t.json_path, "write every figure and the environment to FILE (JSON)")->check(non_empty);
  cmd->add_option("--chrome-trace", t.chrome_trace_path, "write a Chrome trace JSON timeline to FILE (Perfetto)")
      ->check(non_empty);
  CLI::Option* oc = cmd->add_option("--out-channels", out_channels, "conv: output channels K (default: input channels)");
  cmd->add_option("--kernel", t.conv.kernel, "conv: square kernel size R")->capture_default_str();
  cmd->add_option("--stride", t.conv.stride, "conv: stride")->capture_default_str();
  cmd->add_option("--pad", t.conv.pad, "conv: zero padding on each side")->capture_default_str();
  return oc;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

const char* kExamples = R"(
examples:
  strata trace matmul 1024                      # where one 1024^3 matmul spends its time
  strata trace matmul 512x1024x256 --check      # M x K x N, checked against a float64 reference
  strata trace linear 32x768x3072 --requires-grad
  strata trace conv 32x64x56x56 --out-channels 64 --kernel 3 --pad 1
  strata trace relu 1048576 --chrome-trace relu.json
  strata compare matmul 64 --ops-per-graph 16   # eager vs graph (GPU) / plan (CPU) replay
  strata ops                                    # operators, schemas and the keys with kernels

exit codes: 0 ok, 1 failure (library error, output not written), 2 usage error,
            3 --check failed, 4 device unavailable, 130 interrupted
)";

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  CLI::App app{"strata: trace one tensor operation through binding, dispatch, library, launch, queue and GPU"};
  app.footer(kExamples);
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("strata ") + STRATA_VERSION);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "log how strata sizes and runs the measurement (to stderr)");

  strata::app::TraceOptions t;
  int64_t out_channels = 0;
  CLI::App* trace = app.add_subcommand("trace", "Run one op many times and print where each call's time went");
  CLI::Option* oc = add_op_options(trace, t, out_channels);
  trace->footer("op formats:\n" + strata::frontend::spec_help() + kExamples);

  strata::app::CompareOptions c;
  int64_t compare_out_channels = 0;
  CLI::App* compare = app.add_subcommand(
      "compare", "Run one op eager and replayed (CUDA Graph on a GPU, plan replay on the CPU), side by side");
  CLI::Option* coc = add_op_options(compare, c.trace, compare_out_channels);
  compare->add_option("--ops-per-graph", c.ops_per_graph, "K: consecutive calls captured into one graph / plan")
      ->capture_default_str();
  compare->footer("--repeat is the number of rounds (K calls eager, or one replay of K calls) per mode.\n"
                  "op formats:\n" + strata::frontend::spec_help() + kExamples);

  std::string trace_file;
  CLI::App* check_trace = app.add_subcommand("check-trace", "Check a Chrome trace JSON file against strata's trace invariants");
  check_trace->add_option("file", trace_file, "the trace to check")->required();

  CLI::App* ops = app.add_subcommand("ops", "List operators, their schemas, and the dispatch keys that have kernels");
  CLI::App* devices = app.add_subcommand("devices", "List the devices strata can use, or say exactly why there is no GPU");

  // CLI11 answers an unknown command with "A subcommand is required"; name what was typed instead, and
  // the nearest command when it looks like a typo ("trcae").
  if (argc > 1 && argv[1][0] != '-') {
    std::string typed = argv[1], known, nearest;
    size_t best = 3;  // suggest only within two edits
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      const std::string& name = sub->get_name();
      found = found || name == typed;
      known += (known.empty() ? "" : ", ") + name;
      if (size_t d = edit_distance(typed, name); d < best) best = d, nearest = name;
    }
    if (!found) {
      std::cerr << "strata: usage error: unknown command '" << typed << "'"
                << (nearest.empty() ? "" : "; did you mean '" + nearest + "'?") << "\n  commands: " << known
                << " (see strata --help)\n";
      return static_cast<int>(strata::ExitCode::kUsage);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message (and usage hints) to stderr
    return static_cast<int>(strata::ExitCode::kUsage);
  }
  // Diagnostics go to stderr through spdlog, so stdout carries only the report.
  spdlog::set_default_logger(spdlog::stderr_color_mt("strata"));
  spdlog::set_pattern("strata: %l: %v");
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::warn);
  try {
    if (*oc) t.conv.out_channels = out_channels;
    if (*coc) c.trace.conv.out_channels = compare_out_channels;
    if (*trace) return strata::app::run_trace(t);
    if (*compare) return strata::app::run_compare(c);
    if (*ops) return strata::app::run_ops();
    if (*check_trace) return strata::app::run_check_trace(trace_file);
    if (*devices) return strata::app::run_devices();
  } catch (const strata::Error& e) {
    std::cerr << "strata: " << (e.code() == strata::ExitCode::kUsage ? "usage error: " : "error: ") << e.what() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "strata: internal error: " << e.what() << "\n";
    return static_cast<int>(strata::ExitCode::kFailure);
  }
  return 0;
}
