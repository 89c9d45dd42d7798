// Role: model.
// The per-layer breakdown of one op call, computed from a finished Timeline (docs/design.md, "One traced call"):
//   python / pybind11: self time of the Python frontend's and the crossing's spans, present only when
//            the call came from Python with those rows on (Note [The python and pybind11 rows])
//   binding / dispatch (one row per key) / library : self time of that layer's spans (span minus children)
//   runtime: self time of Runtime-layer spans (allocator, graph/plan replay), present only when any ran
//   launch : the CUDA launch API calls of the op (CUPTI API records joined by correlation id)
//   queue  : first kernel start - begin of the launch call that enqueued it
//   gpu    : union of the op's kernel intervals
//   wall   : first span begin -> max(last span end, last kernel end)
// Every figure is a distribution over the timed calls. Measuring is separate from printing: this file
// produces named figures, reports/table.* formats them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "lib/timeline.h"

namespace strata::reports {

struct Distribution {
  std::vector<double> samples;  // ns, in call order
  double median = 0, p90 = 0, min = 0, max = 0, mean = 0;
  static Distribution of(std::vector<double> samples);
  size_t count() const { return samples.size(); }
};
double median_of(std::vector<double> samples);  // Distribution::of(samples).median: a measured value

// The rows of the breakdown, in the order the table prints them. `wall` is no row of LayerBreakdown::rows
// (it is LayerBreakdown::wall) but has words of its own, so it has a kind.
enum class RowKind : uint8_t { kPython, kPybind11, kBinding, kDispatch, kLibrary, kRuntime, kLaunch, kQueue, kGpu, kWall };
inline constexpr size_t kRowKinds = 10;
const char* row_kind_name(RowKind kind);  // "binding", ..., "wall": the JSON's "layer" and the table's label

struct BreakdownRow {
  RowKind kind = RowKind::kBinding;
  std::string key;  // for dispatch rows: the dispatch key ("Autograd", "CPU", ...); one row per key
  std::vector<std::string> names;  // distinct span / API names that make up the row, in first-seen order
  Distribution ns;
  bool applicable = true;
  // Words for the row, said by whoever knows what the call did (the app, the device session); empty:
  // the table joins `names`. `na_reason` is what the table prints for a row that is not applicable.
  std::string what;
  std::string na_reason;
  // The median is under twice the measured cost of one probe (a zone's open + close): below what the
  // host timers resolve, so the table marks it instead of printing it as a measured fact.
  bool below_resolution = false;
  // Under `--count instructions`: the instructions the row's spans executed themselves, median per call
  // (Note [Instructions per row] in measure/instruction_count.h); -1 when not counted.
  double instructions = -1;

  std::string id() const;  // "binding", "dispatch/Autograd": how the JSON and the analysis name a row
  double total() const;    // sum over the calls: the one way to total a row
};

struct KernelSummary {  // one GPU kernel of the op (identical launches across calls merged)
  std::string name;
  int32_t grid[3] = {0, 0, 0};
  int32_t block[3] = {0, 0, 0};
  int32_t registers_per_thread = 0;
  int32_t shared_bytes = 0;  // static + dynamic
  uint32_t device_id = 0;
  uint32_t stream_id = 0;         // the stream of its first launch
  std::vector<uint32_t> streams;  // every stream it ran on, in first-seen order (cuDNN spreads work over its own)
  Distribution ns;
};

// What the device records say about their own timestamps, held against strata's host timers (Note [One
// host clock]). All 0 when CUPTI's timestamps are on strata's clock and its latency timestamps came in.
struct TimestampChecks {
  // Launch calls that lie inside no host zone of their op: CUPTI's API timestamps are not on the host
  // clock (the timestamp callback is not in effect), so launch and queue rows are not trustworthy.
  uint64_t launches_outside_zones = 0;
  uint64_t kernels_before_launch = 0;       // kernels that started before their launch call: a negative queue
  uint64_t kernels_without_latency = 0;     // kernels without CUPTI's queued/submitted timestamps
  uint64_t kernels_latency_disordered = 0;  // kernels where queued <= submitted <= start does not hold

