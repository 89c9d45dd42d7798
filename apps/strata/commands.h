// The subcommands of the strata program. Each returns the process exit code (lib/error.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/strata/device_session.h"
#include "layers/dispatch/autocast.h"
#include "apps/strata/python_module.h"
#include "layers/frontend/frontend.h"
#include "layers/frontend/sequence.h"
#include "reports/report.h"

namespace strata::app {

struct TraceOptions {
  std::string op;
  std::string spec;
  std::string device = "auto";
  std::string dtype = "f32";
  std::optional<int64_t> repeat;  // unset = auto
  int64_t warmup = 3;
  double budget_s = 1.0;
  bool budget_given = false;  // --budget typed: refused beside --repeat, which leaves it nothing to size
  uint64_t seed = 42;
  bool requires_grad = false;
  bool backward = false;  // y.sum().backward() after each call (needs requires_grad); docs/autograd.md
  bool check = false;
  std::vector<std::string> views;  // --view NAME=KIND: inputs given as views (docs/views.md)
  bool tf32 = false;
  std::string autocast;  // "" = off; bf16 | f16 (docs/autocast.md)
  bool no_device_timing = false;
  std::string json_path;
  std::string chrome_trace_path;
  frontend::ConvOptions conv;
  std::string frontend = "cli";  // --frontend cli | python (python_frontend.h)
  std::string peer;              // --peer torch, or "" for none
  // trace PROGRAM --mode eager | graph | compiled (program_command.cpp, docs/compiled.md); --emit cpp
  // prints the compiled graph's generated source, --emit ptx its kernels as CUDA C and PTX for --arch
  // ("" = the GPU's, else sm_90).
  std::string mode = "eager";
  std::string emit;
  std::string arch;
};

struct CompareOptions {
  TraceOptions trace;
  int64_t ops_per_graph = 8;
  // For a sequence, K counts whole forwards and defaults to 1 (docs/sequences.md): main says whether
  // --ops-per-graph was given.
  bool ops_per_graph_given = false;
};

// What trace and compare share: the checked options, the device session and the prepared call.
struct Prepared {
  frontend::OpSpec spec;
  DType dtype = DType::kF32;
  DeviceChoice choice;
  std::unique_ptr<DeviceSession> session;
  frontend::PreparedCall call;  // for a sequence: only description, flops and bytes (op is null)
  std::unique_ptr<frontend::Sequence> sequence;  // set for `mlp ...` (frontend/sequence.h)
  // --autocast: on for this thread while the Prepared lives (every call trace, compare or sweep makes),
  // and whether the op has an Autocast kernel (else the key falls through for it).
  std::optional<DType> autocast;
  bool autocast_casts = false;
  std::unique_ptr<AutocastGuard> autocast_guard;
  // The dtype the op computes and returns in: the autocast dtype for ops that autocast casts, else dtype.
  DType compute_dtype() const { return autocast_casts ? *autocast : dtype; }
  // --frontend python / --peer torch (python_frontend.h): how each call is made (empty: C++), and the peer.
  std::unique_ptr<PythonCall> python_call;
  std::function<binding::IValue()> invoke;
  std::unique_ptr<PeerCall> peer_call;
  std::string frontend = "cli";
};
Prepared prepare_trace(const TraceOptions& options);
// The op, device and environment part of a report (no figures).
reports::TraceReport describe_context(const Prepared& prepared, const TraceOptions& options);
// Under --autocast, for an op autocast does not cast: the key path gains "Autocast (fallthrough) > " (the
// fallthrough leaves no span of its own) and the notes say why. trace and sweep both print key paths.
void describe_autocast_fallthrough(const Prepared& prepared, std::string& keys, std::vector<std::string>& notes);

// The measured part of `strata compare`: K-call eager rounds, then capture and replay rounds, all traced
// into `timeline` under op ids from `next_id` on (advanced past the last one used). The caller calls
// session->finish(timeline) once, after everything it measures (one CUPTI session per process).
struct CompareRounds {
  std::vector<std::vector<uint32_t>> eager_ids, replay_ids;
  std::vector<double> eager_wall, replay_wall;  // per round, ns
  binding::IValue eager_out;
  std::unique_ptr<Replay> replay;
  CaptureCost cost;
  double first_replay_ns = 0;
  int64_t eager_begin = 0, eager_end = 0, replay_begin = 0, replay_end = 0;
};
CompareRounds run_compare_rounds(const Prepared& prepared, const CompareOptions& options, Timeline& timeline,
                                 uint32_t& next_id);

// `strata sweep`: one op at many sizes (sweep_command.cpp, docs/sweep.md).
struct SweepOptions {
  TraceOptions trace;            // trace.spec holds the range pattern; trace.budget_s is per size
  double sweep_budget_s = 20.0;  // the whole sweep; per-size budgets shrink to fit it
  bool sweep_budget_given = false;
  bool compare = false;
  int64_t ops_per_graph = 8;
  bool ops_per_graph_given = false;  // refused without --compare, which alone reads it
  std::string plot_path, csv_path;
};

int run_trace(const TraceOptions& options);
// What --mode and --emit allow, with the rest of the options (program_command.cpp); called by
// prepare_trace before anything is allocated. `sequence`: the op is mlp or a named program.
void check_mode_options(const TraceOptions& options, bool sequence);
// `strata trace PROGRAM --mode graph | compiled` (program_command.cpp).
int run_program_trace(const TraceOptions& options, Prepared& prepared);
// `strata trace mlp ...` (sequence_command.cpp): called by run_trace once prepare_trace made a sequence.
int run_sequence_trace(const TraceOptions& options, Prepared& prepared);
// The walk and per-node rows of a --backward run into report.backward (trace_command.cpp), without the
// gradient check: a sequence checks its parameters' gradients itself. report.probe_ns must be set.
struct HarnessResult;
void describe_backward_rows(reports::TraceReport& report, const Timeline& timeline, const HarnessResult& run,
                            const Prepared& prepared);
int run_sweep(const SweepOptions& options);
int run_compare(const CompareOptions& options);
// --ops-per-graph's range, for compare and for sweep (given or not, with --compare or without).
void check_ops_per_graph(int64_t ops_per_graph);
int run_ops();
int run_check_trace(const std::string& path);  // exit 0 when valid, 1 with one line per violation
// `strata sass [--module PATH]` (sass_command.cpp): the SASS and PTX libstrata_cuda.so (or PATH) embeds and
// each kernel's instruction mix, by the toolkit's cuobjdump; UnavailableError (exit 4) without cuobjdump.
int run_sass(const std::string& module);
int run_devices();  // device_session_cpu.cpp, or cuda_module.cpp (through libstrata_cuda.so) with CUDA

}  // namespace strata::app
