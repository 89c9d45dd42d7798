#include "lib/nearest_name.h"

#include <algorithm>
#include <cstddef>

namespace strata {
namespace {

// Edits from a to b: insertions, deletions, substitutions and swaps of two neighbours (the optimal
// string alignment distance), so that "sliu" is one edit from "silu" and two from "slice".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string nearest_name(std::string_view typed, const std::vector<std::string>& names) {
  std::string nearest;
  if (typed.empty()) return nearest;  // nothing typed is no typo: every short name is within two edits of it
  size_t best = 3;  // suggest only within two edits
  for (const std::string& name : names) {
    if (const size_t d = edit_distance(typed, name); d < best) {
      best = d;
      nearest = name;
    }
  }
  return nearest;
}

}  // namespace strata
