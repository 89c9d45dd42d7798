// The intra-op pool (lib/parallel.h): every element of a range is visited once, whatever the thread
// count; small ranges, one thread and nested calls run inline; a chunk's exception reaches the caller;
// several threads calling at once each get their whole range done; bad counts are refused.
#include "lib/parallel.h"

#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "lib/error.h"

using namespace strata;

namespace {

// Restores the thread count a test changed.
struct ThreadsGuard {
  int saved = parallel::num_threads();
  ~ThreadsGuard() { parallel::set_num_threads(saved, "test"); }
};

}  // namespace

TEST_CASE("parallel_for visits every index exactly once for every thread count and range") {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3, 4, 7}) {
    parallel::set_num_threads(threads, "test");
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(100), parallel::kGrainSize, parallel::kGrainSize + 1,
                      int64_t(5 * parallel::kGrainSize + 17)}) {
      CAPTURE(threads);
      CAPTURE(n);
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      parallel::parallel_for(0, n, parallel::kGrainSize, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
      });
      int64_t wrong = 0;
      for (auto& s : seen) wrong += s.load() != 1;
      CHECK(wrong == 0);
      const int expected = n <= parallel::kGrainSize || threads == 1
                               ? 1
                               : int(std::min<int64_t>(threads, (n + parallel::kGrainSize - 1) / parallel::kGrainSize));
      CHECK(parallel::threads_for(0, n, parallel::kGrainSize) == expected);
    }
  }
}

TEST_CASE("a chunk runs inline below the grain, on one thread, and inside another chunk") {
  ThreadsGuard guard;
  parallel::set_num_threads(4, "test");
  const auto caller = std::this_thread::get_id();
  bool other_thread = false;
  parallel::parallel_for(0, 1000, 1000, [&](int64_t, int64_t) { other_thread |= std::this_thread::get_id() != caller; });
  CHECK_FALSE(other_thread);
  CHECK(parallel::threads_for(0, 1000, 1000) == 1);

  std::atomic<int> nested_threads{0};
  parallel::parallel_for(0, 4, 1, [&](int64_t, int64_t) {
    CHECK(parallel::in_parallel_region());
    nested_threads.fetch_add(parallel::threads_for(0, 1 << 20, 1));  // nested: inline
  });
  CHECK(nested_threads.load() == 4);
  CHECK_FALSE(parallel::in_parallel_region());

  parallel::set_num_threads(1, "test");
  CHECK(parallel::threads_for(0, 1 << 24, 1) == 1);
}

TEST_CASE("an exception in a chunk reaches the caller after every chunk ran, and the pool still works") {
  ThreadsGuard guard;
  parallel::set_num_threads(3, "test");
  std::atomic<int> ran{0};
  CHECK_THROWS_AS(parallel::parallel_for(0, 3, 1,
                                         [&](int64_t b, int64_t) {
                                           ran.fetch_add(1);
                                           if (b == 1) throw std::runtime_error("chunk 1");
                                         }),
                  std::runtime_error);
  CHECK(ran.load() == 3);
  std::atomic<int64_t> total{0};
  parallel::parallel_for(0, 3000, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  CHECK(total.load() == 3000);
}

TEST_CASE("several threads calling parallel_for at once each get their whole range") {
  ThreadsGuard guard;
  parallel::set_num_threads(2, "test");
  constexpr int kCallers = 4, kRounds = 200;
  std::vector<int64_t> sums(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRounds; ++r) {
        std::atomic<int64_t> s{0};
        parallel::parallel_for(0, 100000, 1000, [&](int64_t b, int64_t e) {
          int64_t local = 0;
          for (int64_t i = b; i < e; ++i) local += i;
          s.fetch_add(local);
        });
        sums[static_cast<size_t>(c)] += s.load();
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int64_t s : sums) CHECK(s == int64_t(kRounds) * (int64_t(100000) * 99999 / 2));
}

TEST_CASE("a thread count that is not 1 to 256 is refused with a usage error") {
  ThreadsGuard guard;
  for (const char* bad : {"0", "-1", "257", "99999999999999999999", "", "two", "2x", " 2", "1.5"}) {
    CAPTURE(std::string(bad));
    CHECK_THROWS_AS(parallel::parse_num_threads(bad, "--threads"), UsageError);
  }
  CHECK(parallel::parse_num_threads("256", "--threads") == 256);
  CHECK(parallel::parse_num_threads("1", "--threads") == 1);
  CHECK_THROWS_AS(parallel::set_num_threads(0, "test"), UsageError);
  CHECK_THROWS_AS(parallel::set_num_threads(parallel::kMaxThreads + 1, "test"), UsageError);
  parallel::set_num_threads(3, "strata.set_num_threads");
  CHECK(parallel::num_threads() == 3);
  CHECK(parallel::num_threads_source() == "strata.set_num_threads");
}
