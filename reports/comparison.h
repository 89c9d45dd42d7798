// Eager vs replay (CUDA Graph on a GPU, plan replay on the CPU), per op: the figures of `strata
// compare`, computed from one Timeline that holds both phases. Each phase is a series of rounds of K ops:
// K eager calls then one synchronisation, or one replay of K captured ops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/timeline.h"
#include "reports/breakdown.h"

namespace strata::reports {

struct ModeFigures {
  std::string label;  // "eager", "CUDA Graph", "plan replay"
  // Per op, ns: the median over rounds of (round total / K).
  double binding = 0, dispatch = 0, library = 0, runtime = 0, launch = 0, queue = 0, gpu = 0, wall = 0;
  double wall_p90 = 0;
  double gpu_idle = 0;  // GPU time between consecutive kernels of a round, per op
  bool has_device = false;
  size_t rounds = 0;
  double host() const { return binding + dispatch + runtime + launch; }  // host overhead per op
};

// `rounds[r]` are the op ids of round r (K of them in eager mode, one per replay), `round_wall_ns[r]` the
// measured wall of that round (issue to completion), `k` the ops per round.
ModeFigures mode_figures(const std::string& label, const Timeline& timeline,
                         const std::vector<std::vector<uint32_t>>& rounds, const std::vector<double>& round_wall_ns,
                         int64_t k);

struct Comparison {
  ModeFigures eager;
  ModeFigures replay;
  int64_t ops_per_replay = 1;
  double capture_ns = 0, instantiate_ns = 0, first_replay_ns = 0;  // one-time costs
  double speedup() const { return replay.wall > 0 ? eager.wall / replay.wall : 0; }
  std::string verdict() const;
};

}  // namespace strata::reports
