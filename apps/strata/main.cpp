// strata: trace one tensor operation through every layer of a real tensor stack.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "apps/strata/commands.h"
#include "apps/strata/python_frontend.h"
#include "gpu_validation_status.h"
#include "layers/compiler/compiler_cuda.h"
#include "lib/error.h"
#include "lib/nearest_name.h"
#include "lib/child_process.h"
#include "lib/output_file.h"
#include "measure/cpu_threads.h"
#include "measure/device_session.h"
#include "measure/harness.h"

namespace {

void on_signal(int) {
  // First signal: stop at the next call boundary. Second: the run is stuck inside a call; leave now,
  // without a partial output file. SIGINT and SIGTERM both end with exit code 130 either way, so a
  // script sees one code for "interrupted, no report" (docs/errors.md).
  if (strata::measure::g_interrupted.exchange(true)) {
    strata::remove_pending_output();
    strata::end_pending_child();  // a compiler strata waits for ends with it (Note [Waiting for a child])
    const char msg[] = "\nstrata: error: interrupted: a second signal while inside one call; no report written\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(static_cast<int>(strata::ExitCode::kInterrupted));
  }
  // A write waiting for a reader that does not read (a pipe, a terminal) gives up at once.
  strata::interrupt_output_writes();
  strata::interrupt_child_waits();
}

std::string as_typed(const std::string& s) { return strata::quote_typed(s); }

// Note [One number rule]: every integer option is read the way a size is (layers/frontend/op_spec.cpp):
// decimal digits only. A leading '-' is let through for the signed options so that a negative value
// reaches the option's own range check and message ("--pad must be between 0 and ..., got -1"). Left to
// itself, CLI11 reads integers with strtoll(base 0): 0x10 is 16, 010 is 8, ' 5' and '+5' pass, and a
// value past the type's range is clamped, so a later message would quote a number nobody typed.
// The value handed on is rewritten without leading zeros, which CLI11 would still read as octal.
template <typename T>
CLI::Validator whole_number() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        const bool negative = !v.empty() && v[0] == '-';
        const std::string digits = v.substr(negative ? 1 : 0);
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
          return as_typed(v) + " is not a whole number written in decimal digits (no '+', spaces, 0x, exponent)";
        }
        if (negative && std::is_unsigned_v<T>) {
          return as_typed(v) + " is negative; allowed: 0 to " + std::to_string(std::numeric_limits<T>::max());
        }
        T value{};
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
        if (ec == std::errc::result_out_of_range) {
          return as_typed(v) + " is out of range (" + (negative ? "at least " + std::to_string(std::numeric_limits<T>::min())
                                                              : "at most " + std::to_string(std::numeric_limits<T>::max())) + ")";
        }
        if (ec != std::errc() || end != v.data() + v.size()) return as_typed(v) + " is not a whole number";
        v = std::to_string(value);
        return "";
      },
      std::is_unsigned_v<T> ? "UINT" : "INT");
}

// The same rule for the options that take seconds (--budget, --sweep-budget): decimal, with an optional
// fraction and exponent ("0.5", "2e-3"). Left to CLI11, they are read with strtod: "0x10" is a hex float
// (16), " 5", "+5", "inf" and "nan" pass. A value past the double range is refused here rather than read
// as infinity; the range check of each option then says what it allows.
CLI::Validator decimal_number() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        const size_t digits_from = !v.empty() && v[0] == '-' ? 1 : 0;
        const bool decimal = v.size() > digits_from && (std::isdigit(static_cast<unsigned char>(v[digits_from])) ||
                                                        v[digits_from] == '.') &&
                             v.find_first_not_of("0123456789.eE+-") == std::string::npos;
        double value = 0;
        const auto [end, ec] = decimal ? std::from_chars(v.data(), v.data() + v.size(), value)
                                       : std::from_chars_result{v.data(), std::errc::invalid_argument};
        if (ec == std::errc::result_out_of_range) return as_typed(v) + " is out of range for a number of seconds";
        if (ec != std::errc() || end != v.data() + v.size()) {
          return as_typed(v) + " is not a decimal number (digits, an optional fraction and exponent, e.g. 0.5 or "
                               "2e-3; no '+', spaces, 0x, inf or nan)";
        }
        char canonical[32];  // what CLI11 then reads back: the same double, in a form strtod reads one way
        std::snprintf(canonical, sizeof canonical, "%.17g", value);
        v = canonical;
        return "";
      },
      "FLOAT");
}

