#include "reports/formats/table.h"
#include "reports/model/units.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace strata::reports {

namespace {

std::string truncate(std::string s, size_t width) {
  if (s.size() > width) s = s.substr(0, width - 3) + "...";
  return s;
}
std::string percent(double part, double whole) { return format_percent(share_of(part, whole)); }

std::string default_what(const BreakdownRow& r) {
  std::string s;
  for (const std::string& n : r.names) s += (s.empty() ? "" : " > ") + n;
  return s;
}

// One of strata's rows as the peer table sets it beside torch's.
struct StrataRow {
  RowKind kind;
  std::string key;  // a dispatch row's key; one that names no torch key stands alone
  double ns;
};

// torch's rows beside strata's, one line per row (Note [torch's rows] in apps/python/torch_layers.cpp): a
// dispatch row of torch's stands beside strata's row of the same key ("AutogradCPU" beside "Autograd").
void print_peer_rows(const std::string& ours, const std::vector<StrataRow>& strata, double strata_wall,
                     const PeerReport& p, std::ostream& out) {
  if (p.rows.empty()) {
    if (!p.rows_note.empty()) out << "torch's rows: none: " << p.rows_note << "\n";
    return;
  }
  char buf[240];
  std::snprintf(buf, sizeof buf,
                "torch's call in strata's rows: %d calls with probes on the wheel's entry points, %.3g probes per "
                "call, each %s + %s taken out:",
                p.layered_calls, p.probes_per_call, format_ns(p.probe_outer_ns).c_str(),
                format_ns(p.probe_inner_ns).c_str());
  out << buf << "\n";
  out << pad("layer", 10) << pad("key", 26) << lpad(ours, 14) << lpad(p.name, 12) << "   " << p.name << "'s parts\n";
  std::vector<bool> used(strata.size(), false);
  auto strata_row = [&](RowKind kind, const std::string& torch_key) -> const StrataRow* {
    for (size_t i = 0; i < strata.size(); ++i) {
      const StrataRow& r = strata[i];
      if (used[i] || r.kind != kind) continue;
      if (kind == RowKind::kDispatch && (r.key.empty() || torch_key.rfind(r.key, 0) != 0)) continue;
      used[i] = true;
      return &r;
    }
    return nullptr;
  };
  auto line = [&](const std::string& layer, const std::string& key, const std::string& a, const std::string& b,
                  const std::string& parts) {
    out << pad(layer, 10) << pad(key, 26) << lpad(a, 14) << lpad(b, 12) << "   " << truncate(parts, 60) << "\n";
  };
  auto strata_rest = [&](RowKind kind) {
    for (size_t i = 0; i < strata.size(); ++i) {
      if (used[i] || strata[i].kind != kind) continue;
      used[i] = true;
      line(row_kind_name(kind), strata[i].key, format_ns(strata[i].ns), "-", "");
    }
  };
  RowKind previous = RowKind::kPython;
  for (const PeerReport::LayerRow& t : p.rows) {
    if (t.kind != previous) strata_rest(previous);
    previous = t.kind;
    const StrataRow* s = strata_row(t.kind, t.key);
    std::string parts;
    for (const std::string& n : t.names) parts += (parts.empty() ? "" : ", ") + n;
    std::string key = t.key;
    if (s != nullptr && !s->key.empty() && s->key != t.key) key = s->key + " / " + t.key;
    line(row_kind_name(t.kind), key, s != nullptr ? format_ns(s->ns) : "-", format_ns(t.ns.median), parts);
  }
  for (RowKind k : {RowKind::kPython, RowKind::kPybind11, RowKind::kBinding, RowKind::kDispatch, RowKind::kLibrary})
    strata_rest(k);
  const double rest = p.in_no_row_ns();
  line("in no row", "", "-", format_ns(rest),
       percent(std::fabs(rest), p.rows_wall.median) + " of the untraced wall" +
           (std::fabs(rest) > 0.05 * p.rows_wall.median ? " (over 5%)" : ""));
  line("wall", "untraced median", format_ns(strata_wall), format_ns(p.rows_wall.median),
       "torch: calls made between the probed ones");
  for (const std::string& n : p.inseparable) out << "  not separable: " << n << "\n";
  if (p.probed_result_identical >= 0) {
    out << "  " << p.name << "'s result with the probes in: "
        << (p.probed_result_identical == 1 ? "bit for bit the same as without" : "DIFFERENT from without") << "\n";
  }
}

void print_peer_rows(const TraceReport& rep, const PeerReport& p, std::ostream& out) {
  std::vector<StrataRow> strata;
  for (const BreakdownRow& r : rep.steady.rows)
    if (r.applicable) strata.push_back({r.kind, r.key, r.ns.median});
  print_peer_rows("strata (" + rep.frontend + ")", strata, p.strata_wall.median, p, out);
}

// --peer: strata's wall and torch's side by side, both from the same interpreter on the same host clock,
// then torch.profiler's own per-op figures, labelled as its.
void print_peer(const TraceReport& rep, const PeerReport& p, std::ostream& out) {
  const std::string ours = "strata (" + rep.frontend + ")";
  out << "peer: " << p.expression << "   " << p.version << "\n";
  if (!p.work.empty()) out << "  each call, on both sides: " << p.work << "\n";
  out << pad("", 22) << lpad(ours, 18) << lpad(p.name, 14) << lpad("ratio", 9) << "\n";
  auto line = [&](const std::string& name, double a, double b) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2fx", a > 0 ? b / a : 0.0);
    out << pad(name, 22) << lpad(format_ns(a), 18) << lpad(format_ns(b), 14) << lpad(ratio, 9) << "\n";
  };
  line("wall median", p.strata_wall.median, p.wall.median);
  line("wall p90", p.strata_wall.p90, p.wall.p90);
  line("cold first call", rep.cold.wall.median, p.cold_ns);
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "  (untraced calls: strata %zu, %s %zu; ratio = %s / strata; strata's cold call is traced; setup: import "
                "%s and its inputs %s)",
                p.strata_wall.count(), p.name.c_str(), p.wall.count(), p.name.c_str(), p.name.c_str(),
                format_ns(p.setup_ns).c_str());
  out << buf << "\n";
  if (!p.profile.empty()) {
    std::snprintf(buf, sizeof buf, "torch.profiler's own numbers, self time per op call over %d profiled calls:",
                  p.profiled_calls);
    out << buf << "\n";
    bool any_unresolved = false;
    for (const PeerReport::ProfileRow& r : p.profile) {
      const bool unresolved = p.profile_resolution_ns > 0 && r.calls_per_call > 0 &&
                              r.self_ns_per_call / r.calls_per_call < p.profile_resolution_ns;
      any_unresolved = any_unresolved || unresolved;
      std::string probed;
      for (const PeerReport::OpSelf& o : p.op_self)
        if (!r.kernel && o.name == r.name) probed = "   probes: " + format_ns(o.ns_per_call);
      std::snprintf(buf, sizeof buf, "%s  x%.3g per call%s", r.kernel ? "  (kernel, device time)" : "  (aten op, CPU)",
                    r.calls_per_call, probed.c_str());
      out << "  " << pad(truncate(r.name, 40), 42) << lpad(format_ns(r.self_ns_per_call) + (unresolved ? "*" : ""), 12)
          << buf << "\n";
    }
    if (!p.op_self.empty()) {
      out << "  (probes: the op's self time per call in torch's rows below, from their own calls, without the "
             "profiler's overhead)\n";
    }
    if (any_unresolved) {
      std::snprintf(buf, sizeof buf,
                    "  * under the %s per event this torch.profiler reads (whole microseconds): a mean of rounded "
                    "readings, 'about that or less'",
                    format_ns(p.profile_resolution_ns).c_str());
      out << buf << "\n";
    }
  } else if (!p.profile_note.empty()) {
    out << "torch.profiler: " << p.profile_note << "\n";
  }
  if (p.relative_difference >= 0) {
    std::snprintf(buf, sizeof buf, "strata's result vs %s's: relative difference %.3g", p.name.c_str(),
                  p.relative_difference);
    out << buf << (p.difference_of.empty() ? "" : " (" + p.difference_of + ")") << "\n";
  }
  print_peer_rows(rep, p, out);
}

