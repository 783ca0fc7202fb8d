// PosixThreadPool (kiln/runtime/posix_thread_pool.h): every index runs
// exactly once per call on 1 to 4 threads, over many calls in a row (the
// generation hand-off), when a call follows one of fewer tasks (a late
// worker of the one before claims nothing of it) and after the workers went
// to sleep; a task calling parallel_for runs its tasks inline; two threads
// calling at once both finish; start() refuses bad counts; snapshot() shows
// the workers; each thread runs its own share of a small call first. Run
// under ThreadSanitizer too (the tsan preset), where a
// missing happens-before edge would show; the protocol under stress is
// thread_pool_stress_test.cc.

#include "kiln/runtime/posix_thread_pool.h"

#include <gtest/gtest.h>

#include <stdio.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::testing {
namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  explicit Counts(size_t n) : hits(n) {}
};

void count_task(void* context, int64_t i) { static_cast<Counts*>(context)->hits[static_cast<size_t>(i)]++; }

TEST(PosixThreadPoolTest, EveryIndexOnceOnOneToFourThreads) {
  for (int threads = 1; threads <= 4; ++threads) {
    PosixThreadPool pool;
    ASSERT_EQ(pool.start(threads), Error::kOk);
    EXPECT_EQ(pool.concurrency(), threads);
    for (int64_t count : {0, 1, 2, 3, 7, 64, 1000}) {
      for (int call = 0; call < 60; ++call) {
        Counts counts(static_cast<size_t>(count));
        pool.parallel_for(count, count_task, &counts);
        for (int64_t i = 0; i < count; ++i) {
          ASSERT_EQ(counts.hits[static_cast<size_t>(i)].load(), 1)
              << threads << " threads, " << count << " tasks, call " << call << ", index " << i;
        }
      }
    }
  }
}

// Calls of two tasks followed by calls of 3 to 31, again and again, tasks
// that only count: a worker still in the loop of the call before, holding
// its last ticket (index 2, nothing left), must not claim index 2 of the
// next call, which the next call's threads run too (and count twice: the
// caller then returns early, and a later call waits for ever). Nothing is
// checked between calls, so that the next call follows as closely as an
// inference's kernels do; each index's runs are compared with the calls
// that had it at the end. The calls run on a thread of their own, so that a
// pool that loses count fails the test instead of hanging it. It fails in
// every run, within a second, when the caller does not close the last
// call's ticket first (posix_thread_pool.cc).
TEST(PosixThreadPoolTest, ALateWorkerClaimsNothingOfTheNextCall) {
  struct Hits {
    std::atomic<int64_t> hits[32];
  };
  for (int threads : {2, 3, 4}) {
    auto* pool = new PosixThreadPool();  // left behind, not destroyed, if it hangs
    ASSERT_EQ(pool->start(threads), Error::kOk);
    std::mutex mutex;
    std::condition_variable finished_cv;
    bool finished = false;
    std::atomic<int64_t> calls{0};
    int64_t want[32] = {};
    Hits h;
    for (auto& x : h.hits) x = 0;
    std::thread caller([&] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
      for (int64_t call = 0; std::chrono::steady_clock::now() < deadline; ++call) {
        for (int k = 0; k < 64; ++k) {
          const int64_t count = k % 2 == 0 ? 2 : 3 + (call + k) % 29;
          pool->parallel_for(
              count, [](void* c, int64_t i) { static_cast<Hits*>(c)->hits[i]++; }, &h);
          for (int64_t i = 0; i < count; ++i) ++want[i];
        }
        calls += 64;
      }
      std::lock_guard<std::mutex> lock(mutex);
      finished = true;
      finished_cv.notify_one();
    });
    std::unique_lock<std::mutex> lock(mutex);
    if (!finished_cv.wait_for(lock, std::chrono::seconds(20), [&] { return finished; })) {
      PosixThreadPool::Snapshot s;
      pool->snapshot(&s);
      ADD_FAILURE() << threads << " threads: a call did not return in 20 s (after " << calls.load() << " calls): done "
                    << s.done << " of " << s.count << " tasks";
      fflush(stdout);
      _Exit(1);  // the hung call cannot be joined
    }
    lock.unlock();
    caller.join();
    delete pool;  // joins the workers: every task has finished
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(h.hits[i].load(), want[i]) << threads << " threads, " << calls.load() << " calls: index " << i;
    }
  }
}

TEST(PosixThreadPoolTest, SnapshotShowsEveryWorker) {
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(3), Error::kOk);
  Counts counts(1000);
  pool.parallel_for(1000, count_task, &counts);
  // Past the spin: the workers go to sleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  PosixThreadPool::Snapshot s;
  pool.snapshot(&s);
  EXPECT_EQ(s.workers, 2);
  EXPECT_EQ(s.generation, s.ticket_generation);
  EXPECT_EQ(s.count, 1000);
  EXPECT_EQ(s.done, 1000);
  EXPECT_EQ(s.next_index, 1000);
  EXPECT_FALSE(s.busy);
  uint64_t tasks = 0;
  for (int w = 0; w < s.workers; ++w) {
    EXPECT_EQ(s.worker[w].index, -1);
    EXPECT_STREQ(PosixThreadPool::state_name(s.worker[w].state), "sleeping") << "worker " << w;
    tasks += s.worker[w].tasks;
  }
  EXPECT_LE(tasks, 1000u);
}

