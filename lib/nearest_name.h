// The answer to a typo ("sliu", "trcae"): the nearest of the names that were allowed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace strata {

// The name in `names` nearest to `typed` when it is within two edits (insertions, deletions,
// substitutions, two neighbours swapped), the first of the nearest on a tie; "" when none is, and for
// nothing typed. What a usage error adds as "did you mean 'silu'?".
std::string nearest_name(std::string_view typed, const std::vector<std::string>& names);

}  // namespace strata