// An instruction count, whole, in groups of three digits: "12,345".
std::string format_instructions(double count) {
  std::string digits = std::to_string(static_cast<uint64_t>(std::llround(count)));
  for (size_t at = digits.size(); at > 3; at -= 3) digits.insert(at - 3, ",");
  return digits;
}

}  // namespace

void print_trace_table(const TraceReport& rep, std::ostream& out) {
  constexpr size_t kWhat = 52;
  // strata.profile()'s blocks have no one dtype (the description names each argument's): no empty column.
  out << rep.op << "  " << rep.description << "  " << (rep.dtype.empty() ? "" : rep.dtype + "  ") << rep.device << "   keys: " << rep.keys
      << "\n";
  if (!rep.device_reason.empty()) out << "device: " << rep.device_reason << "\n";
  if (!rep.frontend_what.empty()) out << "frontend: " << rep.frontend << ": " << rep.frontend_what << "\n";
  // Under --count instructions (Note [Instructions per row] in measure/instruction_count.h): one more column.
  bool counted = false;
  for (const BreakdownRow& r : rep.steady.rows) counted = counted || r.instructions >= 0;
  out << pad("layer", 10) << pad("what", kWhat) << lpad("median", 11) << lpad("p90", 11) << lpad("share", 8)
      << (counted ? lpad("instructions", 14) : "") << "\n";
  const double wall = rep.steady.wall.median;
  for (const BreakdownRow& r : rep.steady.rows) {
    const std::string what = r.what.empty() ? default_what(r) : r.what;
    if (!r.applicable) {
      out << pad(row_kind_name(r.kind), 10) << (r.na_reason.empty() ? "n/a" : r.na_reason) << "\n";
      continue;
    }
    out << pad(row_kind_name(r.kind), 10) << pad(truncate(what, kWhat - 1), kWhat)
        << lpad(format_ns(r.ns.median) + (r.below_resolution ? "*" : ""), 11)
        << lpad(format_ns(r.ns.p90), 11) << lpad(percent(r.ns.median, wall), 8);
    if (counted) out << lpad(r.instructions >= 0 ? format_instructions(r.instructions) : "-", 14);
    out << "\n";
  }
  std::string rate;
  if (const Figure* bandwidth = rep.figures.find("achieved_bytes_per_s")) {
    // A pointwise op does one operation per element: its rate is the memory it streams, not its FLOPs.
    rate = format_bandwidth(bandwidth->value) + " (bytes read + written)";
  } else if (const Figure* flops = rep.figures.find("achieved_flops_per_s")) {
    rate = format_rate(flops->value) + " (" + rep.dtype + ")";
    if (rep.peak_flops > 0) rate += ", " + percent(flops->value, rep.peak_flops) + " of peak";
  }
  out << pad("wall", 10) << pad(truncate(rep.steady.wall_what, kWhat - 1), kWhat) << lpad(format_ns(wall), 11)
      << lpad(format_ns(rep.steady.wall.p90), 11) << "  " << rate << "\n";
  for (const KernelSummary& k : rep.steady.kernels) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  grid %dx%dx%d block %dx%dx%d  %d regs  %d B smem  stream %u", k.grid[0], k.grid[1],
                  k.grid[2], k.block[0], k.block[1], k.block[2], k.registers_per_thread, k.shared_bytes, k.stream_id);
    out << "  kernel " << truncate(k.name, 70) << "\n    " << format_ns(k.ns.median) << " median" << buf << "\n";
  }
  // The cold call is shown apart, row by row: it carries first-use costs users want to see, not average.
  std::string cold;
  for (const BreakdownRow& r : rep.cold.rows) {
    if (!r.applicable || r.ns.median <= 0) continue;
    cold += (cold.empty() ? "" : ", ") + r.id() + " " + format_ns(r.ns.median);
  }
  out << "cold first call: " << format_ns(rep.cold.wall.median) << " (" << cold << ")\n";
  char buf[320];
  char stopped[96] = "";
  if (rep.planned_repeat > rep.repeat) {
    std::snprintf(stopped, sizeof stopped, " (auto; of %zu planned: stopped at twice --budget)", rep.planned_repeat);
  }
  std::snprintf(buf, sizeof buf, "timed calls: %zu%s after %zu warm-up   probe cost: %.0f ns x %.0f zones per call (clock: %s)",
                rep.repeat, stopped[0] ? stopped : rep.repeat_auto ? " (auto)" : "", rep.warmup, rep.probe_ns,
                rep.probes_per_call, rep.env.clock_source.c_str());
  out << buf << "\n";
  if (rep.untraced_call_ns > 0) {
    out << (rep.backward.ran ? "same call and its backward with tracing off: " : "same call with tracing off: ")
        << format_ns(rep.untraced_call_ns) << " median wall\n";
  }
  if (rep.check.ran) {
    std::snprintf(buf, sizeof buf, "check: relative error %.3g vs float64 reference (tolerance %.1g for %s): %s",
                  rep.check.relative_error, rep.check.tolerance, rep.dtype.c_str(),
                  rep.check.passed() ? "PASS" : "FAIL");
    out << buf << "\n";
  }
  if (rep.backward.ran) print_backward_table(rep, out);
  if (rep.peer) print_peer(rep, *rep.peer, out);
  for (const std::string& note : rep.notes) out << "note: " << note << "\n";
}

