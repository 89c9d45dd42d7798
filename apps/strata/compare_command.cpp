// `strata compare`: the same op eager and replayed (CUDA Graph on a GPU, plan replay on the CPU), in one
// process, rounds of K ops each, every figure per op. See docs/compare.md.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>

#include <nlohmann/json.hpp>

#include "apps/strata/commands.h"
#include "apps/strata/compiled_program.h"
#include "apps/strata/command_output.h"
#include "apps/strata/python_module.h"
#include "apps/strata/replay_rounds.h"
#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "lib/machine.h"
#include "lib/zone.h"
#include "measure/device_session.h"
#include "measure/harness.h"
#include "measure/report_builder.h"
#include "reports/model/units.h"
#include "reports/model/comparison.h"
#include "reports/formats/json_report.h"
#include "reports/formats/json_text.h"
#include "reports/formats/notes.h"
#include "reports/formats/table.h"

namespace strata::app {
namespace {

// Calls per round (K): --ops-per-graph ops, or for a sequence --ops-per-graph whole forwards, 1 unless
// given (a model captures its forward: docs/sequences.md).
int64_t iterations_per_round(const Prepared& prepared, const CompareOptions& options) {
  return prepared.sequence && !options.ops_per_graph_given ? 1 : options.ops_per_graph;
}

// What capturing K calls keeps alive beyond the inputs: per call, its peak (Note [Peak bytes of a call])
// less the inputs every call shares. A sequence counts its whole forward each time (its activations, and
// its input and parameters, which errs on the safe side). Saturates instead of overflowing: a product
// past size_t fits no machine, and check_fits refuses it.
size_t captured_bytes(const Prepared& prepared, int64_t k) {
  size_t per_call = 0;
  if (prepared.sequence) {
    per_call = prepared.sequence->bytes;
  } else {
    size_t inputs = 0;
    for (const binding::IValue& a : prepared.call.args)
      if (a.is_tensor()) inputs += a.tensor().nbytes();
    per_call = prepared.call.bytes > inputs ? prepared.call.bytes - inputs : 0;
  }
  const auto calls = static_cast<size_t>(k);
  if (per_call != 0 && calls > std::numeric_limits<size_t>::max() / per_call) return std::numeric_limits<size_t>::max();
  return calls * per_call;
}

// One workload's eager rounds (Note [What the harness runs]): `k` iterations of work.steps() calls each,
// one synchronisation per round (as a graph replay has), so that both modes keep the device equally busy.
template <typename Work>
struct EagerRounds {
  const Work& work;
  measure::DeviceSession& session;
  Timeline& timeline;
  uint32_t& next_id;
  int64_t k;

