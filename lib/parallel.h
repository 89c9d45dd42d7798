// The intra-op thread pool: one CPU kernel call split across threads, as ATen's at::parallel_for splits it.
//
// Note [Intra-op threads]
// ~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch's eager CPU kernels run on an intra-op pool (torch.get_num_threads(): one thread per core by
// default); a kernel that ran on one thread beside them would make every CPU figure strata prints a
// single-thread figure, and its eager-vs-compiled speedups those of one thread against many. So strata's
// CPU loops, reductions, copies and the compiled path's generated kernels split their work here:
//  - parallel_for(begin, end, grain, f) calls f(b, e) on disjoint chunks covering [begin, end). A range of
//    at most `grain` elements, a pool of one thread, or a call made from inside a chunk runs inline on the
//    calling thread, as at::parallel_for does (its grain is at::internal::GRAIN_SIZE, 32768, kGrainSize
//    here): below that, waking a thread costs more than the work.
//  - The pool persists between calls (threads - 1 workers; the caller runs a chunk too), so a call pays
//    a wake-up, not a thread creation. Workers spin briefly before sleeping, as OpenMP's do, because the
//    next kernel usually follows within microseconds.
//  - One parallel_for at a time uses the pool; a second thread calling meanwhile (two Python threads)
//    runs its range inline: the same result, on fewer threads.
//  - Chunks are contiguous and as equal as the range allows; a kernel whose result depends on how the
//    range is split (a sum) splits into fixed blocks of its own instead (Note [Sums that do not depend on
//    the thread count] in layers/kernels/cpu/reduce.cpp).
// The thread count is a setting: set_num_threads (`strata --threads N`, strata.set_num_threads), else the
// environment variable STRATA_NUM_THREADS, else the number of CPUs this process may run on. Reports say
// how many threads a call used in its library row and the count in their header.
#pragma once

#include <cstdint>
#include <string>

namespace strata::parallel {

inline constexpr int64_t kGrainSize = 32768;
inline constexpr int kMaxThreads = 256;

// The intra-op thread count (at least 1). The first call reads STRATA_NUM_THREADS; a value that is not an
// integer in [1, kMaxThreads] throws UsageError naming the variable, so the front ends call this early.
int num_threads();
// Throws UsageError for n outside [1, kMaxThreads]. Waits for a parallel_for in progress to finish.
// `source` names the setting for reports ("--threads", "strata.set_num_threads").
void set_num_threads(int n, const std::string& source);
// Where the current count came from: `source` above, "STRATA_NUM_THREADS" or "CPUs available" (the default).
std::string num_threads_source();
// Parses a thread count as typed by a user ("4"); throws UsageError naming `what` otherwise.
int parse_num_threads(const std::string& text, const std::string& what);

// True inside a chunk run by parallel_for (on a worker or on the calling thread).
bool in_parallel_region();

// How many chunks parallel_for(begin, end, grain, ...) would run: the threads the call uses.
int threads_for(int64_t begin, int64_t end, int64_t grain);

using ChunkFn = void (*)(void* context, int64_t begin, int64_t end);
void run_chunks(int64_t begin, int64_t end, int64_t grain, ChunkFn fn, void* context);

// f(begin, end) over disjoint chunks of [begin, end); an exception from a chunk is rethrown here once
// every chunk has finished.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (end <= begin) return;
  run_chunks(begin, end, grain,
             [](void* context, int64_t b, int64_t e) { (*static_cast<const F*>(context))(b, e); },
             const_cast<void*>(static_cast<const void*>(&f)));
}

}  // namespace strata::parallel
