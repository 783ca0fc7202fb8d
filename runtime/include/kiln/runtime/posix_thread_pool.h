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
// start() and the destructor must not race with parallel_for(); snapshot()
// may be called from any thread between start() and the destructor.

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

  // What the pool and each of its workers are doing, for a watchdog that
  // must say why a call does not return (tests/runtime/
  // thread_pool_stress_test.cc) or for a debugger. Each field is read on its
  // own (relaxed), so they may be a few instructions apart in time.
  enum class WorkerState : uint8_t {
    kStarting,  // created, not yet running its loop
    kSpinning,  // waiting for a call, awake
    kSleeping,  // waiting for a call on the condition variable
    kWorking,   // claiming indices of a call and running them
    kStopped,   // left its loop (stop())
  };
  struct WorkerSnapshot {
    WorkerState state;
    uint64_t generation;  // the call it last saw
    int64_t index;        // the task it runs now, or -1
    uint64_t tasks;       // tasks it has run since start()
  };
  struct Snapshot {
    uint64_t generation;         // of the latest call
    uint64_t ticket_generation;  // the call the ticket belongs to (low 32 bits)
    int64_t next_index;          // the next index to claim (a call of more than kMaxOwnedTasks), or -1
    uint32_t claimed;            // one bit per index claimed (a call of at most kMaxOwnedTasks), or 0
    int64_t count;               // of the latest call
    int64_t done;                // tasks of the latest call finished
    int sleepers;
    bool busy;  // a call is in flight
    int workers;
    WorkerSnapshot worker[kMaxThreads - 1];
  };
  void snapshot(Snapshot* out) const;
  static const char* state_name(WorkerState state);

 private:
  // One worker's thread and what it is doing, on a cache line of its own:
  // only that worker writes it.
  struct alignas(64) Worker {
    PosixThreadPool* pool = nullptr;
    pthread_t thread = {};
    std::atomic<WorkerState> state{WorkerState::kStarting};
    std::atomic<uint64_t> generation{0};
    std::atomic<int64_t> index{-1};
    std::atomic<uint64_t> tasks{0};
  };

  static void* worker_main(void* worker);
  // Claims and runs indices of call `generation` until none are left;
  // `self` is the worker doing it, nullptr for the caller.
  void work(uint64_t generation, Worker* self);
  void stop();

  Worker worker_[kMaxThreads - 1];
  int workers_ = 0;
  uint64_t first_generation_ = 0;  // generation_ when start() ran

  // Calls of more tasks run inline (the ticket holds a 32-bit index).
  static constexpr int64_t kMaxTasks = int64_t{1} << 31;
  // Calls of at most this many tasks give each thread its own share first
  // (posix_thread_pool.cc: the ticket holds a bit per index).
  static constexpr int64_t kMaxOwnedTasks = 31;

  // The current call: written by the caller after it closed the last call's
  // ticket and before `ticket_` names this call's generation, read by the
  // workers before each claim (see the .cc).
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
