// The sizes of `strata sweep`, from what the user typed (docs/sweep.md):
//   16:4096            powers of two times the start: 16, 32, ..., 4096 (the end is included even when
//                      the doubling steps over it)
//   64,256,1024        exactly these (sorted, duplicates dropped)
//   1k:64M             k, M, G suffixes are binary (1k = 1024), as sizes of tensors usually are
//   32x768x[256:8192]  one dimension of a multi-dimensional spec swept; {256:8192} is accepted too, but a
//                      shell expands braces unless the argument is quoted
// Everything is checked before anything runs; mistakes throw UsageError (exit 2) saying what would be right.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::app {

struct SweepSizes {
  std::string prefix, suffix;    // the spec around the swept field ("32x768x", "")
  std::vector<int64_t> values;   // ascending, at least two
  std::string spec(size_t i) const { return prefix + std::to_string(values[i]) + suffix; }
  // How the swept dimension is named in words: "size" alone, or "n in 32x768xn".
  std::string swept() const { return prefix.empty() && suffix.empty() ? "size" : "n in " + prefix + "n" + suffix; }
};

SweepSizes parse_sweep_range(std::string_view text);

// The syntax, for --help and error messages.
std::string sweep_range_help();

}  // namespace strata::app