// --threads N: the CPU's intra-op and OpenBLAS threads (measure/cpu_threads.h), checked by strata so that
// 0, a negative count, a word or a huge count get strata's message, not CLI11's.
void add_threads_option(CLI::App* cmd, strata::app::TraceOptions& t) {
  cmd->add_option("--threads", t.threads,
                  "N: CPU threads for strata's loops and OpenBLAS, as torch.set_num_threads(N) (default: "
                  "STRATA_NUM_THREADS, else the CPUs available)");
}

// Options whose empty string means "not given" (--emit, --arch, --autocast, --peer): an explicit empty
// value (`--emit ''`, a shell variable that expanded to nothing) was taken as absent and the run went on
// without what was asked. Refused here, naming what is allowed; CLI11 prefixes the option's name.
CLI::Validator named_value(const std::string& allowed) {
  return CLI::Validator(
      [allowed](std::string& v) { return v.empty() ? "the value is empty; allowed: " + allowed : std::string(); },
      "");
}

// The conv-only options, so that giving one to another op can be refused (it would be ignored).
struct ConvFlags {
  std::vector<CLI::Option*> options;
  CLI::Option* out_channels = nullptr;
  std::string given() const {
    std::string names;
    for (const CLI::Option* o : options)
      if (*o) names += (names.empty() ? "" : ", ") + o->get_name();
    return names;
  }
};

// The conv-only options, on every command that takes an op spec.
ConvFlags add_conv_options(CLI::App* cmd, strata::app::TraceOptions& t, int64_t& out_channels) {
  const CLI::Validator integer = whole_number<int64_t>();
  ConvFlags conv;
  conv.out_channels = cmd->add_option("--out-channels", out_channels, "conv: output channels K (default: input channels)")
                          ->transform(integer);
  conv.options = {conv.out_channels,
                  cmd->add_option("--kernel", t.conv.kernel, "conv: square kernel size R")->capture_default_str()->transform(integer),
                  cmd->add_option("--stride", t.conv.stride, "conv: stride")->capture_default_str()->transform(integer),
                  cmd->add_option("--pad", t.conv.pad, "conv: zero padding on each side")->capture_default_str()->transform(integer),
                  cmd->add_option("--dilation", t.conv.dilation, "conv: kernel dilation")->capture_default_str()->transform(integer),
                  cmd->add_option("--groups", t.conv.groups, "conv: groups (dividing the input and output channels)")
                      ->capture_default_str()
                      ->transform(integer)};
  return conv;
}