TEST(PosixThreadPoolTest, WorkersThatWentToSleepWakeUp) {
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(3), Error::kOk);
  for (int round = 0; round < 3; ++round) {
    // Longer than the workers spin before they sleep.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Counts counts(100);
    pool.parallel_for(100, count_task, &counts);
    for (auto& h : counts.hits) ASSERT_EQ(h.load(), 1);
  }
}

// Counts this task in, then waits (10 s at most) for a second one to
// arrive: false if none came.
bool meet(std::atomic<int>& arrived) {
  arrived++;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (arrived.load() < 2) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(PosixThreadPoolTest, TheWorkIsShared) {
  // Tasks that wait for each other can only finish when they run at once.
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(2), Error::kOk);
  struct Rendezvous {
    std::atomic<int> arrived{0};
    std::atomic<bool> timed_out{false};
  } r;
  pool.parallel_for(
      2,
      [](void* context, int64_t) {
        auto* rv = static_cast<Rendezvous*>(context);
        if (!meet(rv->arrived)) rv->timed_out = true;
      },
      &r);
  EXPECT_FALSE(r.timed_out.load()) << "the two tasks never ran at the same time";
}

TEST(PosixThreadPoolTest, EachThreadRunsItsOwnShareFirst) {
  // Two threads, four tasks: the caller's share is 0 and 1, the worker's 2
  // and 3. Tasks 0 and 2 wait for each other, then 1 and 3: they finish
  // only if the caller runs 0 while the worker runs 2 (taken in turn, the
  // worker would take 1 and wait there for 3, while the caller waits in 0
  // for 2), and neither thread can take the other's second task early.
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(2), Error::kOk);
  struct Pairs {
    std::atomic<int> arrived[2] = {{0}, {0}};
    std::atomic<bool> timed_out{false};
    std::thread::id ran_on[4];
  } pairs;
  pool.parallel_for(
      4,
      [](void* context, int64_t i) {
        auto* p = static_cast<Pairs*>(context);
        p->ran_on[i] = std::this_thread::get_id();
        if (!meet(p->arrived[i % 2])) p->timed_out = true;
      },
      &pairs);
  ASSERT_FALSE(pairs.timed_out.load()) << "tasks 0 and 2 (or 1 and 3) did not run at the same time";
  const std::thread::id caller = std::this_thread::get_id();
  EXPECT_EQ(pairs.ran_on[0], caller);
  EXPECT_EQ(pairs.ran_on[1], caller);
  EXPECT_NE(pairs.ran_on[2], caller);
  EXPECT_EQ(pairs.ran_on[3], pairs.ran_on[2]);
}

TEST(PosixThreadPoolTest, ATaskCallingBackRunsInline) {
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(4), Error::kOk);
  struct Nested {
    PosixThreadPool* pool;
    Counts counts{8 * 8};
  } nested{&pool};
  pool.parallel_for(
      8,
      [](void* context, int64_t outer) {
        auto* n = static_cast<Nested*>(context);
        struct Inner {
          Counts* counts;
          int64_t outer;
        } inner{&n->counts, outer};
        n->pool->parallel_for(
            8,
            [](void* c, int64_t i) {
              auto* in = static_cast<Inner*>(c);
              in->counts->hits[static_cast<size_t>(in->outer * 8 + i)]++;
            },
            &inner);
      },
      &nested);
  for (auto& h : nested.counts.hits) EXPECT_EQ(h.load(), 1);
}

TEST(PosixThreadPoolTest, TwoCallersAtOnceBothFinish) {
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(3), Error::kOk);
  Counts a(5000), b(5000);
  std::thread other([&] {
    for (int call = 0; call < 50; ++call) pool.parallel_for(100, count_task, &a);
  });
  for (int call = 0; call < 50; ++call) pool.parallel_for(100, count_task, &b);
  other.join();
  for (size_t i = 0; i < 100; ++i) {
    EXPECT_EQ(a.hits[i].load(), 50);
    EXPECT_EQ(b.hits[i].load(), 50);
  }
}

TEST(PosixThreadPoolTest, RefusesBadCounts) {
  PosixThreadPool pool;
  EXPECT_EQ(pool.start(0), Error::kInvalidArgument);
  EXPECT_EQ(pool.start(PosixThreadPool::kMaxThreads + 1), Error::kInvalidArgument);
  ASSERT_EQ(pool.start(2), Error::kOk);
  EXPECT_EQ(pool.start(2), Error::kInvalidArgument) << "started twice";
  EXPECT_GE(PosixThreadPool::processor_count(), 1);
}

}  // namespace
}  // namespace kiln::testing
