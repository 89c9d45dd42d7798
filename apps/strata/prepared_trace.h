// The call trace, compare and sweep measure, prepared: the checked options, the device session and the
// inputs (trace_command.cpp), and the parts of a report that describe them.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/strata/python_module.h"
#include "apps/strata/trace_request.h"
#include "layers/dispatch/autocast.h"
#include "layers/frontend/frontend.h"
#include "layers/frontend/sequence.h"
#include "measure/device_session.h"
#include "measure/harness.h"
#include "reports/model/report.h"

namespace strata::app {

// What trace and compare share: the checked options, the device session and the prepared call.
struct Prepared {
  frontend::OpSpec spec;
  DType dtype = DType::kF32;
  measure::DeviceChoice choice;
  std::unique_ptr<measure::DeviceSession> session;
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
  std::unique_ptr<python_module::PythonCall> python_call;
  std::function<binding::IValue()> invoke;
  std::unique_ptr<python_module::PeerCall> peer_call;
  std::string frontend = "cli";
};
Prepared prepare_trace(const TraceOptions& options);
// The op, device and environment part of a report (no figures).
reports::TraceReport describe_context(const Prepared& prepared, const TraceOptions& options);
// What trace asks of the harness: --warmup, --repeat, --budget, --backward and how each call is made.
measure::HarnessOptions harness_options(const TraceOptions& options, const Prepared& prepared);
// What the harness ran, into the report: warm-ups, timed calls (and whether sized automatically), and the
// untraced calls' median wall.
void describe_harness_run(reports::TraceReport& report, const measure::HarnessResult& run);
// Under --autocast, for an op autocast does not cast: the key path gains "Autocast (fallthrough) > " (the
// fallthrough leaves no span of its own) and the notes say why. trace and sweep both print key paths.
void describe_autocast_fallthrough(const Prepared& prepared, std::string& keys, std::vector<std::string>& notes);

// The trace's inputs made again, as before its first call (the same seed and views): what an in-place op's
// --check and --peer torch comparison read, since every timed call wrote the trace's own (Note [In-place
// operators]).
frontend::PreparedCall fresh_inputs(const Prepared& prepared, const TraceOptions& options);
// Whether the call writes its first argument (relu_, add_, div_.Scalar...).
bool writes_in_place(const frontend::PreparedCall& call);

// What --mode and --emit allow, with the rest of the options (program_command.cpp); called by
// prepare_trace before anything is allocated. `sequence`: the op is mlp or a named program.
void check_mode_options(const TraceOptions& options, bool sequence);
// `strata trace PROGRAM --mode graph | compiled` (program_command.cpp).
int run_program_trace(const TraceOptions& options, Prepared& prepared);
// `strata trace mlp ...` (sequence_command.cpp): called by run_trace once prepare_trace made a sequence.
int run_sequence_trace(const TraceOptions& options, Prepared& prepared);
// The walk and per-node rows of a --backward run into report.backward (trace_command.cpp), without the
// gradient check: a sequence checks its parameters' gradients itself. report.probe_ns must be set.
void describe_backward_rows(reports::TraceReport& report, const Timeline& timeline, const measure::HarnessResult& run,
                            const Prepared& prepared);

}  // namespace strata::app
