// Role: format (shared by the JSON views, private to reports: nlohmann/json is not in its public interface).
// Named figures in the JSON as every report carries them (Note [Figures, not prose] in figures.h):
// {"cupti.dropped_records": {"value": 0, "unit": "count"}, ...}.
#pragma once

#include <nlohmann/json.hpp>

#include "reports/model/figures.h"

namespace strata::reports {

inline nlohmann::json figures_json(const Figures& figures) {
  nlohmann::json out = nlohmann::json::object();
  for (const Figure& figure : figures.all()) out[figure.name] = {{"value", figure.value}, {"unit", figure.unit}};
  return out;
}

}  // namespace strata::reports