// The options `trace` and `compare` share: the op, its sizes, the device, and what to measure and write.
ConvFlags add_op_options(CLI::App* cmd, strata::app::TraceOptions& t, int64_t& out_channels) {
  const CLI::Validator integer = whole_number<int64_t>();
  cmd->add_option("op", t.op, strata::frontend::op_names() + " | mlp | " + strata::frontend::program_names() +
                                 " (programs)")->required();
  cmd->add_option("spec", t.spec, "sizes, e.g. 1024 or 512x1024x256 (see the formats below)")->required();
  cmd->add_option("--device", t.device, "auto | cpu | cuda | cuda:N  (auto: the GPU if one works, else the CPU)")
      ->capture_default_str();
  cmd->add_option("--dtype", t.dtype, "f32 | f64 | f16 | bf16 (on the CPU f16/bf16 compute in f32)")->capture_default_str();
  cmd->add_option("--repeat", t.repeat, "timed calls (default: as many as fit in --budget, 10 to 10000)")
      ->transform(integer);
  cmd->add_option("--warmup", t.warmup, "untraced calls between the cold call and the timed ones")
      ->capture_default_str()
      ->transform(integer);
  cmd->add_option("--budget", t.budget_s,
                  "seconds of timed calls when --repeat is not given (the run stops at twice this if calls turn slower)")
      ->capture_default_str()
      ->transform(decimal_number());
  cmd->add_option("--seed", t.seed, "seed of the random inputs (uniform in [-1, 1)), 0 to 2^64-1")
      ->capture_default_str()
      ->transform(whole_number<uint64_t>());
  cmd->add_flag("--requires-grad", t.requires_grad, "inputs require grad: the Autograd key records a backward node");
  cmd->add_flag("--backward", t.backward,
                "after each call run y.sum().backward() through the autograd engine and break down every node "
                "(needs --requires-grad)");
  cmd->add_flag("--check", t.check,
                "compare the result (and with --backward every gradient) with a float64 reference; exit 3 if "
                "outside tolerance");
  cmd->add_flag("--tf32", t.tf32, "f32 matmul/linear/conv on TF32 tensor cores (CUDA only)");
  cmd->add_option("--algos", t.gemm_algo.algos,
                  "N: list cuBLASLt's first N candidate kernels for the matmul/linear shape (CUDA only; docs/gpu.md)")
      ->transform(integer);
  cmd->add_option("--algo", t.gemm_algo.algo, "K: run candidate K of cuBLASLt's list instead of its first (CUDA only)")
      ->transform(integer);
  cmd->add_flag("--time", t.gemm_algo.time, "with --algos: time every candidate on the call's operands (CUDA events)");
  cmd->add_option("--autocast", t.autocast,
                  "bf16 | f16: the Autocast key casts matmul/linear/conv inputs to it (docs/autocast.md)")
      ->check(named_value("bf16, f16"));
  cmd->add_option("--view", t.views,
                  "NAME=t | NAME=sliceN: the input NAME (self, other, input, weight...; mlp: input, 0.weight, "
                  "0.bias, 2.weight...) as a transposed view or every N-th element of its last dim (repeatable; "
                  "docs/views.md)");
  cmd->add_flag("--no-device-timing", t.no_device_timing, "do not start CUPTI: host timers only");
  add_threads_option(cmd, t);
  cmd->add_option("--frontend", t.frontend,
                  "cli | python: call the op from C++, or as strata.<op>(...) through `import strata` in the "
                  "embedded interpreter (docs/python.md)")
      ->capture_default_str();
  cmd->add_option("--peer", t.peer, "torch: also run the op through PyTorch, same inputs, timed the same way")
      ->check(named_value("torch"));
  // An empty path would read as "no file requested" later on: refuse it here instead of ignoring it.
  const CLI::Validator non_empty([](std::string& v) { return v.empty() ? std::string("output path is empty") : ""; },
                                 "FILE");
  cmd->add_option("--json", t.json_path, "write every figure and the environment to FILE (JSON)")->check(non_empty);
  cmd->add_option("--chrome-trace", t.chrome_trace_path, "write a Chrome trace JSON timeline to FILE (Perfetto)")
      ->check(non_empty);
  return add_conv_options(cmd, t, out_channels);
}