void print_backward_table(const TraceReport& rep, std::ostream& out) {
  constexpr size_t kWhat = 44;
  const BackwardReport& b = rep.backward;
  out << "\nbackward  y.sum().backward(), the walk: " << b.walk << "\n";
  out << pad("node", 22) << pad("layer", 10) << pad("what", kWhat) << lpad("median", 11) << lpad("p90", 11)
      << lpad("share", 8) << "\n";
  const double total = b.wall.median;
  auto rows = [&](const std::string& node, const LayerBreakdown& br) {
    bool first = true;
    for (const BreakdownRow& r : br.rows) {
      // The forward's table says why launch/queue/gpu are n/a; a row no call of this node touched (an
      // AccumulateGrad that only stores has no library work) is left out rather than printed as 0.
      if (!r.applicable || r.total() <= 0) continue;
      std::string what = r.what.empty() ? default_what(r) : r.what;
      if (r.kind == RowKind::kDispatch && r.what.empty()) what = r.key + " kernel: key set + table lookup";
      out << pad(first ? truncate(node, 21) : "", 22) << pad(row_kind_name(r.kind), 10) << pad(truncate(what, kWhat - 1), kWhat)
          << lpad(format_ns(r.ns.median) + (r.below_resolution ? "*" : ""), 11) << lpad(format_ns(r.ns.p90), 11) << "\n";
      first = false;
    }
    out << pad(first ? truncate(node, 21) : "", 22) << pad("wall", 10) << pad("", kWhat) << lpad(format_ns(br.wall.median), 11)
        << lpad(format_ns(br.wall.p90), 11) << lpad(percent(br.wall.median, total), 8) << "\n";
  };
  rows("seed: sum, ones_like", b.seed);
  for (const BackwardNodeReport& n : b.nodes) rows(n.name, n.steady);
  out << pad("backward total", 32) << pad("seed + every node, per call", kWhat) << lpad(format_ns(total), 11)
      << lpad(format_ns(b.wall.p90), 11) << "\n";
  out << "cold first backward: " << format_ns(b.cold_ns) << "\n";
  if (!b.checks.empty()) {
    std::string line;
    bool passed = true;
    for (const GradCheck& c : b.checks) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s %.3g", c.argument.c_str(), c.relative_error);
      line += (line.empty() ? "" : ", ") + std::string(buf);
      passed = passed && c.passed();
    }
    char tol[64];
    std::snprintf(tol, sizeof tol, " (tolerance %.3g for %s): ", b.checks.front().tolerance, rep.dtype.c_str());
    out << "check gradients: relative error vs float64 reference: " << line << tol << (passed ? "PASS" : "FAIL") << "\n";
  }
}

