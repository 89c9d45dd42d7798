// The intra-op thread pool (Note [Intra-op threads] in parallel.h).
#include "lib/parallel.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lib/error.h"

namespace strata::parallel {
namespace {

thread_local bool t_in_region = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// About 50-100 us of pause instructions: long enough that a worker is still awake when the next kernel
// of a timed loop arrives, short enough that an idle pool leaves the cores to others.
constexpr int kSpinRounds = 4000;

struct Job {
  ChunkFn fn = nullptr;
  void* context = nullptr;
  int64_t begin = 0, end = 0, chunk = 0;
  int tasks = 0;
};

// Workers and the caller claim chunks from one 64-bit word: the job's generation in the high half, the
// next chunk's index in the low half. A worker that finished its last chunk of one job and comes back late
// cannot claim a chunk of the next job by mistake: its compare-and-swap names the generation it saw.
class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { worker_main(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    stop_flag_.store(true, std::memory_order_relaxed);
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  void run(const Job& job) {
    job_ = job;
    error_ = nullptr;
    remaining_.store(job.tasks, std::memory_order_relaxed);
    const uint32_t gen = ++generation_;
    {
      std::lock_guard<std::mutex> lock(m_);
      state_.store(uint64_t(gen) << 32, std::memory_order_release);
    }
    wake_.notify_all();
    run_tasks(gen);
    for (int i = 0; i < kSpinRounds && remaining_.load(std::memory_order_acquire) != 0; ++i) cpu_relax();
    if (remaining_.load(std::memory_order_acquire) != 0) {
      std::unique_lock<std::mutex> lock(m_);
      done_.wait(lock, [this] { return remaining_.load(std::memory_order_acquire) == 0; });
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  static uint32_t generation_of(uint64_t state) { return uint32_t(state >> 32); }

  void worker_main() {
    uint32_t seen = 0;
    for (;;) {
      for (int i = 0; i < kSpinRounds && generation_of(state_.load(std::memory_order_acquire)) == seen; ++i) {
        if (stop_flag_.load(std::memory_order_relaxed)) return;
        cpu_relax();
      }
      {
        std::unique_lock<std::mutex> lock(m_);
        wake_.wait(lock, [&] { return stop_ || generation_of(state_.load(std::memory_order_acquire)) != seen; });
        if (stop_) return;
      }
      seen = generation_of(state_.load(std::memory_order_acquire));
      run_tasks(seen);
    }
  }

  void run_tasks(uint32_t gen) {
    for (;;) {
      uint64_t s = state_.load(std::memory_order_acquire);
      int64_t index = 0;
      for (;;) {
        if (generation_of(s) != gen) return;
        index = int64_t(uint32_t(s));
        if (index >= job_.tasks) return;
        if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) break;
      }
      const Job job = job_;  // this job cannot end while its chunk `index` is unfinished
      const int64_t b = job.begin + index * job.chunk;
      const int64_t e = std::min(job.end, b + job.chunk);
      const bool outer = t_in_region;
      t_in_region = true;
      try {
        job.fn(job.context, b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_m_);
        if (!error_) error_ = std::current_exception();
      }
      t_in_region = outer;
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(m_);
        done_.notify_all();
      }
    }
  }

  std::vector<std::thread> threads_;
  std::mutex m_;
  std::condition_variable wake_, done_;
  bool stop_ = false;
  std::atomic<bool> stop_flag_{false};
  std::atomic<uint64_t> state_{0};
  uint32_t generation_ = 0;
  Job job_;
  std::atomic<int> remaining_{0};
  std::mutex error_m_;
  std::exception_ptr error_;
};

// Everything the setting and the pool are, in one object that a forked child abandons (its threads did
// not survive the fork, and a lock may have been held by one of them): the child makes a new one.
struct State {
  std::mutex busy;  // held by the one parallel_for that uses the pool
  std::unique_ptr<Pool> pool;
  int pool_workers = -1;
};

std::mutex g_setting_m;
std::atomic<int> g_threads{0};  // 0: not decided yet
std::string g_source;
std::atomic<State*> g_state{nullptr};

int cpus_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

void after_fork_in_child() {
  g_state.store(nullptr);  // leaked on purpose: its threads and locks belonged to the parent
}

State& state() {
  State* s = g_state.load(std::memory_order_acquire);
  if (s != nullptr) return *s;
  static std::once_flag atfork_once;
  std::call_once(atfork_once, [] { ::pthread_atfork(nullptr, nullptr, &after_fork_in_child); });
  auto fresh = std::make_unique<State>();
  State* expected = nullptr;
  if (g_state.compare_exchange_strong(expected, fresh.get())) return *fresh.release();
  return *expected;
}

int decide_threads() {
  std::lock_guard<std::mutex> lock(g_setting_m);
  if (const int n = g_threads.load(); n != 0) return n;
  int n = cpus_available();
  std::string source = "CPUs available";
  if (const char* env = std::getenv("STRATA_NUM_THREADS"); env != nullptr) {
    n = parse_num_threads(env, "STRATA_NUM_THREADS");
    source = "STRATA_NUM_THREADS";
  }
  n = std::min(n, kMaxThreads);
  g_source = source;
  g_threads.store(n);
  return n;
}

}  // namespace

int parse_num_threads(const std::string& text, const std::string& what) {
  const std::string allowed = "an integer from 1 to " + std::to_string(kMaxThreads);
  if (text.empty() || text.size() > 6 || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw UsageError(what + " '" + text + "' is not a thread count: it must be " + allowed);
  const int n = std::stoi(text);
  if (n < 1 || n > kMaxThreads) throw UsageError(what + " " + text + " is out of range: it must be " + allowed);
  return n;
}

int num_threads() {
  const int n = g_threads.load(std::memory_order_relaxed);
  return n != 0 ? n : decide_threads();
}

void set_num_threads(int n, const std::string& source) {
  if (n < 1 || n > kMaxThreads)
    throw UsageError("thread count " + std::to_string(n) + " is out of range: it must be an integer from 1 to " +
                     std::to_string(kMaxThreads));
  State& s = state();
  std::lock_guard<std::mutex> busy(s.busy);
  std::lock_guard<std::mutex> lock(g_setting_m);
  g_threads.store(n);
  g_source = source;
}

std::string num_threads_source() {
  num_threads();
  std::lock_guard<std::mutex> lock(g_setting_m);
  return g_source;
}

bool in_parallel_region() { return t_in_region; }

int threads_for(int64_t begin, int64_t end, int64_t grain) {
  const int64_t range = end - begin;
  if (range <= 0) return 1;
  const int threads = num_threads();
  if (threads == 1 || t_in_region || range <= grain) return 1;
  const int64_t chunks = (range + std::max<int64_t>(grain, 1) - 1) / std::max<int64_t>(grain, 1);
  return int(std::min<int64_t>(threads, chunks));
}

void run_chunks(int64_t begin, int64_t end, int64_t grain, ChunkFn fn, void* context) {
  const int tasks = threads_for(begin, end, grain);
  if (tasks <= 1) {
    fn(context, begin, end);
    return;
  }
  State& s = state();
  std::unique_lock<std::mutex> busy(s.busy, std::try_to_lock);
  if (!busy.owns_lock()) {  // another thread's kernel has the pool: this one runs on its own thread
    fn(context, begin, end);
    return;
  }
  const int workers = num_threads() - 1;
  if (s.pool_workers != workers) {
    s.pool.reset();
    s.pool = std::make_unique<Pool>(workers);
    s.pool_workers = workers;
  }
  Job job;
  job.fn = fn;
  job.context = context;
  job.begin = begin;
  job.end = end;
  job.chunk = (end - begin + tasks - 1) / tasks;
  job.tasks = int((end - begin + job.chunk - 1) / job.chunk);
  s.pool->run(job);
}

}  // namespace strata::parallel