// `sweep`'s options: the op and a range of sizes, what to measure per size, and the files to write.
ConvFlags add_sweep_options(CLI::App* cmd, strata::app::SweepOptions& s, int64_t& out_channels) {
  const CLI::Validator integer = whole_number<int64_t>();
  strata::app::TraceOptions& t = s.trace;
  t.budget_s = 0.5;
  cmd->add_option("op", t.op, strata::frontend::op_names())->required();
  cmd->add_option("range", t.spec, "sizes: 16:4096, 64,256,1024, 1k:64M, or 32x768x[256:8192] (see below)")->required();
  cmd->add_option("--device", t.device, "auto | cpu | cuda | cuda:N")->capture_default_str();
  cmd->add_option("--dtype", t.dtype, "f32 | f64 | f16 | bf16 (on the CPU f16/bf16 compute in f32)")->capture_default_str();
  cmd->add_option("--budget", t.budget_s, "seconds of timed calls per size (fewer if --sweep-budget is short)")
      ->capture_default_str()
      ->transform(decimal_number());
  cmd->add_option("--sweep-budget", s.sweep_budget_s, "seconds for the whole sweep, shared among the sizes left")
      ->capture_default_str()
      ->transform(decimal_number());
  cmd->add_option("--repeat", t.repeat, "timed calls per size (default: as many as fit in the budget, at least 10)")
      ->transform(integer);
  cmd->add_option("--warmup", t.warmup, "untraced calls per size before the timed ones")->capture_default_str()->transform(integer);
  cmd->add_option("--seed", t.seed, "seed of the random inputs, 0 to 2^64-1")
      ->capture_default_str()
      ->transform(whole_number<uint64_t>());
  cmd->add_flag("--requires-grad", t.requires_grad, "inputs require grad: the Autograd key records a backward node");
  cmd->add_flag("--tf32", t.tf32, "f32 matmul/linear/conv on TF32 tensor cores (CUDA only)");
  cmd->add_option("--autocast", t.autocast, "bf16 | f16: the Autocast key casts matmul/linear/conv inputs to it")
      ->check(named_value("bf16, f16"));
  cmd->add_flag("--no-device-timing", t.no_device_timing, "do not start CUPTI: host timers only");
  add_threads_option(cmd, t);
  cmd->add_flag("--compare", s.compare, "also replay at every size (CUDA Graph on a GPU, plan replay on the CPU)");
  cmd->add_option("--ops-per-graph", s.ops_per_graph, "with --compare: calls captured into one graph / plan")
      ->capture_default_str()
      ->transform(integer);
  const CLI::Validator non_empty([](std::string& v) { return v.empty() ? std::string("output path is empty") : ""; },
                                 "FILE");
  cmd->add_option("--json", t.json_path, "write every size's figures and the crossovers to FILE (JSON)")->check(non_empty);
  cmd->add_option("--csv", s.csv_path, "write one row per size to FILE (CSV)")->check(non_empty);
  cmd->add_option("--plot", s.plot_path, "draw wall, compute and host share per size to FILE (SVG)")->check(non_empty);
  return add_conv_options(cmd, t, out_channels);
}

const char* kSweepHelp = R"(
ranges:
  16:4096             16, 32, 64, ..., 4096 (doubling from the start; the end is always included)
  64,256,1024         exactly these sizes
  1k:64M              k, M, G are binary: 1k = 1024, 64M = 67108864
  '32x768x[256:8192]' one field of a multi-field spec swept (quote it: [..] and {..} are shell patterns)

For every size: the breakdown rows (median), wall (median, p90), host overhead (every row but the
compute and the queue), the compute's and the host's share of the wall, and FLOP/s (bytes/s for
pointwise ops). Then, in words, the sizes above which host overhead is under 50% and under 5% of the
wall, interpolated log-log between the measured sizes; with --compare, the size above which replay no
longer helps by more than the run-to-run noise.

examples:
  strata sweep matmul 16:1024                           # about 5 s on 2 busy cores
  strata sweep matmul 16:2048 --plot sweep.svg --json sweep.json --csv sweep.csv
  strata sweep linear '32x768x[256:8192]' --requires-grad
  strata sweep relu 1k:64M --compare
  strata sweep add 1k,1M,16M --budget 0.2 --sweep-budget 10
)";