namespace {

// compare --peer torch: strata's two modes beside torch's, per op, from rounds of the same K calls.
void print_peer_comparison(const Comparison& c, const PeerComparison& p, std::ostream& out) {
  out << "peer: " << p.expression << "   " << p.version << "\n";
  if (!p.work.empty()) out << "  each call, on both sides: " << p.work << "\n";
  const std::string replay = p.replay_kind.empty() ? "-" : p.replay_kind;
  out << pad("per op", 10) << lpad("strata", 14) << lpad("torch", 14) << "\n";
  out << pad("eager", 10) << lpad(format_ns(c.eager.wall), 14) << lpad(format_ns(p.eager_ns), 14) << "\n";
  out << pad("replay", 10) << lpad(format_ns(c.replay.wall), 14)
      << lpad(p.replay_kind.empty() ? "-" : format_ns(p.replay_ns), 14) << "   (strata: " << c.replay.label
      << "; torch: " << replay << ")\n";
  char buf[200];
  std::snprintf(buf, sizeof buf, "  (%zu rounds of %lld calls each side; torch's one-time %s: %s)", p.rounds,
                static_cast<long long>(c.ops_per_replay),
                p.replay_kind.rfind("torch.compile", 0) == 0 ? "compile (its first call)" : "capture",
                p.replay_kind.empty() ? "-" : format_ns(p.setup_ns).c_str());
  out << buf << "\n";
  if (!p.note.empty()) out << "note: " << p.note << "\n";
  // strata's eager rows per op are one dispatch figure over every key: it stands alone, beside none of
  // torch's per-key rows.
  std::vector<StrataRow> strata{{RowKind::kPython, "", c.eager.python},
                                {RowKind::kBinding, "", c.eager.binding},
                                {RowKind::kDispatch, "all keys", c.eager.dispatch},
                                {RowKind::kLibrary, "", c.eager.library}};
  if (c.eager.python <= 0) strata.erase(strata.begin());
  print_peer_rows("strata eager", strata, c.eager.wall, p.layered, out);
}

}  // namespace

