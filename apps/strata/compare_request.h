// What `strata compare` was asked for, and its measured part, which sweep --compare runs too
// (compare_command.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "apps/strata/prepared_trace.h"
#include "apps/strata/trace_request.h"
#include "lib/timeline.h"
#include "measure/device_session.h"

namespace strata::app {

struct CompareOptions {
  TraceOptions trace;
  int64_t ops_per_graph = 8;
  // For a sequence, K counts whole forwards and defaults to 1 (docs/sequences.md): main says whether
  // --ops-per-graph was given.
  bool ops_per_graph_given = false;
};

// The measured part of `strata compare`: K-call eager rounds, then capture and replay rounds, all traced
// into `timeline` under op ids from `next_id` on (advanced past the last one used). The caller calls
// session->finish(timeline) once, after everything it measures (one CUPTI session per process).
struct CompareRounds {
  std::vector<std::vector<uint32_t>> eager_ids, replay_ids;
  std::vector<double> eager_wall, replay_wall;  // per round, ns
  binding::IValue eager_out;
  std::unique_ptr<measure::Replay> replay;
  measure::CaptureCost cost;
  double first_replay_ns = 0;
  int64_t eager_begin = 0, eager_end = 0, replay_begin = 0, replay_end = 0;
};
CompareRounds run_compare_rounds(const Prepared& prepared, const CompareOptions& options, Timeline& timeline,
                                 uint32_t& next_id);

// --ops-per-graph's range, for compare and for sweep (given or not, with --compare or without).
void check_ops_per_graph(int64_t ops_per_graph);

}  // namespace strata::app
