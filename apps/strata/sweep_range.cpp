#include "apps/strata/sweep_range.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

#include "layers/frontend/frontend.h"
#include "lib/error.h"

namespace strata::app {
namespace {

constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();  // the BLAS index limit, as trace
constexpr size_t kMaxSizes = 64;

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

int64_t parse_size(std::string_view field, std::string_view whole) {
  if (field.empty()) throw UsageError("range " + quoted(whole) + " has an empty size; " + sweep_range_help());
  const int64_t scale = frontend::size_suffix_scale(field.back());
  std::string_view digits = scale == 1 ? field : field.substr(0, field.size() - 1);
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec == std::errc::invalid_argument || ptr != digits.data() + digits.size() || digits[0] == '-' ||
      digits[0] == '+') {
    throw UsageError("range " + quoted(whole) + ": " + quoted(field) +
                     " is not a size (a whole number, optionally with k, M or G); " + sweep_range_help());
  }
  if (ec == std::errc::result_out_of_range || value > kMaxSize / scale) {
    throw UsageError("range " + quoted(whole) + ": " + quoted(field) + " is too large: each size must be at most " +
                     std::to_string(kMaxSize) + " (the BLAS index limit)");
  }
  if (value == 0) throw UsageError("range " + quoted(whole) + " contains 0: every size must be at least 1");
  return value * scale;
}

std::vector<int64_t> parse_values(std::string_view range, std::string_view whole) {
  std::vector<int64_t> values;
  const size_t colon = range.find(':');
  if (colon != std::string_view::npos) {
    if (range.find(',') != std::string_view::npos) {
      throw UsageError("range " + quoted(whole) + " mixes ':' and ','; " + sweep_range_help());
    }
    if (range.find(':', colon + 1) != std::string_view::npos) {
      throw UsageError("range " + quoted(whole) + " has more than one ':'; " + sweep_range_help());
    }
    const int64_t from = parse_size(range.substr(0, colon), whole), to = parse_size(range.substr(colon + 1), whole);
    if (to <= from) {
      throw UsageError("range " + quoted(whole) + " ends at or below where it starts: write START:END with END > START, "
                       "e.g. 16:4096");
    }
    for (int64_t v = from; v <= to && values.size() <= kMaxSizes; v *= 2) values.push_back(v);
    if (values.back() != to) values.push_back(to);
  } else {
    size_t start = 0;
    while (true) {
      const size_t comma = range.find(',', start);
      values.push_back(parse_size(range.substr(start, comma == std::string_view::npos ? comma : comma - start), whole));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
  }
  if (values.size() > kMaxSizes) {
    throw UsageError("range " + quoted(whole) + " has more than " + std::to_string(kMaxSizes) + " sizes");
  }
  if (values.size() < 2) {
    throw UsageError("range " + quoted(whole) + " gives one size: a sweep needs at least two (for one size, use "
                     "strata trace)");
  }
  return values;
}

// "32x768x256", "32x768x256:512": sizes joined by 'x' (a digit on both sides), not a stray 'x' ("16:x").
bool looks_multi_field(std::string_view text) {
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    if (text[i] == 'x' && std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(text[i + 1])))
      return true;
  }
  return false;
}

}  // namespace

std::string sweep_range_help() {
  return "a range is START:END (powers of two times START, e.g. 16:4096), a list (64,256,1024), k/M/G suffixes "
         "(1k:64M), or one field of a longer spec in brackets (32x768x[256:8192])";
}

SweepSizes parse_sweep_range(std::string_view text) {
  SweepSizes s;
  if (text.empty()) throw UsageError("missing range; " + sweep_range_help());
  const size_t open = text.find_first_of("[{");
  const size_t close = text.find_first_of("]}");
  std::string_view range = text;
  if (open != std::string_view::npos || close != std::string_view::npos) {
    const char want = (open != std::string_view::npos && text[open] == '[') ? ']' : '}';
    if (open == std::string_view::npos || close == std::string_view::npos || close < open || text[close] != want) {
      throw UsageError("range " + quoted(text) + " has unbalanced brackets; " + sweep_range_help());
    }
    if (text.find_first_of("[{", open + 1) != std::string_view::npos ||
        text.find_first_of("]}", close + 1) != std::string_view::npos) {
      throw UsageError("range " + quoted(text) + " sweeps more than one field: strata sweeps one dimension at a time");
    }
    s.prefix = std::string(text.substr(0, open));
    s.suffix = std::string(text.substr(close + 1));
    range = text.substr(open + 1, close - open - 1);
    if ((!s.prefix.empty() && s.prefix.back() != 'x') || (!s.suffix.empty() && s.suffix.front() != 'x')) {
      throw UsageError("range " + quoted(text) + ": the bracketed field must be a whole field between 'x's, e.g. "
                       "32x768x[256:8192]");
    }
  } else if (looks_multi_field(text)) {
    throw UsageError("range " + quoted(text) + ": put the swept field of a multi-dimensional spec in brackets, e.g. "
                     "32x768x[256:8192]");
  } else if (text.find_first_of(":,") == std::string_view::npos) {
    throw UsageError("range " + quoted(text) + " is one size: a sweep needs a range; " + sweep_range_help());
  }
  s.values = parse_values(range, text);
  return s;
}

}  // namespace strata::app
