#include "lib/timeline.h"

#include <algorithm>

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

namespace detail {

void prefault(void* p, size_t bytes) {
  // 64 MiB: tens of milliseconds of memset between two checks, and few enough checks to cost nothing.
  constexpr size_t kChunk = size_t(64) << 20;
  auto* bytes_at = static_cast<unsigned char*>(p);
  for (size_t done = 0; done < bytes; done += kChunk) {
    if (done != 0 && t_prefault_check != nullptr) t_prefault_check();
    std::memset(bytes_at + done, 0, std::min(kChunk, bytes - done));
  }
}

}  // namespace detail

void Timeline::reserve_more(size_t spans, void (*between_chunks)()) {
  struct Restore {
    void (*saved)();
    ~Restore() { detail::t_prefault_check = saved; }
  } restore{detail::t_prefault_check};
  detail::t_prefault_check = between_chunks;
  spans_.reserve(spans_.size() + spans);
}

int32_t Timeline::add_span(Layer layer, const char* name, uint64_t begin, uint64_t end, int32_t parent,
                           uint32_t op_id, ZoneKind kind) {
  spans_.push_back(Span{begin, end, parent, op_id, layer, kind, name});
  return static_cast<int32_t>(spans_.size() - 1);
}

}  // namespace strata