  TimestampChecks& operator+=(const TimestampChecks& other);
};

// Every TimestampChecks counter with the name the reports give it ("steady.<name>" in figures, "<name>" in
// the JSON breakdown's "timestamps" object): summing, figures and JSON all walk this one list, so a new
// check is added here once.
struct TimestampCheckField {
  const char* name;
  uint64_t TimestampChecks::*count;
};
inline constexpr std::array<TimestampCheckField, 4> kTimestampCheckFields{{
    {"launches_outside_zones", &TimestampChecks::launches_outside_zones},
    {"kernels_before_launch", &TimestampChecks::kernels_before_launch},
    {"kernels_without_latency", &TimestampChecks::kernels_without_latency},
    {"kernels_latency_disordered", &TimestampChecks::kernels_latency_disordered},
}};

struct LayerBreakdown {
  std::vector<BreakdownRow> rows;
  Distribution wall;
  std::vector<KernelSummary> kernels;
  size_t calls = 0;
  bool has_device_records = false;
  uint64_t unmatched_launches = 0;  // launch API calls with no kernel record that returned success
  uint64_t failed_launches = 0;     // launch API calls that returned an error (no kernel expected)
  // The first few unmatched launches in words (API, correlation id, thread, duration), so that a report
  // can show what they were rather than only how many.
  std::vector<std::string> unmatched_launch_examples;
  uint64_t unmatched_kernels = 0;   // kernel records whose correlation id matches no launch of these ops
  // Where the unmatched launches were made (Note [Launches without a kernel]): how many inside a library's
  // algorithm search (a zone of kind kAlgorithmSearch, cuDNN's Find), and per innermost host zone of the
  // op, how many. Sums of unmatched_launches, not a category apart from them.
  uint64_t unmatched_launches_in_search = 0;
  std::map<std::string, uint64_t> unmatched_launch_zones;
  // Launches without a kernel made while their thread was capturing a stream: CUDA puts their work into a
  // graph instead of on the GPU, so no kernel record can follow them. Counted apart, not as unmatched.
  uint64_t captured_launches = 0;
  // Per call, the sum of its kernels' durations. The gpu row is their union: where this is larger, kernels
  // of the call overlapped (on several streams).
  Distribution kernel_sum;
  TimestampChecks timestamps;       // of the matched launches and kernels
  // The calls the op made to copy a strided input to contiguous memory (the `contiguous:KEY` dispatch
  // spans, Note [Contiguous inputs]): per op call, each such span's whole time (its lookup and the copy
  // inside it, which the dispatch and library rows also count), and how many there were over all calls.
  // Empty and 0 when the op copied nothing.
  Distribution implicit_copy;
  size_t implicit_copies = 0;

  // Sum over the calls of every row of `kind` (all dispatch keys together); 0 when there is none.
  double total(RowKind kind) const;
  // The words of the rows of `kind` (and `key`, for one dispatch key); see BreakdownRow::what.
  void describe(RowKind kind, const std::string& key, const std::string& what);
  void describe_na(RowKind kind, const std::string& na_reason);
  std::string wall_what;  // words for the wall line
};

// Figures for the calls numbered `op_ids` in `timeline`.
LayerBreakdown compute_breakdown(const Timeline& timeline, std::span<const uint32_t> op_ids);

// One line for the report when the timed calls varied widely (p90 at least `ratio` x the median): a
// reader should know the figures came from a noisy run (seen here: OpenBLAS threads sharing 2 cores with
// a build ran 30x slower than alone, median included). Empty when the spread
// is ordinary. `context` says what was seen around the run (e.g. the load average), may be empty.
std::string spread_note(const Distribution& wall, const std::string& context, double ratio = 1.5);

// Self time of each span (its duration minus its children's), in ns, indexed like timeline.spans().
std::vector<double> span_self_ns(const Timeline& timeline);

}  // namespace strata::reports
