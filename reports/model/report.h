// Role: model.
// Everything one `strata trace` run measured, as named figures: what the printers (table, JSON, Chrome
// trace) format. Nothing here is computed by a printer; see Note [Figures, not prose]
// in figures.h.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/dtype.h"
#include "reports/model/breakdown.h"
#include "reports/model/figures.h"

namespace strata::reports {

struct Environment {
  std::string strata_version;
  std::string cpu_model;
  int cpu_threads = 0;
  std::string blas_config;
  int blas_threads = 0;
  int intra_op_threads = 0;  // Note [Intra-op threads] in lib/parallel.h
  std::string intra_op_threads_source;
  std::string cpu_loops;  // the pointwise loops' instruction set: "AVX-512 + SLEEF"
  std::string clock_source;  // "tsc" or "steady_clock", see Note [One host clock]
  double clock_ns_per_tick = 1.0;
  double clock_read_ns = 0;
  std::vector<std::pair<std::string, std::string>> device;  // GPU properties, when one was used
};

struct CheckResult {
  bool ran = false;
  double relative_error = 0;
  double tolerance = 0;
  bool passed() const { return !ran || relative_error <= tolerance; }
};

// One leaf's gradient against its float64 reference (--backward --check).
struct GradCheck {
  std::string argument;  // "weight": the schema's name for it
  double relative_error = 0;
  double tolerance = 0;
  bool passed() const { return relative_error <= tolerance; }
};

// The backward half of a `trace --backward` run (Note [Backward in the harness], measure/harness.cpp).
struct BackwardNodeReport {
  std::string name;        // "AddmmBackward"
  LayerBreakdown steady;   // its gradient ops' rows and the engine's own, over the timed calls
};
struct BackwardReport {
  bool ran = false;
  std::string walk;        // "SumBackward > AddmmBackward > AccumulateGrad > ..."
  LayerBreakdown seed;     // y.sum() and the engine's ones_like seed, over the timed calls
  std::vector<BackwardNodeReport> nodes;  // in walk order
  Distribution wall;       // per timed call: the seed plus every node's wall
  double cold_ns = 0;      // the cold call's backward, seed included
  std::vector<GradCheck> checks;  // one per leaf, when --check ran
};

// --peer torch: the same op, shapes, dtype, device and input values through PyTorch, called from the same
// embedded interpreter and timed the same way (wall per call on strata's host clock, synchronised on a
// GPU). The profile rows are torch.profiler's own numbers, never mixed with strata's.
struct PeerReport {
  std::string name;        // "torch"
  std::string version;     // "PyTorch 1.13.0 (1 intra-op threads; built without CUDA)"
  std::string expression;  // "torch.matmul(self, other)"
  std::string work;        // what each timed call did on both sides: "forward + y.sum().backward()"
  Distribution wall;       // each timed call
  double cold_ns = 0;      // its first call
  double setup_ns = 0;     // import torch and making its inputs, once (not in the cold call)
  Distribution strata_wall;  // strata's untraced calls of the same run, to set beside `wall`
  double relative_difference = -1;  // of strata's result against torch's (reference::relative_error); <0: none
  std::string difference_of;  // what was compared when not the last timed call's results ("" when it was)
  struct ProfileRow {
    std::string name;     // "aten::mm", or a kernel's name
    bool kernel = false;  // GPU kernel: self time on the device; else an aten op's self CPU time
    double self_ns_per_call = 0;  // the profiler's total self time / profiled calls
    double calls_per_call = 0;
  };
  std::vector<ProfileRow> profile;
  int profiled_calls = 0;
  double profile_resolution_ns = 0;  // the profiler's reading granularity per event when coarse, else 0
  std::string profile_note;  // why there is no profile, when there is none

