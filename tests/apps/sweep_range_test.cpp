// The ranges `strata sweep` accepts, and the ones it refuses with a message that says what would be right.
#include <doctest/doctest.h>

#include "apps/strata/sweep_range.h"
#include "lib/error.h"

using strata::app::parse_sweep_range;

TEST_CASE("START:END doubles from the start and always ends at the end") {
  const auto s = parse_sweep_range("16:1024");
  CHECK(s.values == std::vector<int64_t>{16, 32, 64, 128, 256, 512, 1024});
  CHECK(s.spec(0) == "16");
  CHECK(s.swept() == "size");
  CHECK(parse_sweep_range("100:1000").values == std::vector<int64_t>{100, 200, 400, 800, 1000});
}

TEST_CASE("lists are sorted and de-duplicated - k, M, G are binary") {
  CHECK(parse_sweep_range("1024,64,256,64").values == std::vector<int64_t>{64, 256, 1024});
  CHECK(parse_sweep_range("1k:4k").values == std::vector<int64_t>{1024, 2048, 4096});
  CHECK(parse_sweep_range("1M,1G").values == std::vector<int64_t>{1 << 20, 1 << 30});
}

TEST_CASE("one field of a multi-field spec, in brackets or braces") {
  const auto s = parse_sweep_range("32x768x[256:1024]");
  CHECK(s.values == std::vector<int64_t>{256, 512, 1024});
  CHECK(s.spec(1) == "32x768x512");
  CHECK(s.swept() == "n in 32x768xn");
  const auto mid = parse_sweep_range("32x{64,128}x256");
  CHECK(mid.spec(0) == "32x64x256");
  CHECK(mid.spec(1) == "32x128x256");
}

TEST_CASE("bad ranges are refused with the reason") {
  const std::pair<const char*, const char*> bad[] = {
      {"", "missing range"},
      {"1024", "is one size"},
      {"64:16", "ends at or below where it starts"},
      {"0:16", "contains 0"},
      {"16:abc", "'abc' is not a size"},
      {"-4:16", "'-4' is not a size"},
      {"16:64:2", "more than one ':'"},
      {"16:64,128", "mixes ':' and ','"},
      {"16,", "empty size"},
      {"64,64", "at least two"},
      {"32x768x256", "put the swept field"},
      {"32x[16:64", "unbalanced brackets"},
      {"32x[16:64}", "unbalanced brackets"},
      {"[16:32]x[1:2]", "more than one field"},
      {"32x7[1:2]", "whole field between 'x's"},
      {"1:3G", "too large"},
      {"1:9223372036854775807", "too large"},
  };
  for (const auto& c : bad) {
    const auto& text = c.first;
    const auto& why = c.second;
    CAPTURE(std::string(text));
    try {
      parse_sweep_range(text);
      FAIL("accepted");
    } catch (const strata::UsageError& e) {
      CHECK_MESSAGE(std::string(e.what()).find(why) != std::string::npos, std::string(e.what()));
    }
  }
}
