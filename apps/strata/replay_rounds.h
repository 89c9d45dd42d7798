// The timed rounds of a captured replay: `strata compare`'s graph column (compare_command.cpp) and, on a
// GPU, its compiled column (compiled_column.cpp) time theirs with this one loop, so the two columns are
// measured alike.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/timeline.h"
#include "measure/device_session.h"

namespace strata::app {

struct ReplayRounds {
  std::vector<std::vector<uint32_t>> ids;  // per round, the one op id its replay was tagged with
  std::vector<double> walls;               // per round, issue to completion, ns
  int64_t begin = 0, end = 0;              // host clock, ns: the timed rounds' window
};

// `warmup` untimed replays, then `rounds` timed ones, each synchronised: one synchronisation a round, as
// eager's rounds have. Each timed replay is one op id from `next_id`, given to the session (CUPTI tags the
// graph launch with it) and to the timeline (its host zones).
ReplayRounds time_replays(measure::Replay& replay, measure::DeviceSession& session, Timeline& timeline,
                          uint32_t& next_id, int64_t rounds, int64_t warmup);

}  // namespace strata::app