  binding::IValue round(bool traced, std::vector<uint32_t>* ids) const {
    binding::IValue out;
    for (int64_t i = 0; i < k; ++i) {
      measure::stop_if_interrupted();   // a round of K forwards of a large model takes seconds
      out = binding::IValue();  // one output alive at a time: see Note [One output at a time] (harness.cpp)
      if (traced) {
        tracing::ActiveScope scope(&timeline);
        for (size_t j = 0; j < work.steps(); ++j) {
          timeline.set_op(next_id);
          {
            measure::OpCall tag(session, next_id);
            out = work.run(j, std::move(out));
          }
          ids->push_back(next_id++);
        }
        timeline.set_op(0);
      } else {
        for (size_t j = 0; j < work.steps(); ++j) out = work.run(j, std::move(out));
      }
    }
    session.synchronize();
    return out;
  }
};

// Capturing K calls keeps what each of them made alive until the capture ends, on every device: a CUDA
// Graph writes each output at every replay, and a CPU plan links each step to its producer by address,
// so all K outputs (and, under autocast, the casts each call made) exist at once while it records.
// Refused here, before the first round, when it would not fit (the inputs are already allocated).
void check_capture_fits(const Prepared& prepared, int64_t k) {
  frontend::check_fits(captured_bytes(prepared, k), measure::available_bytes(prepared.choice.device), prepared.choice.device,
                       "--ops-per-graph " + std::to_string(k) + " (capturing keeps what each of the " +
                           std::to_string(k) + (prepared.sequence ? " forwards" : " calls") +
                           " made alive; lower --ops-per-graph)");
}

// The untraced first round and warm-ups, and how many timed rounds follow: --repeat, or as many as fit in
// half the budget. The first round is where the libraries make their plans: it runs on a scratch timeline
// whose plan annotations are kept (Note [Annotations on the timeline]) and whose spans are not. The cold
// call is `strata trace`'s to report. Makes room for every timed span, so the buffer never grows mid-round.
template <typename Work>
int64_t plan_rounds(const EagerRounds<Work>& eager, const CompareOptions& options, binding::IValue& eager_out) {
  size_t round_spans = 0;  // what one eager round writes: it sizes the buffer for all of them, below
  {
    Timeline first(1024);
    {
      tracing::ActiveScope scope(&first);
      eager_out = eager.round(false, nullptr);
    }
    for (const Annotation& a : first.annotations()) eager.timeline.add_annotation(a);
    round_spans = first.spans().size();
  }
  const uint64_t w0 = host_clock::ticks();
  for (int64_t i = 0; i < options.trace.warmup; ++i) eager.round(false, nullptr);
  int64_t rounds = options.trace.repeat.value_or(0);
  if (rounds == 0) {
    // Half the budget per mode; each timed round costs about one warm-up round.
    const double per_round = options.trace.warmup > 0 ? host_clock::elapsed_ns(w0) / double(options.trace.warmup) : 1e6;
    rounds = std::clamp<int64_t>(static_cast<int64_t>(options.trace.budget_s * 0.5e9 / std::max(per_round, 1.0)), 10, 2000);
  }
  // An eager round's spans as the first round wrote them, and as many again for a replay (its kernels'
  // zones, fewer than eager's).
  measure::reserve_spans(eager.timeline, static_cast<size_t>(rounds), 2 * round_spans + 8,
                "--repeat " + std::to_string(rounds) + " rounds of " + std::to_string(eager.k) +
                    (eager.work.steps() > 1 ? " forwards" : " calls"),
                "lower --repeat or --ops-per-graph");
  return rounds;
}

template <typename Work>
void time_eager_rounds(const EagerRounds<Work>& eager, int64_t rounds, binding::IValue eager_out, CompareRounds& out) {
  out.eager_ids.resize(static_cast<size_t>(rounds));
  out.eager_begin = host_clock::now_ns();
  for (int64_t r = 0; r < rounds; ++r) {
    measure::stop_if_interrupted();
    const uint64_t t0 = host_clock::ticks();
    eager_out = eager.round(true, &out.eager_ids[static_cast<size_t>(r)]);
    out.eager_wall.push_back(host_clock::elapsed_ns(t0));
  }
  out.eager_end = host_clock::now_ns();
  out.eager_out = std::move(eager_out);
}

// Replay: capture K calls through the full stack once, then replay them. The captured calls get op ids of
// their own: graph nodes are attributed to them (CUPTI resource callbacks), and through the nodes every
// replayed kernel.
template <typename Work>
void time_replay_rounds(const EagerRounds<Work>& eager, int64_t rounds, int64_t warmup, CompareRounds& out) {
  measure::DeviceSession& session = eager.session;
  std::vector<uint32_t> capture_ids;
  for (int64_t i = 0; i < eager.k; ++i) capture_ids.push_back(eager.next_id++);
  out.replay = session.capture(
      [&] {
        binding::IValue x;
        for (size_t j = 0; j < eager.work.steps(); ++j) x = eager.work.run(j, std::move(x));
        return x;
      },
      capture_ids, out.cost);
  const uint64_t first = host_clock::ticks();
  out.replay->replay();
  session.synchronize();
  out.first_replay_ns = host_clock::elapsed_ns(first);
  ReplayRounds timed = time_replays(*out.replay, session, eager.timeline, eager.next_id, rounds, warmup);
  out.replay_ids = std::move(timed.ids);
  out.replay_wall = std::move(timed.walls);
  out.replay_begin = timed.begin;
  out.replay_end = timed.end;
}

// The rounds for one workload: eager, then replayed, the same number of each.
template <typename Work>
CompareRounds compare_rounds(const Work& work, const Prepared& prepared, const CompareOptions& options, Timeline& timeline,
                             uint32_t& next_id) {
  const EagerRounds<Work> eager{work, *prepared.session, timeline, next_id, iterations_per_round(prepared, options)};
  check_capture_fits(prepared, eager.k);
  binding::IValue eager_out;
  const int64_t rounds = plan_rounds(eager, options, eager_out);
  CompareRounds out;
  time_eager_rounds(eager, rounds, std::move(eager_out), out);
  time_replay_rounds(eager, rounds, options.trace.warmup, out);
  return out;
}

// compare --peer torch: the same rounds of K calls through torch, after strata's and its device flush,
// eager and through torch's own replay (python_embed.cpp: compare_modes). Figures per op, medians.
reports::PeerComparison compare_peer(const Prepared& prepared, const CompareOptions& options, int64_t rounds) {
  python_module::PeerCall& peer = *prepared.peer_call;
  const int64_t k = iterations_per_round(prepared, options);
  const python_module::PeerRounds r = peer.compare_rounds(k, options.trace.warmup, rounds);
  reports::PeerComparison c;
  c.version = peer.version();
  c.expression = peer.expression();
  c.work = peer.work();
  c.replay_kind = r.replay_kind;
  c.note = r.why_no_replay;
  c.eager_ns = reports::Distribution::of(r.eager_ns).median / double(k);
  if (!r.replay_ns.empty()) c.replay_ns = reports::Distribution::of(r.replay_ns).median / double(k);
  c.setup_ns = r.setup_ns;
  c.rounds = r.eager_ns.size();
  // torch's rows, from their own probed calls after the rounds (the comparison's Chrome trace has no
  // torch process, so their spans are not kept).
  c.layered.name = "torch";
  Timeline spans(16);
  peer.layers(static_cast<int>(std::min<int64_t>(std::max<int64_t>(k * rounds, 1), 200)), c.layered, spans);
  return c;
}

}  // namespace

CompareRounds run_compare_rounds(const Prepared& prepared, const CompareOptions& options, Timeline& timeline, uint32_t& next_id) {
  if (prepared.sequence) return compare_rounds(measure::SequenceCall{*prepared.sequence}, prepared, options, timeline, next_id);
  // --frontend python: the eager calls and the capture go through Python; replays never do.
  return compare_rounds(measure::SingleCall{prepared.call, prepared.invoke ? &prepared.invoke : nullptr}, prepared, options, timeline, next_id);
}

void check_ops_per_graph(int64_t ops_per_graph) {
  if (ops_per_graph < 1 || ops_per_graph > 4096) {
    throw UsageError("--ops-per-graph must be between 1 and 4096, got " + std::to_string(ops_per_graph));
  }
}

namespace {

// Neither mode runs a backward: a replay is the captured forward calls, and a graph of the engine's walk
// is not captured. Accepting the flag would print forward figures as if they covered it.
void check_compare_options(const CompareOptions& options) {
  check_ops_per_graph(options.ops_per_graph);
  if (options.trace.backward) {
    throw UsageError("--backward applies to 'strata trace': compare times forward calls eager and replayed, and "
                     "replays no backward (run strata trace " + options.trace.op + " " + options.trace.spec +
                     " --requires-grad --backward)");
  }
}

// --check of an in-place op (add_, div_, relu_, ...): every eager call and every replay wrote self, so the
// last result is self thousands of calls from the inputs, and the reference computed from self as it then
// is is one call further on: the check failed a correct add_ (by 1/calls) and div_ (inf), and passed mul_
// (self shrunk to zeros) whatever the kernel computed. A replayed graph writes its captured buffers, so
// fresh inputs cannot be checked through it either; trace checks one call on fresh inputs.
void refuse_in_place_check(const Prepared& prepared, const CompareOptions& options) {
  if (!options.trace.check || prepared.sequence || !prepared.call.op) return;
  const auto& arguments = prepared.call.op->schema().arguments;
  if (arguments.empty() || !arguments.front().writes) return;
  throw UsageError("--check with " + options.trace.op + ", which writes its input in place: every eager call and "
                   "every replay wrote self, so the last result has no reference to be checked against; check the "
                   "kernel with strata trace " + options.trace.op + " " + options.trace.spec + " --check (one call on "
                   "fresh inputs), and time it here without --check");
}

// --check: both modes (and a program's compiled column) must compute the same thing, each result against
// the float64 reference.
void check_modes(reports::TraceReport& ctx, const Prepared& prepared, const CompareOptions& options, const CompareRounds& rounds,
                 const CompiledColumn& compiled) {
  const auto ref = prepared.sequence ? frontend::reference_result(*prepared.sequence) : frontend::reference_result(prepared.spec, prepared.call);
  // Under --autocast a sequence's GEMMs compute in the autocast dtype (and what follows them in theirs).
  const double tol = prepared.sequence ? frontend::sequence_tolerance(prepared.sequence->spec, prepared.autocast.value_or(prepared.dtype), options.trace.tf32)
                                : reference::tolerance(prepared.compute_dtype(), options.trace.tf32);
  const double e_err = reference::relative_error(rounds.eager_out.tensor(), ref);
  const double r_err = reference::relative_error(rounds.replay->last_result().tensor(), ref);
  ctx.check.ran = true;
  ctx.check.relative_error = std::max(e_err, r_err);
  ctx.check.tolerance = tol;
  ctx.figures.set("check.eager_relative_error", e_err, "ratio");
  ctx.figures.set("check.replay_relative_error", r_err, "ratio");
  ctx.figures.set("check.tolerance", tol, "ratio");
  ctx.notes.push_back(reports::compare_check_note(ctx.figures, rounds.replay->kind()));
  if (compiled.program) {
    const double c_err = reference::relative_error(compiled.out.tensor(), ref);
    ctx.check.relative_error = std::max(ctx.check.relative_error, c_err);
    ctx.figures.set("check.compiled_relative_error", c_err, "ratio");
    char text[96];
    std::snprintf(text, sizeof text, "check: compiled relative error vs float64 reference %.2e", c_err);
    ctx.notes.push_back(text);
  }
}

// The rounds alternate eager and replay, so both columns meet the same load; but a load above the CPU
// count makes either median move by more than the difference being measured: the note says so, as trace's
// spread note does.
void add_load_note(reports::TraceReport& ctx) {
  const double load = load_average();
  if (load >= 0) ctx.figures.set("host.load_average_1min", load, "ratio");
  if (overloaded(load)) {
    ctx.notes.push_back(load_context(load) + ": other work shared the cores while the rounds ran, so both "
                        "columns moved with it; rerun on a quiet machine before trusting the difference");
  }
}

// What the replay's kernels could be attributed to, and the notes on what the replay was.
void describe_replay(reports::TraceReport& ctx, const CompareRounds& rounds, const Timeline& timeline,
                     const reports::GraphAttribution& attribution) {
  const std::string kind = rounds.replay->kind();
  ctx.figures.set("graph_replay.replayed_kernels", double(attribution.replayed_kernels), "count");
  ctx.figures.set("graph_replay.attributed_kernels", double(attribution.attributed), "count");
  ctx.figures.set("graph_replay.attributed_by_capture_info", double(attribution.attributed_by_capture_info), "count");
  if (rounds.cost.recorded_calls > 0)
    ctx.figures.set("plan_replay.recorded_calls", double(rounds.cost.recorded_calls), "count");
  ctx.figures.set("device_timing.enabled", timeline.device.enabled ? 1 : 0, "bool");
  if (std::string note = reports::graph_replay_note(ctx.figures, kind == "plan replay"); !note.empty())
    ctx.notes.push_back(note);
  if (kind == "plan replay") {
    ctx.notes.push_back("no GPU in use: the replay is a plan of the resolved kernel calls (no binding, no dispatch), "
                        "not a CUDA Graph");
  }
}

// A sequence's round is whole forwards: the note gives the per-forward figures beside the per-op ones.
void add_forwards_note(reports::TraceReport& ctx, const reports::Comparison& c, const Prepared& prepared,
                       const CompareOptions& options, int64_t k) {
  const int64_t forwards = iterations_per_round(prepared, options);
  const std::string ops = std::to_string(prepared.sequence->steps.size());
  ctx.notes.push_back("a round is " + std::to_string(forwards) + " whole forward" + (forwards == 1 ? "" : "s") + " of " +
                      ops + " ops (eager: every op through binding and dispatch; replay: the same captured once and "
                      "replayed); figures are per op, one forward = " + ops + " ops: eager " +
                      reports::format_ns(c.eager.wall * double(k) / double(forwards)) + ", replay " +
                      reports::format_ns(c.replay.wall * double(k) / double(forwards)) + " per forward");
}

// The header line, and the notes on how the calls were made (--frontend python, --peer torch).
std::string compare_header(reports::TraceReport& ctx, const Prepared& prepared, const std::string& replay_kind) {
  std::string header = "compare " + ctx.op + "  " + ctx.description + "  " + ctx.dtype + "  " + ctx.device +
                       "   eager vs " + replay_kind;
  if (prepared.peer_call && !prepared.python_call) measure::add_cpp_beside_python_peer_note(ctx);
  if (prepared.python_call) {
    header += "\nfrontend: python: " + ctx.frontend_what;
    ctx.notes.push_back("eager calls (and the K captured ones) went through Python: the python row holds the python and "
                        "pybind11 rows of `strata trace`; the replay skips Python altogether");
  }
  return header;
}

// The table, the JSON and the Chrome trace of a comparison.
CommandOutput compare_output(const std::string& header, const reports::Comparison& c, const reports::TraceReport& ctx,
                             const Prepared& prepared, const CompareRounds& rounds, const CompiledColumn& compiled,
                             const Timeline& timeline) {
  CommandOutput output;
  output.print_table = [&](std::ostream& out) {
    reports::print_comparison_table(header, c, out);
    for (const std::string& note : ctx.notes) out << "note: " << note << "\n";
    if (prepared.sequence) print_three_way(c, compiled, prepared.sequence->steps.size(), rounds.cost.recorded_calls, out);
  };
  output.json = [&] {
    if (!prepared.sequence) return reports::comparison_json(c, ctx);
    nlohmann::json j = nlohmann::json::parse(reports::comparison_json(c, ctx));
    j["three_way"] = three_way_json(c, compiled, prepared.sequence->steps.size(), rounds.cost.recorded_calls);
    return reports::json_text(j);
  };
  output.chrome_trace = [&](reports::ChromeTraceWriter& writer) {
    writer.add_metadata("op", header);
    for (const auto& [key, v] : ctx.env.device) writer.add_metadata(key, v);
    reports::TraceMetadata kineto;
    kineto.gpus = prepared.session->trace_gpus();
    kineto.steps = rounds.eager_ids;
    kineto.steps.insert(kineto.steps.end(), rounds.replay_ids.begin(), rounds.replay_ids.end());
    kineto.steps.insert(kineto.steps.end(), compiled.ids.begin(), compiled.ids.end());
    writer.set_trace_metadata(std::move(kineto));
    writer.add_timeline(timeline, "eager", 0, rounds.eager_begin, rounds.eager_end);
    writer.add_timeline(timeline, rounds.replay->kind(), 1, rounds.replay_begin, rounds.replay_end);
    if (compiled.program) writer.add_timeline(timeline, "compiled", 2, compiled.begin, compiled.end);
  };
  output.check = ctx.check;
  output.tolerance_name = "tolerance";
  return output;
}

}  // namespace

int run_compare(const CompareOptions& options) {
  check_compare_options(options);
  Prepared prepared = prepare_trace(options.trace);
  refuse_in_place_check(prepared, options);
  // Figures are per op: a round of K iterations is K ops, or K forwards of S ops each for a sequence.
  const int64_t k = iterations_per_round(prepared, options) * static_cast<int64_t>(prepared.sequence ? prepared.sequence->steps.size() : 1);
  measure::DeviceSession& session = *prepared.session;
  Timeline timeline;
  uint32_t next_id = 1;
  CompareRounds rounds = run_compare_rounds(prepared, options, timeline, next_id);
  // A program (mlp or a named one) gets a third column, compiled (compiled_column.cpp).
  CompiledColumn compiled;
  if (prepared.sequence) {
    compiled = run_compiled_column(prepared, iterations_per_round(prepared, options), rounds.eager_wall.size(), options.trace.warmup, timeline,
                                   next_id);
  }
  session.finish(timeline);

  reports::Comparison c;
  c.ops_per_replay = k;
  c.capture_ns = rounds.cost.capture_ns;
  c.instantiate_ns = rounds.cost.instantiate_ns;
  c.first_replay_ns = rounds.first_replay_ns;
  c.probe_ns = measure_zone_cost_ns();
  c.eager = reports::mode_figures("eager", timeline, rounds.eager_ids, rounds.eager_wall, k);
  reports::GraphAttribution attribution = reports::attribute_graph_kernels(timeline.device);
  attribute_compiled_replay(compiled, timeline.device, attribution);  // the graph column's figures: eager's alone
  c.replay = reports::mode_figures(rounds.replay->kind(), timeline, rounds.replay_ids, rounds.replay_wall, k);
  if (prepared.peer_call) c.peer = compare_peer(prepared, options, static_cast<int64_t>(rounds.eager_wall.size()));

  reports::TraceReport ctx = describe_context(prepared, options.trace);
  session.describe(ctx);
  if (options.trace.check) check_modes(ctx, prepared, options, rounds, compiled);
  describe_replay(ctx, rounds, timeline, attribution);
  if (prepared.sequence) add_forwards_note(ctx, c, prepared, options, k);
  add_load_note(ctx);
  const std::string header = compare_header(ctx, prepared, rounds.replay->kind());
  const int code = write_command_output(
      options.trace, compare_output(header, c, ctx, prepared, rounds, compiled, timeline), std::cout, std::cerr);
  // As trace: torch's rows that could not be measured make the run exit 4 after everything is written.
  if (code == 0 && c.peer && !c.peer->layered.rows_note.empty()) {
    std::cerr << "strata: --peer torch: torch's rows: " << c.peer->layered.rows_note << "\n";
    return static_cast<int>(ExitCode::kUnavailable);
  }
  return code;
}

}  // namespace strata::app
