// Role: model.
// Eager vs replay (CUDA Graph on a GPU, plan replay on the CPU), per op: the figures of `strata
// compare`, computed from one Timeline that holds both phases. Each phase is a series of rounds of K ops:
// K eager calls then one synchronisation, or one replay of K captured ops.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/timeline.h"
#include "reports/model/breakdown.h"
#include "reports/model/report.h"

namespace strata::reports {

struct ModeFigures {
  std::string label;  // "eager", "CUDA Graph", "plan replay"
  // Per op, ns: the median over rounds of (round total / K).
  double binding = 0, dispatch = 0, library = 0, runtime = 0, launch = 0, queue = 0, gpu = 0, wall = 0;
  double python = 0;  // python + pybind11 rows (--frontend python); 0 for calls made from C++
  double wall_p90 = 0;
  double gpu_idle = 0;  // GPU time between consecutive kernels of a round, per op
  bool has_device = false;
  size_t rounds = 0;
  double host() const { return python + binding + dispatch + runtime + launch; }  // host overhead per op
};

// `rounds[r]` are the op ids of round r (K of them in eager mode, one per replay), `round_wall_ns[r]` the
// measured wall of that round (issue to completion), `k` the ops per round.
ModeFigures mode_figures(const std::string& label, const Timeline& timeline,
                         const std::vector<std::vector<uint32_t>>& rounds, const std::vector<double>& round_wall_ns,
                         int64_t k);

// compare --peer torch: the same call through torch, eager and through torch's own replay (a CUDA Graph on
// a GPU, torch.compile on the CPU), timed as strata's rounds are: K calls a round, per op.
struct PeerComparison {
  std::string version, expression, work;
  std::string replay_kind;  // "torch.compile (inductor)", "CUDA Graph (torch.cuda.CUDAGraph)"; "" when none
  std::string note;         // why there is no replay, when there is none
  double eager_ns = 0, replay_ns = 0;  // median round / K
  double setup_ns = 0;                 // the capture, or the first compiled call (which compiles)
  size_t rounds = 0;
  // torch's eager call in strata's rows (docs/torch-layers.md): only the rows' fields are set.
  PeerReport layered;
};

struct Comparison {
  std::optional<PeerComparison> peer;  // compare --peer torch
  ModeFigures eager;
  ModeFigures replay;
  int64_t ops_per_replay = 1;
  double capture_ns = 0, instantiate_ns = 0, first_replay_ns = 0;  // one-time costs
  // One host zone's open + close (measure_zone_cost_ns): a host-timed cell under twice it is below what
  // the timers resolve, and the table marks it (0: not measured, nothing marked).
  double probe_ns = 0;
  double speedup() const { return replay.wall > 0 ? eager.wall / replay.wall : 0; }
  // The compute's share of the eager wall per op (the GPU's kernels, or the library row on the CPU), and
  // "compute-bound" when it is at least half, else "overhead-bound".
  double compute_share() const;
  std::string bound() const;
  std::string verdict() const;  // the bound with its figures, and what the replay changed
};

// CUDA Graph replay: CUPTI reports every replayed kernel with the graph launch's correlation id and the
// id of the graph node it ran from. At capture time strata records which op created each node
// (DeviceTrace::graph_nodes, from CUPTI resource callbacks); this maps every replayed kernel back to
// that op. Kineto stops at the graph launch.
struct GraphAttribution {
  size_t replayed_kernels = 0;  // kernels with a graph node id
  size_t attributed = 0;        // of those, how many map to a captured op
  size_t attributed_by_capture_info = 0;  // of those, through the capture-info fallback (GraphNodeSource)
  std::vector<uint32_t> op_of_kernel;  // per DeviceTrace::kernels entry: capture-time op id, 0 = none
};
GraphAttribution attribute_graph_kernels(const DeviceTrace& device);

}  // namespace strata::reports
