// PosixThreadPool (kiln/runtime/posix_thread_pool.h).
//
// One call, step by step:
//   caller: busy_ from false to true (or run inline: another call is in
//           flight, or this is a task calling back)
//           ticket_ = (generation << 32 | kClosed): the last call's ticket is closed
//           task_, context_, count_ = the call (release); done_ = 0
//           ticket_ = (generation << 32 | index 0) (release); generation_ = generation
//           wake the sleepers, if any
//           claim indices from ticket_ and run them; then wait for done_ = count
//   worker: sees generation_ move (spinning, then on the condition variable),
//           claims indices from ticket_ while it still names that generation
//           and the index is below count_ (read with acquire), runs each,
//           done_ += 1 (release)
// Every index is claimed by one compare-and-swap on ticket_, which carries
// the generation: a worker that wakes late, after its call returned, finds
// another generation there and claims nothing. So the caller waits for the
// tasks, never for a worker that has not shown up (on a loaded machine a
// worker may not get a core for milliseconds; the caller then runs its
// share).
//
// What the low half of the ticket holds:
//   - a call of at most kMaxOwnedTasks indices: one bit per index, set once
//     claimed (the bits from count up start set). Thread t of T (the caller
//     is 0, worker i is i + 1) claims its own share first, indices
//     [t * count / T, (t + 1) * count / T), lowest first, then any index
//     left, highest first. So a kernel that splits its work the same way
//     every call finds its rows or columns on the core that wrote them last
//     time, unless a thread came late and another ran its share. Between
//     two cores that share no cache close by, that matters: taken by
//     whoever came first, a task read half of its input from the other
//     core's cache, and ResNeXt-50 on two such cores ran in 39.2 ms
//     instead of 36.6.
//   - a larger call: the next index; threads take them in turn.
// Either way kClosed (all bits set, or an index past any count) leaves
// nothing to claim.
//
// Why the ticket is closed before the call's fields change: a worker still
// in the last call's loop may hold that call's final ticket (index = its
// count, nothing left to claim) and read count_ after the caller wrote the
// next call's larger count. Were the last ticket still in place, its
// compare-and-swap would succeed, and the worker would run an index of the
// next call (with fields of either call) that another thread runs again once
// the next ticket is out, and count it in done_ twice: the caller would
// return while a task still runs, and a later call would wait for ever with
// done_ past its count. (The test ALateWorkerClaimsNothingOfTheNextCall and
// runtime_thread_pool_stress fail within seconds when the ticket is not
// closed first.) Closed first, any next-call field a worker reads (acquire, after
// the close in the caller's order) means its compare-and-swap meets the
// closed ticket and fails. So a claim that succeeds proves its call is
// still in flight, and the task_, context_ and count_ read just before it
// are that call's.
//
// Sleeping without lost wake-ups: a worker counts itself in sleepers_ and
// then re-reads generation_ under the mutex; the caller moves generation_ and
// then reads sleepers_ (both sequentially consistent), so either the worker
// sees the next generation or the caller sees the sleeper and signals under
// the mutex.

#include "kiln/runtime/posix_thread_pool.h"

#include <sched.h>
#include <unistd.h>

#include "kiln/runtime/check.h"
#include "kiln/runtime/log.h"