  // torch's call in strata's rows, measured by probes on the wheel's own entry points (Note [torch's rows]
  // in apps/python/torch_layers.cpp, docs/torch-layers.md): python, binding, one dispatch row per key,
  // library. Each row is a distribution over the probed calls, the probes' measured cost taken out.
  struct LayerRow {
    RowKind kind = RowKind::kPython;
    std::string key;                 // the dispatch key as PyTorch names it ("AutogradCPU"); "" for other rows
    std::vector<std::string> names;  // what the row is made of ("aten::mm", "sgemm_"), in first-seen order
    Distribution ns;
  };
  std::vector<LayerRow> rows;
  int layered_calls = 0;           // calls made with the probes in
  double probes_per_call = 0;
  double probe_outer_ns = 0;       // one probe's measured cost outside the span it records (in its caller)
  double probe_inner_ns = 0;       // and inside it
  std::vector<std::string> inseparable;  // what the wheel's entry points cannot split, in words
  // Per aten op ("aten::mm"), its self time per call from the probes (mean over the probed calls, as
  // torch.profiler's rows are): from the dispatcher's entry, less the ops it calls.
  struct OpSelf {
    std::string name;
    double ns_per_call = 0;
  };
  std::vector<OpSelf> op_self;
  // The last probed call's result against the last untraced call's, bit for bit: 1 the same, 0 not,
  // -1 not compared (an in-place op, or no rows).
  int probed_result_identical = -1;
  std::string rows_note;           // why there are no rows (the command then exits 4)
  Distribution rows_wall;          // untraced calls made between the probed ones, to reconcile the rows with
  // rows_wall's median minus the sum of the rows' medians: what no row holds (signed)
  double in_no_row_ns() const;
};

struct TraceReport {
  std::string op;           // "matmul"
  std::string spec;         // "matmul 1024"
  std::string description;  // "[1024x1024] @ [1024x1024]"
  std::string schema;       // "matmul(Tensor self, Tensor other) -> Tensor"
  std::string dtype;        // "f32", "f32 (tf32 math)": for display
  DType element_dtype = DType::kF32;  // what `dtype` displays, for whoever needs the type (the peak table)
  bool tf32 = false;                  // f32 math on TF32 tensor cores (--tf32)
  std::string device;       // "cpu" / "cuda:0 NVIDIA H200"
  std::string device_reason;  // why this device (auto selection), one line
  std::string keys;         // the dispatch key path of a call, "Autograd > CPU"
  std::string frontend = "cli";  // how each call was made: "cli" (C++) or "python" (--frontend python)
  std::string frontend_what;     // "strata.matmul(self, other) in the embedded /usr/bin/python3 3.11.2"
  double flops = 0;         // of one call
  double bytes_moved = 0;   // of one call, for memory-bound ops (their rate is GB/s, not FLOP/s)
  double peak_flops = 0;    // the device's peak for this dtype, 0 when unknown
  std::string peak_source;  // where the peak figure comes from

  LayerBreakdown steady;  // the timed calls
  LayerBreakdown cold;    // the first call, alone
  size_t warmup = 0;
  size_t repeat = 0;
  bool repeat_auto = false;
  size_t planned_repeat = 0;  // > repeat: the time limit (twice --budget) ended the timed loop early
  // Of the random inputs (--seed), so that a run can be repeated on the same data; none where strata made no
  // inputs (strata.profile() times the caller's tensors).
  std::optional<uint64_t> seed;

  double probe_ns = 0;           // measured cost of one zone (open + close)
  double probes_per_call = 0;    // zones per call
  double untraced_call_ns = 0;   // median wall of the same call with tracing off, for comparison

  CheckResult check;
  BackwardReport backward;
  std::optional<PeerReport> peer;  // --peer
  Environment env;
  Figures figures;                 // counts, one-time costs, rates: see Note [Figures, not prose]
  std::vector<std::string> notes;  // e.g. why GPU timing is unavailable; rendered from figures where they say one

  // The words of a row in both breakdowns (the JSON names the cold call's rows as the steady ones).
  void describe(RowKind kind, const std::string& key, const std::string& what);
  void describe_na(RowKind kind, const std::string& na_reason);
};

// The rows' words, the resolution marks and the Environment are filled by the report builder, one for
// every front end: Note [One report builder] in measure/report_builder.h.

// The achieved rate of the timed calls, from `flops`, `bytes_moved` and the steady wall median:
// "achieved_flops_per_s" and, for ops that stream memory, "achieved_bytes_per_s". Measured here, once;
// the table and the JSON only format them.
void add_rate_figures(TraceReport& report);


}  // namespace strata::reports
