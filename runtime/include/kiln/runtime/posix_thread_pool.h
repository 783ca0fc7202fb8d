// PosixThreadPool: the ThreadPool (thread_pool.h) of host builds, on
// pthreads. What `kiln run --threads N` and the tests lend a Method.
//
// start(n) creates n - 1 persistent workers; the thread calling
// parallel_for() is the n-th. A call publishes its task under a new
// generation number, the workers and the caller claim indices from one
// atomic ticket tagged with it until none are left, and the caller waits
// for the tasks to finish, not for workers that never got a core (it runs
// their share instead). Between calls a worker spins
// for a while (kernels of one inference follow each other within
// microseconds) and then sleeps on a condition variable, so an idle pool
// costs nothing.
//
// Memory: everything lives in the object (at most kMaxThreads threads); no
// allocation after start(), none at all in parallel_for(). pthread_create
// itself maps the workers' stacks, once, in start().
//
// Thread safety: parallel_for() is meant for one thread at a time (a
// Method executes on one thread); a second thread calling while a call is
// in flight, or a task calling it, runs its tasks inline on its own thread.
// start() and the destructor must not race with parallel_for().

#ifndef KILN_RUNTIME_POSIX_THREAD_POOL_H_
#define KILN_RUNTIME_POSIX_THREAD_POOL_H_

#include <pthread.h>
#include <stdint.h>

#include <atomic>

#include "kiln/runtime/error.h"
#include "kiln/runtime/thread_pool.h"

namespace kiln {

class PosixThreadPool final : public ThreadPool {
 public:
  static constexpr int kMaxThreads = 64;

  PosixThreadPool() = default;
  PosixThreadPool(const PosixThreadPool&) = delete;
  PosixThreadPool& operator=(const PosixThreadPool&) = delete;
  // Stops and joins the workers.
  ~PosixThreadPool();

  // Starts `threads` - 1 workers (threads counts the caller). kInvalidArgument
  // outside [1, kMaxThreads] or when already started; kInternal (the workers
  // that did start are stopped) when pthread_create fails.
  Error start(int threads);

  // The number of logical processors this process may run on (>= 1).
  static int processor_count();

  int concurrency() const override { return workers_ + 1; }
  void parallel_for(int64_t count, Task task, void* context) override;

 private:
  static void* worker_main(void* self);
  void work(uint64_t generation);
  void stop();

  pthread_t threads_[kMaxThreads] = {};
  int workers_ = 0;
  uint64_t first_generation_ = 0;  // generation_ when start() ran

  // Calls of more tasks run inline (the ticket holds a 32-bit index).
  static constexpr int64_t kMaxTasks = int64_t{1} << 31;

  // The current call: written by the caller before `ticket_` names its
  // generation, read by the workers before each claim (see the .cc).
  std::atomic<Task> task_{nullptr};
  std::atomic<void*> context_{nullptr};
  std::atomic<int64_t> count_{0};

  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<uint64_t> ticket_{0};  // generation << 32 | next index
  alignas(64) std::atomic<int64_t> done_{0};     // tasks of this call finished
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> busy_{false};
  std::atomic<bool> stopping_{false};
  pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t wake_ = PTHREAD_COND_INITIALIZER;
};

}  // namespace kiln

#endif  // KILN_RUNTIME_POSIX_THREAD_POOL_H_