namespace kiln {
namespace {

// Set while a thread runs tasks of a pool: a parallel_for from a task runs
// inline.
thread_local bool t_in_task = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a worker spins before it sleeps, and how long the caller spins
// between yields while it waits for workers: about 50 and 5 microseconds.
constexpr int kWorkerSpins = 20000;
constexpr int kCallerSpinsBeforeYield = 2000;

// The index of a closed ticket (above any index: calls have fewer than 2^31 tasks).
constexpr uint64_t kClosed = 0xffffffffu;

}  // namespace

int PosixThreadPool::processor_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

Error PosixThreadPool::start(int threads) {
  KILN_CHECK_OR_RETURN(threads >= 1 && threads <= kMaxThreads, Error::kInvalidArgument,
                       "thread pool: %d threads asked for; 1 to %d can be", threads, kMaxThreads);
  KILN_CHECK_OR_RETURN(workers_ == 0, Error::kInvalidArgument, "thread pool: already started");
  stopping_.store(false);
  // Workers count generations from here, however late they start running:
  // a call made before a worker first looks still waits for it.
  first_generation_ = generation_.load();
  for (int i = 0; i < threads - 1; ++i) {
    Worker& w = worker_[i];
    w.pool = this;
    w.state.store(WorkerState::kStarting, std::memory_order_relaxed);
    w.generation.store(first_generation_, std::memory_order_relaxed);
    w.index.store(-1, std::memory_order_relaxed);
    w.tasks.store(0, std::memory_order_relaxed);
    if (pthread_create(&w.thread, nullptr, &PosixThreadPool::worker_main, &w) != 0) {
      KILN_LOG(ERROR, "thread pool: could not start worker %d of %d", i + 1, threads - 1);
      stop();
      return Error::kInternal;
    }
    ++workers_;
  }
  return Error::kOk;
}

PosixThreadPool::~PosixThreadPool() { stop(); }

void PosixThreadPool::stop() {
  if (workers_ == 0) return;
  stopping_.store(true);
  generation_.fetch_add(1);
  pthread_mutex_lock(&mutex_);
  pthread_cond_broadcast(&wake_);
  pthread_mutex_unlock(&mutex_);
  for (int i = 0; i < workers_; ++i) pthread_join(worker_[i].thread, nullptr);
  workers_ = 0;
}

void* PosixThreadPool::worker_main(void* worker) {
  Worker& self = *static_cast<Worker*>(worker);
  PosixThreadPool& pool = *self.pool;
  uint64_t seen = pool.first_generation_;
  for (;;) {
    self.state.store(WorkerState::kSpinning, std::memory_order_relaxed);
    uint64_t now = seen;
    for (int spin = 0; spin < kWorkerSpins; ++spin) {
      now = pool.generation_.load(std::memory_order_acquire);
      if (now != seen) break;
      cpu_relax();
    }
    if (now == seen) {
      pthread_mutex_lock(&pool.mutex_);
      self.state.store(WorkerState::kSleeping, std::memory_order_relaxed);
      pool.sleepers_.fetch_add(1);
      while ((now = pool.generation_.load()) == seen) pthread_cond_wait(&pool.wake_, &pool.mutex_);
      pool.sleepers_.fetch_sub(1);
      pthread_mutex_unlock(&pool.mutex_);
    }
    if (pool.stopping_.load()) break;
    seen = now;
    self.generation.store(now, std::memory_order_relaxed);
    self.state.store(WorkerState::kWorking, std::memory_order_relaxed);
    pool.work(now, &self);
  }
  self.state.store(WorkerState::kStopped, std::memory_order_relaxed);
  return nullptr;
}

void PosixThreadPool::work(uint64_t generation, Worker* self) {
  const uint64_t tag = (generation & 0xffffffffu) << 32;
  const int64_t me = self != nullptr ? (self - worker_) + 1 : 0;  // the caller is thread 0
  const int64_t threads = workers_ + 1;
  t_in_task = true;
  uint64_t ticket = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if ((ticket & ~uint64_t{0xffffffffu}) != tag) break;  // another call's
    const Task task = task_.load(std::memory_order_acquire);
    void* const context = context_.load(std::memory_order_acquire);
    const int64_t count = count_.load(std::memory_order_acquire);
    int64_t index;
    uint64_t next;
    if (count <= kMaxOwnedTasks) {
      const uint32_t claimed = static_cast<uint32_t>(ticket);
      if (claimed == kClosed) break;
      const uint64_t first = static_cast<uint64_t>(me * count / threads);
      const uint64_t end = static_cast<uint64_t>((me + 1) * count / threads);
      const uint32_t own = static_cast<uint32_t>(((uint64_t{1} << end) - 1) & ~((uint64_t{1} << first) - 1));
      const uint32_t own_left = own & ~claimed;
      index = own_left != 0 ? __builtin_ctz(own_left) : 31 - __builtin_clz(~claimed);
      next = ticket | uint64_t{1} << index;
    } else {
      index = static_cast<int64_t>(ticket & 0xffffffffu);
      if (index >= count) break;
      next = ticket + 1;
    }
    if (!ticket_.compare_exchange_weak(ticket, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
      continue;  // `ticket` now holds what another thread left there
    }
    if (self != nullptr) self->index.store(index, std::memory_order_relaxed);
    task(context, index);
    if (self != nullptr) {
      self->index.store(-1, std::memory_order_relaxed);
      self->tasks.store(self->tasks.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    done_.fetch_add(1, std::memory_order_release);
    ticket = ticket_.load(std::memory_order_acquire);
  }
  t_in_task = false;
}

void PosixThreadPool::parallel_for(int64_t count, Task task, void* context) {
  if (count <= 0) return;
  bool idle = false;
  if (workers_ == 0 || count == 1 || count > kMaxTasks || t_in_task ||
      !busy_.compare_exchange_strong(idle, true, std::memory_order_acquire)) {
    for (int64_t i = 0; i < count; ++i) task(context, i);
    return;
  }
  const uint64_t generation = generation_.load(std::memory_order_relaxed) + 1;  // only the busy_ holder moves it
  ticket_.store((generation & 0xffffffffu) << 32 | kClosed, std::memory_order_relaxed);  // see the top of the file
  task_.store(task, std::memory_order_release);
  context_.store(context, std::memory_order_release);
  count_.store(count, std::memory_order_release);
  done_.store(0, std::memory_order_relaxed);
  // Open: index 0, or no index claimed (the bits past count set).
  const uint64_t open = count <= kMaxOwnedTasks ? ~((uint64_t{1} << count) - 1) & kClosed : 0;
  ticket_.store((generation & 0xffffffffu) << 32 | open, std::memory_order_release);
  generation_.store(generation);  // sequentially consistent: publishes the call, then...
  if (sleepers_.load() > 0) {     // ...reads the sleepers (see the top of the file)
    pthread_mutex_lock(&mutex_);
    pthread_cond_broadcast(&wake_);
    pthread_mutex_unlock(&mutex_);
  }
  work(generation, nullptr);
  for (int spin = 0; done_.load(std::memory_order_acquire) != count; ++spin) {
    if (spin < kCallerSpinsBeforeYield) {
      cpu_relax();
    } else {
      sched_yield();  // a worker runs a task but waits for a core (more threads than cores)
      spin = 0;
    }
  }
  busy_.store(false, std::memory_order_release);
}

void PosixThreadPool::snapshot(Snapshot* out) const {
  const uint64_t ticket = ticket_.load(std::memory_order_relaxed);
  out->generation = generation_.load(std::memory_order_relaxed);
  out->ticket_generation = ticket >> 32;
  out->count = count_.load(std::memory_order_relaxed);
  const bool owned = out->count <= kMaxOwnedTasks;
  out->next_index = owned ? -1 : static_cast<int64_t>(ticket & 0xffffffffu);
  out->claimed = owned ? static_cast<uint32_t>(ticket) : 0;
  out->done = done_.load(std::memory_order_relaxed);
  out->sleepers = sleepers_.load(std::memory_order_relaxed);
  out->busy = busy_.load(std::memory_order_relaxed);
  out->workers = workers_;
  for (int i = 0; i < workers_; ++i) {
    const Worker& w = worker_[i];
    out->worker[i].state = w.state.load(std::memory_order_relaxed);
    out->worker[i].generation = w.generation.load(std::memory_order_relaxed);
    out->worker[i].index = w.index.load(std::memory_order_relaxed);
    out->worker[i].tasks = w.tasks.load(std::memory_order_relaxed);
  }
}

const char* PosixThreadPool::state_name(WorkerState state) {
  switch (state) {
    case WorkerState::kStarting: return "starting";
    case WorkerState::kSpinning: return "spinning";
    case WorkerState::kSleeping: return "sleeping";
    case WorkerState::kWorking: return "working";
    case WorkerState::kStopped: return "stopped";
  }
  return "?";
}

}  // namespace kiln
