#include "reports/model/comparison.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "reports/model/units.h"
#include "reports/model/figures.h"
#include "reports/model/report.h"

namespace strata::reports {
namespace {


}  // namespace

ModeFigures mode_figures(const std::string& label, const Timeline& timeline,
                         const std::vector<std::vector<uint32_t>>& rounds, const std::vector<double>& round_wall_ns,
                         int64_t k) {
  ModeFigures f;
  f.label = label;
  f.rounds = rounds.size();
  f.has_device = timeline.device.enabled;
  const double per = 1.0 / double(std::max<int64_t>(k, 1));
  std::vector<double> python, binding, dispatch, library, runtime, launch, queue, gpu, idle;
  // Op id -> round, for the device records.
  std::unordered_map<uint64_t, size_t> round_of;
  for (size_t r = 0; r < rounds.size(); ++r)
    for (uint32_t id : rounds[r]) round_of[id] = r;
  // One breakdown of every op of every round (a breakdown reads the whole timeline: one per round made
  // compare quadratic in rounds), then each round's totals from its calls' samples, which are per call in
  // the order of `all_ids`.
  std::vector<uint32_t> all_ids;
  for (const auto& ids : rounds) all_ids.insert(all_ids.end(), ids.begin(), ids.end());
  const LayerBreakdown b = compute_breakdown(timeline, all_ids);
  size_t first = 0;
  for (const auto& ids : rounds) {
    auto total = [&](RowKind kind) {
      double sum = 0;
      for (const BreakdownRow& row : b.rows)
        if (row.kind == kind)
          for (size_t i = first; i < first + ids.size() && i < row.ns.samples.size(); ++i) sum += row.ns.samples[i];
      return sum;
    };
    python.push_back((total(RowKind::kPython) + total(RowKind::kPybind11)) * per);
    binding.push_back(total(RowKind::kBinding) * per);
    dispatch.push_back(total(RowKind::kDispatch) * per);
    library.push_back(total(RowKind::kLibrary) * per);
    runtime.push_back(total(RowKind::kRuntime) * per);
    launch.push_back(total(RowKind::kLaunch) * per);
    queue.push_back(total(RowKind::kQueue) * per);
    gpu.push_back(total(RowKind::kGpu) * per);
    first += ids.size();
  }
  if (f.has_device) {
    std::unordered_map<uint32_t, uint64_t> corr_to_op;
    for (const ExternalCorrelation& e : timeline.device.external) corr_to_op[e.correlation_id] = e.external_id;
    std::vector<std::vector<std::pair<int64_t, int64_t>>> per_round(rounds.size());
    for (const KernelRecord& kr : timeline.device.kernels) {
      auto c = corr_to_op.find(kr.correlation_id);
      if (c == corr_to_op.end()) continue;
      auto r = round_of.find(c->second);
      if (r != round_of.end()) per_round[r->second].push_back({kr.start_ns, kr.end_ns});
    }
    for (auto& ks : per_round) {
      std::sort(ks.begin(), ks.end());
      double gaps = 0;
      int64_t reach = ks.empty() ? 0 : ks.front().second;
      for (size_t i = 1; i < ks.size(); ++i) {
        if (ks[i].first > reach) gaps += double(ks[i].first - reach);
        reach = std::max(reach, ks[i].second);
      }
      idle.push_back(gaps * per);
    }
  }
  f.python = median_of(python);
  f.binding = median_of(binding);
  f.dispatch = median_of(dispatch);
  f.library = median_of(library);
  f.runtime = median_of(runtime);
  f.launch = median_of(launch);
  f.queue = median_of(queue);
  f.gpu = median_of(gpu);
  f.gpu_idle = idle.empty() ? 0 : median_of(idle);
  std::vector<double> wall;
  for (double w : round_wall_ns) wall.push_back(w * per);
  Distribution d = Distribution::of(wall);
  f.wall = d.median;
  f.wall_p90 = d.p90;
  return f;
}

GraphAttribution attribute_graph_kernels(const DeviceTrace& device) {
  GraphAttribution a;
  std::unordered_map<uint64_t, const GraphNodeOrigin*> node_to_op;
  for (const GraphNodeOrigin& n : device.graph_nodes) node_to_op.emplace(n.graph_node_id, &n);  // first wins
  a.op_of_kernel.assign(device.kernels.size(), 0);
  for (size_t i = 0; i < device.kernels.size(); ++i) {
    const KernelRecord& k = device.kernels[i];
    if (k.graph_node_id == 0) continue;
    ++a.replayed_kernels;
    auto it = node_to_op.find(k.graph_node_id);
    if (it == node_to_op.end()) continue;
    a.op_of_kernel[i] = it->second->op_id;
    ++a.attributed;
    if (it->second->source == GraphNodeSource::kCaptureInfo) ++a.attributed_by_capture_info;
  }
  return a;
}

// One rule on both devices, as for a sequence (reports/model/sequence.cpp): compute-bound when the compute (the
// GPU's kernels, or on the CPU the library row) fills at least half of the eager wall. Everything else is
// overhead: the host rows AND the time that falls in no row (the interpreter between zones under
// --frontend python). Comparing the host rows alone with the wall called a call compute-bound whose
// library was 23% of its wall.
double Comparison::compute_share() const {
  const double compute = eager.has_device ? eager.gpu : eager.library;
  return share_of(compute, eager.wall);
}

std::string Comparison::bound() const { return compute_share() >= 0.5 ? "compute-bound" : "overhead-bound"; }

std::string Comparison::verdict() const {
  char buf[512];
  // Noise: the spread between median and p90 of the two walls. A difference inside it is no difference.
  const double noise = std::max(eager.wall_p90 - eager.wall, replay.wall_p90 - replay.wall);
  const double saved = eager.wall - replay.wall;
  const double compute = eager.has_device ? eager.gpu : eager.library;
  const double host = eager.host();
  auto pct = [&](double ns) { return share_of(100.0 * ns, eager.wall); };  // as 100 * ns / wall, to the bit
  std::snprintf(buf, sizeof buf, "%s: %s %s is %.1f%% of the %s eager wall per op; host overhead (%sbinding + dispatch%s) "
                "%.1f%%",
                bound().c_str(), eager.has_device ? "the GPU's" : "the library's", format_ns(compute).c_str(),
                100.0 * compute_share(), format_ns(eager.wall).c_str(), eager.python > 0 ? "python + pybind11 + " : "",
                eager.has_device ? " + runtime + launch" : "", pct(host));
  std::string bound_text = buf;
  // On the CPU the rows run one after another inside the wall, so what is left is time no zone covers.
  // (On a GPU the kernels overlap the host's issuing: there is no such remainder to speak of.)
  if (!eager.has_device) {
    std::snprintf(buf, sizeof buf, ", in no row %.1f%%", pct(std::max(0.0, eager.wall - compute - host)));
    bound_text += buf;
  }
  std::string effect;
  if (std::abs(saved) <= noise) {
    effect = replay.label + " makes no difference beyond noise (" + format_ns(saved) + " per op, noise " + format_ns(noise) + ")";
  } else {
    std::snprintf(buf, sizeof buf, "%s %s wall per op by %s (%.2fx)", replay.label.c_str(), saved > 0 ? "cuts" : "adds to",
                  format_ns(std::abs(saved)).c_str(), speedup());
    effect = buf;
  }
  return bound_text + "; " + effect;
}

}  // namespace strata::reports
