// Instructions per row: `strata trace OP SPEC --count instructions` (docs/instructions.md).
//
// Note [Instructions per row]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Time on a shared machine moves with its load; the instructions a call executes do not. So strata can
// run its calls under valgrind's callgrind and give each row the instructions its spans executed
// themselves, the same attribution as the time rows (self = span minus its children):
//  - the CLI re-executes itself under callgrind (apps/strata/count_instructions.cpp) and tells the child,
//    through STRATA_CALLGRIND_OUT, where callgrind writes its dumps;
//  - the child sets a boundary hook on its timeline (Timeline::set_boundary_hook). At every span boundary
//    it asks callgrind to dump and zero its counters (CALLGRIND_DUMP_STATS), noting whose self work the
//    interval just ended was (the innermost open span), and after the timeline's own bookkeeping it
//    zeroes them again (CALLGRIND_ZERO_STATS), so that what a zone costs to record is in no row;
//  - after the run, dump N's total is interval N's instructions: summed per span, then per row and call,
//    like the times. A row's figure is the median over the timed calls (they are exact counts; calls
//    differ only where the code does, e.g. the first call after a cache fills).
// What is not counted: the zone's own bookkeeping (above), the few instructions of the client requests
// themselves (a handful per boundary, counted in the interval they end), and every row that is not a
// host span (launch, queue, gpu: device work, not instructions on this CPU).
// Without valgrind the hook is unset and a zone pays one more predictable branch, only while traced; the
// untraced path (no active timeline) is unchanged.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lib/timeline.h"
#include "reports/model/breakdown.h"

namespace strata::measure {

// The environment variable that carries callgrind's output file from the parent to the child.
inline constexpr const char* kCallgrindOutEnv = "STRATA_CALLGRIND_OUT";

// Whether this build can count (valgrind's headers were found when it was built).
bool instruction_counting_built();

// True in the child the parent started under callgrind (running on valgrind, STRATA_CALLGRIND_OUT set).
bool counting_instructions_here();

// Records the span boundaries of `timeline` while it lives (the hook is removed by the destructor).
// Build one only where counting_instructions_here().
class InstructionCounter {
 public:
  explicit InstructionCounter(Timeline& timeline);
  ~InstructionCounter();
  InstructionCounter(const InstructionCounter&) = delete;
  InstructionCounter& operator=(const InstructionCounter&) = delete;

  // Stops recording and reads callgrind's dumps: per span of the timeline, the instructions it executed
  // itself. Throws Error when a dump is missing or unreadable (nothing to attribute is better than a
  // wrong figure).
  std::vector<uint64_t> finish();

 private:
  static void boundary(void* context, int32_t span, bool resumed) noexcept;
  Timeline& timeline_;
  std::string out_file_;
  std::vector<int32_t> owners_;  // per dump, in order: the span whose self work it holds (-1: none)
  bool recording_ = true;
};

// Sets `instructions` on the host rows of `steady` (the median per call over `op_ids`) from each span's
// self instructions, and returns, per call, the instructions of the binding and dispatch rows together.
std::vector<double> attribute_instructions(reports::LayerBreakdown& steady, const Timeline& timeline,
                                           std::span<const uint32_t> op_ids, const std::vector<uint64_t>& self);

}  // namespace strata::measure
