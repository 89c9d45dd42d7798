#include "lib/timeline.h"

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "lib/host_clock.h"
#include "lib/zone.h"

using namespace strata;

TEST_CASE("the host clock is monotonic and its tick conversion preserves order") {
  host_clock::calibrate();
  const auto info = host_clock::info();
  CHECK((info.source == "tsc" || info.source == "steady_clock"));
  CHECK(info.ns_per_tick > 0);
  CHECK(info.read_cost_ns > 0);
  uint64_t previous_ticks = host_clock::ticks();
  int64_t previous_ns = host_clock::ticks_to_ns(previous_ticks);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t t = host_clock::ticks();
    const int64_t ns = host_clock::ticks_to_ns(t);
    REQUIRE(t >= previous_ticks);
    REQUIRE(ns >= previous_ns);
    previous_ticks = t;
    previous_ns = ns;
  }
}

TEST_CASE("zones nest: parents, op ids and names are recorded as the code ran") {
  Timeline timeline;
  {
    tracing::ActiveScope scope(&timeline);
    timeline.set_op(7);
    STRATA_ZONE(outer, Layer::kBinding, "outer");
    {
      STRATA_ZONE(inner, Layer::kDispatch, "keys");
      inner.rename("CPU");
      STRATA_ZONE(leaf, Layer::kLibrary, "leaf");
    }
    STRATA_ZONE(sibling, Layer::kLibrary, "sibling");
  }
  const auto& s = timeline.spans();
#if STRATA_TRACING
  REQUIRE(s.size() == 4);
  CHECK(std::string(s[0].name) == "outer");
  CHECK(s[0].parent == -1);
  CHECK(std::string(s[1].name) == "CPU");  // renamed after it opened
  CHECK(s[1].parent == 0);
  CHECK(s[2].parent == 1);
  CHECK(s[3].parent == 0);  // the sibling's parent is outer again: close() restored the current span
  for (const Span& span : s) {
    CHECK(span.op_id == 7);
    CHECK(span.end >= span.begin);
  }
  CHECK(s[0].begin <= s[1].begin);
  CHECK(s[1].end <= s[0].end);
  CHECK(s[2].end <= s[1].end);
#else
  CHECK(s.empty());
#endif
}

TEST_CASE("zones record nothing without an active timeline, and ActiveScope restores the previous one") {
  Timeline a, b;
  { STRATA_ZONE(z, Layer::kLibrary, "nowhere"); }
  CHECK(tracing::active() == nullptr);
  {
    tracing::ActiveScope sa(&a);
    {
      tracing::ActiveScope sb(&b);
      CHECK(tracing::active() == &b);
      STRATA_ZONE(z, Layer::kLibrary, "in b");
    }
    CHECK(tracing::active() == &a);
  }
  CHECK(tracing::active() == nullptr);
  CHECK(a.spans().empty());
#if STRATA_TRACING
  CHECK(b.spans().size() == 1);
#endif
}

TEST_CASE("add_span appends finished spans with the given values") {
  Timeline t;
  const int32_t root = t.add_span(Layer::kBinding, "b", 100, 200, -1, 3);
  const int32_t child = t.add_span(Layer::kLibrary, "l", 120, 180, root, 3);
  CHECK(root == 0);
  CHECK(child == 1);
  CHECK(t.spans()[1].parent == 0);
  CHECK(t.spans()[1].begin == 120);
  CHECK(t.spans()[1].end == 180);
  CHECK(std::string(layer_name(t.spans()[1].layer)) == "library");
}

TEST_CASE("layer names") {
  CHECK(std::string(layer_name(Layer::kFrontend)) == "frontend");
  CHECK(std::string(layer_name(Layer::kPython)) == "python");
  CHECK(std::string(layer_name(Layer::kPybind11)) == "pybind11");
  CHECK(std::string(layer_name(Layer::kBinding)) == "binding");
  CHECK(std::string(layer_name(Layer::kDispatch)) == "dispatch");
  CHECK(std::string(layer_name(Layer::kLibrary)) == "library");
  CHECK(std::string(layer_name(Layer::kRuntime)) == "runtime");
  CHECK(std::string(layer_name(Layer::kHarness)) == "harness");
}