const char* kExamples = R"(
examples:
  strata trace matmul 1024                      # where one 1024^3 matmul spends its time
  strata trace matmul 512x1024x256 --check      # M x K x N, checked against a float64 reference
  strata trace linear 32x768x3072 --requires-grad
  strata trace linear 32x768x3072 --requires-grad --backward --check   # + y.sum().backward(), every node
  strata trace conv 32x64x56x56 --out-channels 64 --kernel 3 --pad 1
  strata trace relu 1048576 --chrome-trace relu.json
  strata trace tanh 16M --threads 1             # one CPU thread, as torch.set_num_threads(1)
  strata trace matmul 1024 --autocast bf16 --requires-grad   # keys: Autocast > Autograd > CPU (or CUDA)
  strata trace matmul 16 --frontend python --peer torch   # through `import strata`, beside torch.matmul
  strata trace mlp 16x256x512x10 --requires-grad  # a small model: Linear, ReLU, Linear, op by op
  strata compare mlp 16x256x512x10              # the whole forward eager vs replayed vs compiled
  strata trace matmul 1024 --view other=t       # x @ w.t(): one GEMM reading the view through its op flag
  strata trace mlp 16x256x512x10 --view 0.weight=t --view 2.weight=slice2   # a parameter as a view (copy row)
  strata trace relu_matmul 512 --mode compiled --check   # captured, fused, compiled C++, then timed
  strata trace linear_gelu 32x768x3072 --mode compiled --emit cpp   # + the generated source
  strata trace linear_gelu 32x768x3072 --mode compiled --emit ptx --arch sm_80   # + CUDA C, PTX, ptxas
  strata trace linear_gelu 32x768x3072 --mode compiled --emit sass --arch sm_80  # + SASS, instruction mix
  strata trace relu_matmul 512 --mode graph     # the forward captured once, replayed
  strata compare linear_gelu 32x256x1024        # eager, graph and compiled: ops, kernels, bytes, break-even
  strata sweep matmul 16:1024 --plot sweep.svg  # where host overhead stops mattering, as a picture
  strata compare matmul 64 --ops-per-graph 16   # eager vs graph (GPU) / plan (CPU) replay
  strata ops                                    # operators, schemas and the keys with kernels

exit codes: 0 ok, 1 failure (library error, output not written), 2 usage error,
            3 --check failed, 4 device (or, --mode compiled, C++ compiler) unavailable, 130 interrupted
)";

// Every subcommand's options and its CLI11 handle, so that main can read which one was given.
struct Commands {
  strata::app::TraceOptions trace_options;
  strata::app::CompareOptions compare_options;
  strata::app::SweepOptions sweep_options;
  int64_t trace_out_channels = 0, compare_out_channels = 0, sweep_out_channels = 0;
  ConvFlags trace_conv, compare_conv, sweep_conv;
  CLI::App* trace = nullptr;
  CLI::App* compare = nullptr;
  CLI::App* sweep = nullptr;
  CLI::App* check_trace = nullptr;
  CLI::App* ops = nullptr;
  CLI::App* devices = nullptr;
  CLI::App* sass = nullptr;
  CLI::Option* ops_per_graph = nullptr;
  std::string trace_file, sass_module;
  bool verbose = false;
};

void add_trace_command(CLI::App& app, Commands& commands) {
  strata::app::TraceOptions& t = commands.trace_options;
  CLI::App* trace = app.add_subcommand("trace", "Run one op many times and print where each call's time went");
  commands.trace = trace;
  commands.trace_conv = add_op_options(trace, t, commands.trace_out_channels);
  trace->add_option("--mode", t.mode,
                    "programs: eager (every op through binding and dispatch) | graph (captured once, replayed) | "
                    "compiled (captured, fused, compiled to C++; docs/compiled.md)")
      ->capture_default_str();
  trace->add_option("--emit", t.emit,
                    "cpp | ptx | sass: with --mode compiled, print the generated C++ of every fused kernel, or the "
                    "same kernels as CUDA C with NVRTC's PTX and ptxas's registers, spills and shared memory, or "
                    "their SASS (cuobjdump or nvdisasm) with each kernel's instruction mix")
      ->check(named_value("cpp, ptx, sass (with --mode compiled)"));
  trace->add_option("--count", t.count,
                    "instructions: run the calls under valgrind's callgrind and give every host row the instructions "
                    "it executed itself, median per call (docs/instructions.md)")
      ->check(named_value("instructions"));
  trace->add_option("--arch", t.arch,
                    "with --emit ptx or sass: sm_80 | sm_86 | sm_89 | sm_90 | sm_100 | sm_120 (default: this machine's "
                    "GPU, else sm_90)")
      ->check(named_value([] {
        std::string archs;
        for (const std::string& a : strata::compiler::cuda::known_archs()) archs += (archs.empty() ? "" : ", ") + a;
        return archs + " (with --emit ptx or sass)";
      }()));
  trace->footer("op formats:\n" + strata::frontend::spec_help() + strata::frontend::sequence_help() + kExamples);
}

