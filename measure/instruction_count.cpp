// Note [Instructions per row] (instruction_count.h): the child's side, under callgrind.
#include "measure/instruction_count.h"

#include <cstdlib>
#include <fstream>
#include <map>

#include "lib/error.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define STRATA_HAVE_CALLGRIND 1
#else
#define STRATA_HAVE_CALLGRIND 0
#endif

namespace strata::measure {
namespace {

// The "totals: N" line of one callgrind dump: the instructions (event Ir, callgrind's default and only
// event here) of the interval it closed.
uint64_t read_dump_total(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("--count instructions: callgrind's dump " + path + " is missing");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("totals:")) return std::strtoull(line.c_str() + 7, nullptr, 10);
  throw Error("--count instructions: callgrind's dump " + path + " has no totals line");
}

}  // namespace

bool instruction_counting_built() { return STRATA_HAVE_CALLGRIND != 0; }

bool counting_instructions_here() {
#if STRATA_HAVE_CALLGRIND
  return RUNNING_ON_VALGRIND != 0 && std::getenv(kCallgrindOutEnv) != nullptr;
#else
  return false;
#endif
}

InstructionCounter::InstructionCounter(Timeline& timeline) : timeline_(timeline) {
  const char* out = std::getenv(kCallgrindOutEnv);
  out_file_ = out == nullptr ? "" : out;
  owners_.reserve(size_t{1} << 16);  // the hook must not allocate often: it runs between two dumps
  timeline_.set_boundary_hook(&InstructionCounter::boundary, this);
#if STRATA_HAVE_CALLGRIND
  CALLGRIND_ZERO_STATS;
#endif
}

InstructionCounter::~InstructionCounter() {
  if (recording_) timeline_.set_boundary_hook(nullptr, nullptr);
}

void InstructionCounter::boundary(void* context, int32_t span, bool resumed) noexcept {
  auto* self = static_cast<InstructionCounter*>(context);
#if STRATA_HAVE_CALLGRIND
  if (resumed) {
    CALLGRIND_ZERO_STATS;
    return;
  }
  CALLGRIND_DUMP_STATS;
#else
  if (resumed) return;
#endif
  self->owners_.push_back(span);
}

std::vector<uint64_t> InstructionCounter::finish() {
  timeline_.set_boundary_hook(nullptr, nullptr);
  recording_ = false;
  // Dumps are numbered from 1 in the order they were asked for: dump N holds owners_[N - 1]'s work.
  std::vector<uint64_t> self(timeline_.spans().size(), 0);
  for (size_t n = 0; n < owners_.size(); ++n) {
    const int32_t owner = owners_[n];
    if (owner < 0 || static_cast<size_t>(owner) >= self.size()) continue;
    self[static_cast<size_t>(owner)] += read_dump_total(out_file_ + "." + std::to_string(n + 1));
  }
  return self;
}

std::vector<double> attribute_instructions(reports::LayerBreakdown& steady, const Timeline& timeline,
                                           std::span<const uint32_t> op_ids, const std::vector<uint64_t>& self) {
  using reports::RowKind;
  std::map<uint32_t, size_t> slot;
  for (size_t k = 0; k < op_ids.size(); ++k) slot[op_ids[k]] = k;
  // Per row ("binding", "dispatch/CPU", ...: BreakdownRow::id()), per call: the same rows as the times'.
  std::map<std::string, std::vector<double>> per_row;
  std::vector<double> binding_dispatch(op_ids.size(), 0);
  const auto& spans = timeline.spans();
  for (size_t i = 0; i < spans.size() && i < self.size(); ++i) {
    const Span& s = spans[i];
    auto it = slot.find(s.op_id);
    if (it == slot.end()) continue;
    std::string row;
    switch (s.layer) {
      case Layer::kPython: row = "python"; break;
      case Layer::kPybind11: row = "pybind11"; break;
      case Layer::kBinding: row = "binding"; break;
      case Layer::kDispatch: row = std::string("dispatch/") + s.name; break;
      case Layer::kLibrary: row = "library"; break;
      case Layer::kRuntime: row = "runtime"; break;
      default: continue;  // frontend and harness spans are no part of an op's rows
    }
    std::vector<double>& samples = per_row[row];
    samples.resize(op_ids.size(), 0);
    samples[it->second] += double(self[i]);
    if (s.layer == Layer::kBinding || s.layer == Layer::kDispatch) binding_dispatch[it->second] += double(self[i]);
  }
  for (reports::BreakdownRow& row : steady.rows) {
    if (!row.applicable) continue;
    auto found = per_row.find(row.id());
    if (found != per_row.end()) row.instructions = reports::median_of(found->second);
  }
  return binding_dispatch;
}

}  // namespace strata::measure
