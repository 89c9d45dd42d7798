// Role: model.
// The figures of a sequence (`strata trace mlp ...`, docs/sequences.md): a forward is S calls in a row,
// each with its own op id. From the finished Timeline this computes, per forward:
//   - the op log: what was called, in order, with its dispatch key path and backend (like the log a
//     TorchDispatchMode prints), read from the spans, not from what the app meant to call;
//   - each step's own LayerBreakdown (its rows, as `strata trace <op>` gives them);
//   - the whole forward as one breakdown (every row summed over the steps, wall = the forward's wall);
//   - host tax against compute, and on a GPU the idle time between consecutive kernels and the share of
//     the wall in launch calls and in kernels, with an "overhead-bound" / "compute-bound" verdict.
// Measuring only: print_sequence_table (sequence_table.h) formats, the JSON is in json_report.cpp.
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "lib/timeline.h"
#include "reports/model/breakdown.h"

namespace strata::reports {

struct SequenceStepFigures {
  // The binding zone's name: the operator that was called ("linear"); a step without one (a backward
  // node: the engine calls typed entry points) takes its description ("AddmmBackward").
  std::string op;
  std::string keys;         // dispatch keys of the step's first timed call, first seen first ("Autograd > CPU")
  size_t backend_calls = 0; // kernels it reached (CPU/CUDA dispatch zones): the ops a dispatch-mode log shows
  std::string backend;      // library zone names joined ("cblas_sgemm")
  std::string description;  // from the app ("linear [16x256] -> [16x512]"); may be empty
  LayerBreakdown breakdown;
};

struct SequenceFigures {
  size_t steps = 0;     // calls per forward
  size_t forwards = 0;  // timed forwards
  std::vector<SequenceStepFigures> per_step;
  LayerBreakdown total;  // the forward as one call: rows summed over its steps, wall = forward_wall
  Distribution forward_wall;  // first span of step 1 -> last span or kernel end of step S
  // Host tax: binding + dispatch + runtime + launch, and on a GPU the library's host work too (there the
  // compute is the kernels). Compute: the library row on the CPU (OpenBLAS computes inside it), the union
  // of the forward's kernels on a GPU.
  Distribution host_tax, compute;
  // Wall not in either: the harness between steps, and on a GPU the host and device overlapping or
  // waiting (host_tax + compute need not add up to the wall there).
  Distribution outside;  // on the CPU: wall - host tax - compute, per forward (the time between the zones)
  bool on_gpu = false;  // device records were used: the GPU figures below are measured
  Distribution launch;       // launch API calls, per forward
  Distribution kernel_idle;  // first kernel start -> last kernel end, minus the kernels' union
  Distribution gpu_window;   // first kernel start -> last kernel end
  double kernels_per_forward = 0;
  // Medians of the shares of the forward's wall (0..1), and the verdict from them.
  double compute_share = 0, host_share = 0, launch_share = 0, idle_share = 0;
  // Set by the caller (measure_zone_cost_ns, lib/zone.h): per-op medians under twice this are marked * when printed.
  double probe_ns = 0;
  std::string verdict;         // "compute-bound" or "overhead-bound"
  std::string verdict_reason;  // the numbers behind it, in one sentence
};

// `op_ids` forward by forward, `steps` consecutive ids per forward (HarnessResult's layout).
// `descriptions` (one per step, or empty) are the app's words for each step.
SequenceFigures compute_sequence(const Timeline& timeline, std::span<const uint32_t> op_ids, size_t steps,
                                 const std::vector<std::string>& descriptions = {});

}  // namespace strata::reports

// Its table (print_sequence_table) for the callers that include this header for it (apps/strata); new
// code includes reports/formats/sequence_table.h itself.
