#include "lib/zone.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_set>

#include "lib/host_clock.h"

namespace strata {

const char* intern_zone_name(std::string_view text) {
  // Never destroyed: a span read during static destruction still finds its name (Note [Zone names made
  // at run time]). Nodes of an unordered_set do not move, so the pointers stay valid as it grows.
  static auto* pool = new std::unordered_set<std::string>();
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  return pool->emplace(text).first->c_str();
}

const char* zone_name_with_threads(const char* base, const char* what, int threads) {
  thread_local std::map<std::tuple<const char*, const char*, int>, const char*> t_names;
  const auto key = std::make_tuple(base, what, threads);
  if (auto it = t_names.find(key); it != t_names.end()) return it->second;
  std::string text = base;
  if (!text.empty() && text.back() == ')') text.pop_back();
  if (what != nullptr) text += std::string(", ") + what;
  text += ", " + std::to_string(threads) + (threads == 1 ? " thread)" : " threads)");
  const char* name = intern_zone_name(text);
  t_names.emplace(key, name);
  return name;
}

double measure_zone_cost_ns() {
  constexpr int kZones = 20000;
  double best = 1e9;
  for (int round = 0; round < 3; ++round) {
    Timeline t(kZones + 16);
    tracing::ActiveScope scope(&t);
    const uint64_t t0 = host_clock::ticks();
    for (int i = 0; i < kZones; ++i) {
      STRATA_ZONE(zone, Layer::kHarness, "probe");
    }
    const uint64_t t1 = host_clock::ticks();
    best = std::min(best, double(host_clock::ticks_to_ns(t1) - host_clock::ticks_to_ns(t0)) / kZones);
  }
  return best;
}

}  // namespace strata