void add_compare_command(CLI::App& app, Commands& commands) {
  strata::app::CompareOptions& c = commands.compare_options;
  CLI::App* compare = app.add_subcommand(
      "compare", "Run one op eager and replayed (CUDA Graph on a GPU, plan replay on the CPU), side by side");
  commands.compare = compare;
  commands.compare_conv = add_op_options(compare, c.trace, commands.compare_out_channels);
  commands.ops_per_graph =
      compare->add_option("--ops-per-graph", c.ops_per_graph, "K: consecutive calls captured into one graph / plan "
                                                              "(mlp: whole forwards, default 1)")
          ->capture_default_str()
          ->transform(whole_number<int64_t>());
  compare->footer("--repeat is the number of rounds (K calls eager, or one replay of K calls) per mode.\n"
                  "op formats:\n" + strata::frontend::spec_help() + strata::frontend::sequence_help() + kExamples);
}

void add_commands(CLI::App& app, Commands& commands) {
  add_trace_command(app, commands);
  add_compare_command(app, commands);
  commands.sweep = app.add_subcommand(
      "sweep", "Run one op at many sizes: per-size breakdown, host-overhead share, crossovers, plot");
  commands.sweep_conv = add_sweep_options(commands.sweep, commands.sweep_options, commands.sweep_out_channels);
  commands.sweep->footer(std::string(kSweepHelp) + "\nop formats (one field replaced by the range):\n" +
                         strata::frontend::spec_help());
  commands.check_trace =
      app.add_subcommand("check-trace", "Check a Chrome trace JSON file against strata's trace invariants");
  commands.check_trace->add_option("file", commands.trace_file, "the trace to check")->required();
  commands.ops = app.add_subcommand("ops", "List operators, their schemas, and the dispatch keys that have kernels");
  commands.devices =
      app.add_subcommand("devices", "List the devices strata can use, or say exactly why there is no GPU");
  commands.sass = app.add_subcommand(
      "sass", "The SASS and PTX in libstrata_cuda.so and each kernel's instruction mix (cuobjdump)");
  commands.sass->add_option("--module", commands.sass_module,
                            "the binary to list (default: the libstrata_cuda.so strata loads)");
}

// CLI11 answers an unknown command with "A subcommand is required"; name what was typed instead, and
// the nearest command when it looks like a typo ("trcae"). False when the command is unknown.
bool check_command_name(const CLI::App& app, int argc, char** argv) {
  if (argc <= 1 || argv[1][0] == '-') return true;
  const std::string typed = argv[1];
  std::string known;
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    const std::string& name = sub->get_name();
    if (name == typed) return true;
    known += (known.empty() ? "" : ", ") + name;
    names.push_back(name);
  }
  const std::string nearest = strata::nearest_name(typed, names);
  std::cerr << "strata: usage error: unknown command '" << typed << "'"
            << (nearest.empty() ? "" : "; did you mean '" + nearest + "'?") << "\n  commands: " << known
            << " (see strata --help)\n";
  return false;
}

