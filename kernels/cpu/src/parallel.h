// Splitting one kernel's work across the Method's ThreadPool
// (kiln/runtime/thread_pool.h, KernelArgs::pool). Internal.
//
// The rules every kernel follows, so that any thread count gives the same
// bits as one thread and no thread needs memory of its own:
//   - tasks write disjoint outputs, and every output element is computed by
//     one task in the same order of operations as on one thread (a GEMM's
//     tiles keep their whole inner-dimension sum; nothing is reduced across
//     tasks);
//   - scratch the planner sized for one thread is shared, never split: a
//     phase that fills it (packing a block of B) runs as its own
//     parallel_for, each task filling whole panels, before the phase that
//     reads it; where the planner gave several blocks (grouped
//     convolutions: gemm_group_scratch_blocks), at most that many tasks run,
//     each on a block of its own;
//   - work below kParallelMinWork stays on the calling thread, where waking
//     the workers would cost more than it saves.
// Firmware (KILN_BARE_METAL) compiles every parallel_for to a plain loop.

#ifndef KILN_KERNELS_CPU_SRC_PARALLEL_H_
#define KILN_KERNELS_CPU_SRC_PARALLEL_H_

#include <stdint.h>

#include "kiln/runtime/thread_pool.h"

namespace kiln {
namespace kernels {

// About 2 to 4 microseconds of work on one core: multiply-adds for
// products, elements for element-wise passes (kParallelMinElements). A call
// to workers that are spinning costs about 0.3 microseconds (PosixThreadPool,
// two threads), so work of this size already gains from a second thread.
constexpr int64_t kParallelMinWork = int64_t{1} << 16;
constexpr int64_t kParallelMinElements = int64_t{1} << 14;

// The work below which kernels stay on one thread, when something asked
// for another than kParallelMinWork / kParallelMinElements: the
// environment variable KILN_PARALLEL_MIN_WORK (read once; 0 splits every
// kernel that can be split, however small: what the thread tests run
// with) or set_parallel_min_work(). -1 when nothing did (parallel.cc).
int64_t parallel_min_work_override();
// Sets it (-1 restores the defaults). Not while methods run.
void set_parallel_min_work(int64_t work);

// The threads `pool` runs tasks on, or 1 (no pool, or firmware).
inline int parallel_threads(const ThreadPool* pool) {
#if defined(KILN_BARE_METAL)
  static_cast<void>(pool);
  return 1;
#else
  return pool != nullptr ? pool->concurrency() : 1;
#endif
}

// f(i) for every i in [0, count), across `pool` when it has more than one
// thread. f is any callable taking int64_t; it lives on the caller's stack.
template <typename F>
void parallel_for(ThreadPool* pool, int64_t count, const F& f) {
#if !defined(KILN_BARE_METAL)
  if (count > 1 && pool != nullptr && pool->concurrency() > 1) {
    pool->parallel_for(
        count, [](void* context, int64_t i) { (*static_cast<const F*>(context))(i); },
        const_cast<void*>(static_cast<const void*>(&f)));
    return;
  }
#else
  static_cast<void>(pool);
#endif
  for (int64_t i = 0; i < count; ++i) f(i);
}

// How many tasks to cut `work` into: 1 below `min_work` or without threads,
// otherwise a few per thread (tasks are taken dynamically, so a slower
// thread takes fewer), and never more than `max_tasks`.
inline int64_t parallel_tasks(const ThreadPool* pool, int64_t work, int64_t max_tasks,
                              int64_t min_work = kParallelMinWork) {
  const int threads = parallel_threads(pool);
  if (threads <= 1 || max_tasks <= 1) return 1;
  const int64_t override_work = parallel_min_work_override();
  if (override_work >= 0) min_work = override_work;
  if (work < min_work) return 1;
  int64_t tasks = int64_t{4} * threads;
  if (min_work >= 4 && tasks > work / (min_work / 4)) tasks = work / (min_work / 4);  // each >= min_work / 4
  if (tasks > max_tasks) tasks = max_tasks;
  return tasks < 1 ? 1 : tasks;
}

// Task `task` of `tasks` over [0, count): [*begin, *end), the cut points
// multiples of `align` (so vector loops keep their alignment and tails).
inline void parallel_range(int64_t count, int64_t tasks, int64_t task, int64_t align, int64_t* begin, int64_t* end) {
  const int64_t units = (count + align - 1) / align;
  const int64_t b = units * task / tasks * align, e = units * (task + 1) / tasks * align;
  *begin = b < count ? b : count;
  *end = e < count ? e : count;
}

// The grid of `*a` ranges of one dimension by `*b` of another for `tasks`
// tasks (a * b >= tasks, a <= max_a, b <= max_b) where the tasks read
// least, each range of the first dimension reading `read_a` and each of
// the second `read_b` (a * read_a + b * read_b in all): for a product,
// column ranges each reading all its rows of A, by row ranges each reading
// all its columns of B. Leaves *a and *b as they are where no grid fits.
inline void least_read_grid(int64_t tasks, int64_t max_a, int64_t max_b, int64_t read_a, int64_t read_b, int64_t* a,
                            int64_t* b) {
  int64_t least = -1;
  for (int64_t i = 1; i <= tasks; ++i) {
    const int64_t j = (tasks + i - 1) / i;
    if (i > max_a || j > max_b) continue;
    const int64_t read = i * read_a + j * read_b;
    if (least < 0 || read < least) {
      least = read;
      *a = i;
      *b = j;
    }
  }
}

// f(begin, end) over [0, n) in ranges whose cut points are multiples of
// `align`, across `pool` (element-wise passes: kParallelMinElements).
template <typename F>
void parallel_for_ranges(ThreadPool* pool, int64_t n, int64_t align, const F& f) {
  const int64_t tasks = parallel_tasks(pool, n, n / align, kParallelMinElements);
  parallel_for(pool, tasks, [&](int64_t t) {
    int64_t b, e;
    parallel_range(n, tasks, t, align, &b, &e);
    if (e > b) f(b, e);
  });
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_PARALLEL_H_
