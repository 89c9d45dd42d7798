#include "lib/timeline.h"

namespace strata {

const char* layer_name(Layer layer) {
  switch (layer) {
    case Layer::kFrontend: return "frontend";
    case Layer::kPython: return "python";
    case Layer::kPybind11: return "pybind11";
    case Layer::kBinding: return "binding";
    case Layer::kDispatch: return "dispatch";
    case Layer::kLibrary: return "library";
    case Layer::kRuntime: return "runtime";
    case Layer::kHarness: return "harness";
  }
  return "?";
}

Timeline::Timeline(size_t reserve_spans) {
  host_clock::calibrate();
  spans_.reserve(reserve_spans);
}

int32_t Timeline::add_span(Layer layer, const char* name, uint64_t begin, uint64_t end, int32_t parent,
                           uint32_t op_id, ZoneKind kind) {
  spans_.push_back(Span{begin, end, parent, op_id, layer, kind, name});
  return static_cast<int32_t>(spans_.size() - 1);
}

}  // namespace strata
