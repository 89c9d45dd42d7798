// Zones: the host timers at every layer boundary (Tracy's ScopedZone is the model).
//
//   STRATA_ZONE(zone, Layer::kLibrary, "cblas_sgemm");
//
// With STRATA_TRACING=OFF at configure time a Zone is an empty object and every call on it is an empty
// inline function: nothing is left in the binary. With tracing compiled in but no active timeline on this
// thread, a zone costs one load and one predictable branch. bench/overhead_bench measures both.
#pragma once

#include <string_view>

#include "lib/timeline.h"

namespace strata {

#if STRATA_TRACING
class Zone {
 public:
  Zone(Layer layer, const char* name, ZoneKind kind = ZoneKind::kPlain) : timeline_(tracing::active()) {
    if (timeline_ != nullptr) [[unlikely]]
      index_ = timeline_->open(layer, name, kind);
  }
  ~Zone() {
    if (timeline_ != nullptr) [[unlikely]]
      timeline_->close(index_);
  }
  // For zones whose name is known only after they opened (the dispatcher learns the key after
  // computing the key set, and that work belongs to the key's row).
  void rename(const char* name) noexcept {
    if (timeline_ != nullptr) timeline_->rename(index_, name);
  }
  Zone(const Zone&) = delete;
  Zone& operator=(const Zone&) = delete;

 private:
  Timeline* timeline_;
  int32_t index_ = -1;
};
#else
class Zone {
 public:
  Zone(Layer, const char*, ZoneKind = ZoneKind::kPlain) noexcept {}
  void rename(const char*) noexcept {}
};
#endif

// Note [Zone names made at run time]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A span keeps its zone's name as a plain pointer (zones never allocate), and reports read it after the
// run: `strata trace` when the run is over, strata.profile() whenever p.table() is called. A name built at
// run time (a fused kernel's "k0 (generated loop)") owned by what it names dangles once that is gone: a
// compiled function dropped inside a `with strata.profile()` block, read afterwards, read freed memory
// (ASan: heap-use-after-free in compute_breakdown). Such names are interned instead: one copy per
// distinct text for the life of the process, never freed. There is one per fused kernel compiled, so the
// pool stays small. Returns a pointer valid until the process exits; thread-safe.
const char* intern_zone_name(std::string_view text);

// What a call ran, in its zone's name: `base` ("tanh (cpu loop)") with ", <what>, N threads)" in place of
// its closing parenthesis ("tanh (cpu loop, SLEEF AVX-512, 2 threads)"; no `what` when it is null).
// Interned once per (base, what, threads); `base` and `what` must outlive the process (literals, interned
// names), since they key a per-thread cache that makes a repeated call one small map lookup.
const char* zone_name_with_threads(const char* base, const char* what, int threads);

// The measured cost of one zone (open + close) into an active timeline on this machine, in ns: the best
// of three rounds of 20000. What `strata trace` and strata.profile() call a probe's cost.
double measure_zone_cost_ns();

}  // namespace strata

#define STRATA_ZONE(var, layer, name) ::strata::Zone var((layer), (name))
// A zone of one-time work the cold-call figures count (lib/timeline.h, ZoneKind).
#define STRATA_ZONE_KIND(var, layer, name, kind) ::strata::Zone var((layer), (name), (kind))
