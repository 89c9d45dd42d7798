#include "apps/strata/replay_rounds.h"

#include "lib/host_clock.h"
#include "lib/zone.h"
#include "measure/harness.h"

namespace strata::app {

ReplayRounds time_replays(measure::Replay& replay, measure::DeviceSession& session, Timeline& timeline,
                          uint32_t& next_id, int64_t rounds, int64_t warmup) {
  for (int64_t i = 0; i < warmup; ++i) {
    replay.replay();
    session.synchronize();
  }
  ReplayRounds out;
  out.begin = host_clock::now_ns();
  for (int64_t r = 0; r < rounds; ++r) {
    measure::stop_if_interrupted();
    const uint64_t t0 = host_clock::ticks();
    {
      tracing::ActiveScope scope(&timeline);
      timeline.set_op(next_id);
      {
        measure::OpCall tag(session, next_id);
        replay.replay();
      }
      timeline.set_op(0);
    }
    session.synchronize();
    out.walls.push_back(host_clock::elapsed_ns(t0));
    out.ids.push_back({next_id++});
  }
  out.end = host_clock::now_ns();
  return out;
}

}  // namespace strata::app