void print_comparison_table(const std::string& header, const Comparison& c, std::ostream& out) {
  out << header << "\n";
  const std::string replay_col = c.replay.label + " (per op)";
  out << pad("layer", 10) << lpad("eager (per op)", 16) << lpad(replay_col, std::max<size_t>(16, replay_col.size() + 2)) << "\n";
  const size_t w2 = std::max<size_t>(16, replay_col.size() + 2);
  // Host-zone rows are marked as the trace table marks them (Comparison::probe_ns); launch, queue and
  // gpu come from CUPTI's timestamps, another instrument, and are never marked here.
  std::string unresolved;
  auto line = [&](const char* name, double e, double r, bool eager_applies, bool replay_applies, bool host_zone) {
    auto cell = [&](double v, bool applies, const std::string& mode) {
      if (!applies) return std::string("-");
      const bool below = host_zone && c.probe_ns > 0 && v < 2 * c.probe_ns;
      if (below) unresolved += (unresolved.empty() ? "" : ", ") + mode + " " + name;
      return format_ns(v) + (below ? "*" : "");
    };
    out << pad(name, 10) << lpad(cell(e, eager_applies, "eager"), 16) << lpad(cell(r, replay_applies, c.replay.label), w2)
        << "\n";
  };
  const bool device = c.eager.has_device;
  if (c.eager.python > 0) line("python", c.eager.python, c.replay.python, true, c.replay.python > 0, true);  // + pybind11
  line("binding", c.eager.binding, c.replay.binding, true, c.replay.binding > 0, true);
  line("dispatch", c.eager.dispatch, c.replay.dispatch, true, c.replay.dispatch > 0, true);
  line("library", c.eager.library, c.replay.library, true, true, true);
  line("runtime", c.eager.runtime, c.replay.runtime, c.eager.runtime > 0, true, true);
  if (device) {
    line("launch", c.eager.launch, c.replay.launch, true, true, false);
    line("queue", c.eager.queue, c.replay.queue, true, true, false);
    line("gpu", c.eager.gpu, c.replay.gpu, true, true, false);
    line("gpu idle", c.eager.gpu_idle, c.replay.gpu_idle, true, true, false);
  } else {
    out << pad("launch", 10) << "n/a on the CPU (queue, gpu too): the library row holds the compute\n";
  }
  char speed[64];
  std::snprintf(speed, sizeof speed, "   %.2fx", c.speedup());
  out << pad("wall", 10) << lpad(format_ns(c.eager.wall), 16) << lpad(format_ns(c.replay.wall), w2) << speed << "\n";
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%lld ops per replay, %zu rounds each; one-time: capture %s (K calls through the full stack), "
                "instantiate %s, first replay %s",
                static_cast<long long>(c.ops_per_replay), c.eager.rounds, format_ns(c.capture_ns).c_str(),
                format_ns(c.instantiate_ns).c_str(), format_ns(c.first_replay_ns).c_str());
  out << buf << "\n";
  out << "verdict: " << c.verdict() << "\n";
  if (!unresolved.empty()) {
    out << "note: " << marked_cells_note(unresolved, c.probe_ns) << "\n";
  }
  if (c.peer) print_peer_comparison(c, *c.peer, out);
}

}  // namespace strata::reports
