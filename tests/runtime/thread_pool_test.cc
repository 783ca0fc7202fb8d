// PosixThreadPool (kiln/runtime/posix_thread_pool.h): every index runs
// exactly once per call on 1 to 4 threads, over many calls in a row (the
// generation hand-off) and after the workers went to sleep; a task calling
// parallel_for runs its tasks inline; two threads calling at once both
// finish; start() refuses bad counts; snapshot() shows the workers. Built
// and run under ThreadSanitizer too, where a missing happens-before edge
// would show.

#include "kiln/runtime/posix_thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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
        rv->arrived++;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (rv->arrived.load() < 2) {
          if (std::chrono::steady_clock::now() > deadline) {
            rv->timed_out = true;
            return;
          }
          std::this_thread::yield();
        }
      },
      &r);
  EXPECT_FALSE(r.timed_out.load()) << "the two tasks never ran at the same time";
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
