#include "reports/model/figures.h"

#include <algorithm>
#include <cstdint>

namespace strata::reports {

void Figures::set(const std::string& name, double value, const std::string& unit) {
  for (Figure& f : figures_) {
    if (f.name == name) {
      f.value = value;
      f.unit = unit;
      return;
    }
  }
  figures_.push_back({name, value, unit});
}

const Figure* Figures::find(std::string_view name) const {
  for (const Figure& f : figures_)
    if (f.name == name) return &f;
  return nullptr;
}

double Figures::value_or(std::string_view name, double fallback) const {
  const Figure* f = find(name);
  return f != nullptr ? f->value : fallback;
}

double share_of(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

void add_device_trace_figures(Figures& figures, const DeviceTrace& device) {
  figures.set("device_timing.enabled", device.enabled ? 1 : 0, "bool");
  figures.set("cupti.dropped_records", double(device.dropped_records), "count");
  figures.set("cupti.untimed_records", double(device.untimed_records), "count");
}

void add_steady_join_figures(Figures& figures, const LayerBreakdown& steady) {
  figures.set("steady.unmatched_launches", double(steady.unmatched_launches), "count");
  figures.set("steady.failed_launches", double(steady.failed_launches), "count");
  figures.set("steady.unmatched_kernels", double(steady.unmatched_kernels), "count");
  // The implicit copies (Note [Contiguous inputs]): how many per call, and their time when there are any.
  if (steady.calls > 0)
    figures.set("steady.implicit_copies_per_call", double(steady.implicit_copies) / double(steady.calls), "count");
  if (steady.implicit_copies > 0) figures.set("steady.implicit_copy_median_ns", steady.implicit_copy.median, "ns");
  for (const TimestampCheckField& f : kTimestampCheckFields)
    figures.set(std::string("steady.") + f.name, double(steady.timestamps.*f.count), "count");
}

void add_cold_call_figures(Figures& figures, const Timeline& timeline, uint32_t cold_op, double context_ns) {
  int64_t begin = INT64_MAX, end = INT64_MIN;
  double handles = 0, search = 0, malloc_ns = 0;
  int mallocs = 0;
  for (const Span& s : timeline.spans()) {
    if (s.op_id != cold_op) continue;
    const double d = double(timeline.end_ns(s) - timeline.begin_ns(s));
    begin = std::min(begin, timeline.begin_ns(s));
    end = std::max(end, timeline.end_ns(s));
    switch (s.kind) {
      case ZoneKind::kHandleCreation: handles += d; break;
      case ZoneKind::kAlgorithmSearch: search += d; break;
      case ZoneKind::kDeviceMalloc:
        malloc_ns += d;
        ++mallocs;
        break;
      case ZoneKind::kPlain: break;
    }
  }
  if (begin > end) return;
  double loading = 0;
  int loads = 0;
  for (const OverheadRecord& o : timeline.device.overhead) {
    if (o.kind != "module loading" && o.kind != "lazy function loading" && o.kind != "JIT compilation") continue;
    const int64_t b = std::max(o.start_ns, begin), e = std::min(o.end_ns, end);
    if (e > b) {
      loading += double(e - b);
      ++loads;
    }
  }
  figures.set("cold.host_ns", double(end - begin), "ns");
  figures.set("cold.handle_creation_ns", handles, "ns");
  figures.set("cold.module_loading_ns", loading, "ns");
  figures.set("cold.module_loads", loads, "count");
  figures.set("cold.algorithm_search_ns", search, "ns");
  figures.set("cold.cuda_malloc_ns", malloc_ns, "ns");
  figures.set("cold.cuda_mallocs", mallocs, "count");
  figures.set("cold.context_creation_ns", context_ns, "ns");
}

}  // namespace strata::reports