TEST_CASE("annotations go into the active timeline with the current op, and nowhere when tracing is off") {
  tracing::annotate(AnnotationKind::kPlan, "lost: no active timeline");
  Timeline t;
  {
    tracing::ActiveScope scope(&t);
    t.set_op(7);
    tracing::annotate(AnnotationKind::kPlan, "conv2d: algorithm X");
    t.set_op(0);
  }
  tracing::annotate(AnnotationKind::kPlan, "lost too");
  REQUIRE(t.annotations().size() == 1);
  CHECK(t.annotations()[0].kind == AnnotationKind::kPlan);
  CHECK(t.annotations()[0].op_id == 7);
  CHECK(t.annotations()[0].text == "conv2d: algorithm X");
}

TEST_CASE("a span keeps the zone kind its layer gave it") {
  Timeline t;
  {
    tracing::ActiveScope scope(&t);
    STRATA_ZONE_KIND(zone, Layer::kLibrary, "someCreate", ZoneKind::kHandleCreation);
    STRATA_ZONE(plain, Layer::kLibrary, "work");
  }
#if STRATA_TRACING
  REQUIRE(t.spans().size() == 2);
  CHECK(t.spans()[0].kind == ZoneKind::kHandleCreation);
  CHECK(t.spans()[1].kind == ZoneKind::kPlain);
#endif
}

TEST_CASE("close_at: two spans closed with one reading end together, and the parent is current again") {
  Timeline t;
  const int32_t outer = t.open(Layer::kPython, "strata.matmul");
  const int32_t inner = t.open(Layer::kPybind11, "_strata.call");
  const uint64_t end = host_clock::ticks();
  t.close_at(inner, end);
  t.close_at(outer, end);
  CHECK(t.spans()[size_t(inner)].parent == outer);
  CHECK(t.spans()[size_t(inner)].end == end);
  CHECK(t.spans()[size_t(outer)].end == end);
  CHECK(t.spans()[size_t(outer)].begin <= t.spans()[size_t(inner)].begin);
  const int32_t next = t.open(Layer::kPython, "strata.relu");
  CHECK(t.spans()[size_t(next)].parent == -1);  // the stack unwound to the root
}

// Note [Interruptible pre-faulting]: a reservation with a check runs it between chunks of pages, and a
// check that throws leaves the timeline as it was (the half-touched block freed, not kept).
TEST_CASE("reserve_more runs its check between chunks of pages, and a throwing check changes nothing") {
  Timeline t(16);
  t.add_span(Layer::kBinding, "kept", 1, 2, -1, 1);
  const size_t capacity = t.spans().capacity();
  static int checks = 0;
  checks = 0;
  // 8M spans of 40 bytes: 320 MB, five 64 MiB chunks, so at least four checks.
  t.reserve_more(size_t(8) << 20, [] { ++checks; });
  CHECK(checks >= 4);
  CHECK(t.spans().capacity() >= (size_t(8) << 20));
  Timeline u(16);
  u.add_span(Layer::kBinding, "kept", 1, 2, -1, 1);
  checks = 0;
  CHECK_THROWS_AS(u.reserve_more(size_t(8) << 20,
                                 [] {
                                   if (++checks == 2) throw std::runtime_error("stop");
                                 }),
                  std::runtime_error);
  CHECK(checks == 2);  // stopped at the second check: no page after it was touched
  CHECK(u.spans().capacity() == capacity);
  REQUIRE(u.spans().size() == 1);
  CHECK(std::string(u.spans()[0].name) == "kept");
  // A later reservation without a check runs none (the check was only for the call that gave it).
  checks = 0;
  u.reserve_more(size_t(4) << 20);
  CHECK(checks == 0);
}