// What CLI11 parsed but the options cannot say themselves: which options were typed, and the conv ones.
void complete_options(Commands& commands) {
  strata::app::TraceOptions& t = commands.trace_options;
  strata::app::CompareOptions& c = commands.compare_options;
  strata::app::SweepOptions& sw = commands.sweep_options;
  if (*commands.trace_conv.out_channels) t.conv.out_channels = commands.trace_out_channels;
  if (*commands.compare_conv.out_channels) c.trace.conv.out_channels = commands.compare_out_channels;
  if (*commands.sweep_conv.out_channels) sw.trace.conv.out_channels = commands.sweep_out_channels;
  t.conv.given = commands.trace_conv.given();
  c.trace.conv.given = commands.compare_conv.given();
  sw.trace.conv.given = commands.sweep_conv.given();
  sw.ops_per_graph_given = commands.sweep->get_option("--ops-per-graph")->count() > 0;
  t.budget_given = commands.trace->get_option("--budget")->count() > 0;
  c.trace.budget_given = commands.compare->get_option("--budget")->count() > 0;
  sw.trace.budget_given = commands.sweep->get_option("--budget")->count() > 0;
  sw.sweep_budget_given = commands.sweep->get_option("--sweep-budget")->count() > 0;
  c.ops_per_graph_given = commands.ops_per_graph->count() > 0;
}

// The thread counts before anything runs: STRATA_NUM_THREADS, then --threads of the command given.
void apply_threads(const Commands& commands) {
  strata::measure::apply_cpu_threads_from_environment();
  if (*commands.ops || *commands.check_trace || *commands.sass || *commands.devices) return;
  const std::optional<std::string>& typed = *commands.sweep     ? commands.sweep_options.trace.threads
                                            : *commands.compare ? commands.compare_options.trace.threads
                                                                : commands.trace_options.threads;
  if (typed) strata::measure::set_cpu_threads(*typed);
}

int run_command(const Commands& commands) {
  if (*commands.sweep) return strata::app::run_sweep(commands.sweep_options);
  if (*commands.trace) return strata::app::run_trace(commands.trace_options);
  if (*commands.compare) return strata::app::run_compare(commands.compare_options);
  if (*commands.ops) return strata::app::run_ops();
  if (*commands.check_trace) return strata::app::run_check_trace(commands.trace_file);
  if (*commands.sass) return strata::app::run_sass(commands.sass_module);
  if (*commands.devices) {
    strata::measure::list_devices(std::cout);
    // Whether the GPU path has run on hardware, from docs/validation/ at build time: a GPU user must not
    // have to find that out by reading the validation reports.
    std::cout << "gpu path: " << kGpuValidationStatus << "\n";
    strata::app::print_python_info(std::cout);
    return 0;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  CLI::App app{"strata: trace one tensor operation through binding, dispatch, library, launch, queue and GPU"};
  app.footer(kExamples);
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("strata ") + STRATA_VERSION);
  // CLI11's own words, with strata's prefix (docs/errors.md: every message starts with it).
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    std::string text = std::string("strata: usage error: ") + e.what() + "\n";
    if (a->get_help_ptr() != nullptr) text += "Run with " + a->get_help_ptr()->get_name() + " for more information.\n";
    return text;
  });
  Commands commands;
  app.add_flag("-v,--verbose", commands.verbose, "log how strata sizes and runs the measurement (to stderr)");
  add_commands(app, commands);
  if (!check_command_name(app, argc, argv)) return static_cast<int>(strata::ExitCode::kUsage);
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
  spdlog::set_level(commands.verbose ? spdlog::level::debug : spdlog::level::warn);
  try {
    complete_options(commands);
    apply_threads(commands);
    return run_command(commands);
  } catch (const strata::Error& e) {
    std::cerr << "strata: " << (e.code() == strata::ExitCode::kUsage ? "usage error: " : "error: ") << e.what() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "strata: internal error: " << e.what() << "\n";
    return static_cast<int>(strata::ExitCode::kFailure);
  }
}
