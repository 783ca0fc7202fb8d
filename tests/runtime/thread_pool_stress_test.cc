// PosixThreadPool under stress: its claim/wake protocol run millions of
// times. For every pool size from 1 to 8 threads, and for three pools of 2,
// 3 and 4 threads used in turn (as kernels_threads_test uses them), calls
// with random task counts (0 to 20,000), random work per task (none, a
// little, one long task, one task that sleeps as a worker that lost its core
// would), random pauses between calls (none, a spin, a yield, or a sleep
// long enough that the workers go to sleep), calls made from inside tasks,
// a second thread calling at the same time, and
// pools stopped and started again every few thousand calls. Every call
// checks that each index ran exactly once.
//
// A watchdog thread fails the run instead of letting it hang: when a caller
// has been in one call (or pause, or a pool's start or stop) for
// --stall-seconds it prints every thread's state (the callers, each thread running a task, and each pool's
// snapshot(): every worker spinning, sleeping or working, on which call and
// task) and exits with status 3.
//
//   runtime_thread_pool_stress [--seconds S] [--threads LO-HI] [--seed N] [--stall-seconds S]
//
// Prints, per pool size, the calls, tasks, seconds, and how many calls woke
// sleeping workers or met a second caller. Exit status: 0 when every call
// was right, 1 on a wrong count (with the call), 2 on bad arguments, 3 on a
// stall. CI runs a few seconds (tests/runtime/CMakeLists); tests/README.md
// gives the command for a long run.

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime/posix_thread_pool.h"

namespace {

using kiln::PosixThreadPool;

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void sleep_ns(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  nanosleep(&ts, nullptr);
}

void spin(uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) asm volatile("" ::: "memory");
}

int tid() { return static_cast<int>(syscall(SYS_gettid)); }

// xorshift64*: the same run for the same seed (thread timing aside).
struct Random {
  uint64_t s;
  explicit Random(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ull + 1) {}
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dull;
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
};

// --- What the watchdog reads. ---

std::atomic<uint64_t> g_progress{0};  // tasks and calls finished

// One per OS thread that runs a task (workers, callers); freed at thread exit.
struct Slot {
  std::atomic<int> tid{0};  // 0: free
  std::atomic<uint64_t> call{0};
  std::atomic<int64_t> index{-1};  // the task running, or -1
  std::atomic<int64_t> since_ns{0};
  std::atomic<uint64_t> tasks{0};
};
constexpr int kSlots = 256;
Slot g_slots[kSlots];

struct SlotOwner {
  Slot* slot = nullptr;
  Slot* get() {
    if (slot != nullptr) return slot;
    const int me = tid();
    for (Slot& s : g_slots) {
      int free = 0;
      if (s.tid.compare_exchange_strong(free, me)) {
        s.tasks.store(0);
        s.index.store(-1);
        return slot = &s;
      }
    }
    return nullptr;  // more threads than slots: this one goes unreported
  }
  ~SlotOwner() {
    if (slot != nullptr) slot->tid.store(0);
  }
};
thread_local SlotOwner t_slot;

enum class Phase { kIdle, kPausing, kCalling, kChecking, kStarting, kStopping, kDone };
const char* phase_name(int p) {
  static const char* names[] = {"idle",
                                "pausing between calls",
                                "in parallel_for",
                                "checking the call",
                                "starting a pool",
                                "stopping a pool (joining its workers)",
                                "done"};
  return p >= 0 && p <= 6 ? names[p] : "?";
}

struct Caller {
  const char* name;
  std::atomic<int> tid{0};
  std::atomic<int> phase{static_cast<int>(Phase::kIdle)};
  std::atomic<uint64_t> call{0};
  std::atomic<int64_t> count{0};
  std::atomic<int> pool_threads{0};
  std::atomic<int64_t> since_ns{0};
  void enter(Phase p) {
    phase.store(static_cast<int>(p));
    since_ns.store(now_ns());
  }
};
Caller g_main{"main caller"};
Caller g_second{"second caller"};

// The pools alive now, for the watchdog's snapshots (under g_pools_mutex).
std::mutex g_pools_mutex;
std::vector<PosixThreadPool*> g_pools;

void register_pool(PosixThreadPool* pool, bool add) {
  std::lock_guard<std::mutex> lock(g_pools_mutex);
  if (add) {
    g_pools.push_back(pool);
  } else {
    for (size_t i = 0; i < g_pools.size(); ++i) {
      if (g_pools[i] == pool) g_pools.erase(g_pools.begin() + static_cast<long>(i));
    }
  }
}

void print_state(const char* why) {
  const int64_t now = now_ns();
  printf("watchdog: %s; every thread's state:\n", why);
  for (Caller* c : {&g_main, &g_second}) {
    if (c->tid.load() == 0) continue;
    printf("  %s (tid %d): %s for %.1f ms, call #%llu of %lld tasks on a pool of %d threads\n", c->name, c->tid.load(),
           phase_name(c->phase.load()), (now - c->since_ns.load()) / 1e6,
           static_cast<unsigned long long>(c->call.load()), static_cast<long long>(c->count.load()),
           c->pool_threads.load());
  }
  for (Slot& s : g_slots) {
    const int t = s.tid.load();
    if (t == 0) continue;
    const int64_t index = s.index.load();
    if (index >= 0) {
      printf("  thread tid %d: running task %lld of call #%llu for %.1f ms (%llu tasks run)\n", t,
             static_cast<long long>(index), static_cast<unsigned long long>(s.call.load()),
             (now - s.since_ns.load()) / 1e6, static_cast<unsigned long long>(s.tasks.load()));
    } else {
      printf("  thread tid %d: between tasks (%llu tasks run)\n", t, static_cast<unsigned long long>(s.tasks.load()));
    }
  }
  std::unique_lock<std::mutex> lock(g_pools_mutex, std::try_to_lock);
  if (!lock.owns_lock()) {
    printf("  (the pools are being changed: no snapshot)\n");
    return;
  }
  for (PosixThreadPool* pool : g_pools) {
    PosixThreadPool::Snapshot s;
    pool->snapshot(&s);
    printf(
        "  pool %p of %d threads: generation %llu, ticket of generation %llu at index %lld (claimed 0x%08x), "
        "count %lld, done %lld, %d sleepers, %s\n",
        static_cast<void*>(pool), s.workers + 1, static_cast<unsigned long long>(s.generation),
        static_cast<unsigned long long>(s.ticket_generation), static_cast<long long>(s.next_index), s.claimed,
        static_cast<long long>(s.count), static_cast<long long>(s.done), s.sleepers,
        s.busy ? "a call in flight" : "idle");
    for (int w = 0; w < s.workers; ++w) {
      const PosixThreadPool::WorkerSnapshot& ws = s.worker[w];
      printf("    worker %d: %s, saw generation %llu, %s%lld, %llu tasks run\n", w,
             PosixThreadPool::state_name(ws.state), static_cast<unsigned long long>(ws.generation),
             ws.index >= 0 ? "running task " : "no task: ", static_cast<long long>(ws.index),
             static_cast<unsigned long long>(ws.tasks));
    }
  }
}

// Fails the run when a caller stays in one phase (a call, a pause, a pool's
// start or stop) for `stall_seconds`: the longest a phase takes here is
// milliseconds. Each caller is watched on its own, since while one hangs in
// a call the other's calls run inline and keep finishing.
void watchdog(double stall_seconds, std::atomic<bool>* finished) {
  const int64_t limit = static_cast<int64_t>(stall_seconds * 1e9);
  while (!finished->load()) {
    sleep_ns(50 * 1000 * 1000);
    const int64_t now = now_ns();
    for (Caller* c : {&g_main, &g_second}) {
      const int phase = c->phase.load();
      if (phase == static_cast<int>(Phase::kIdle) || phase == static_cast<int>(Phase::kDone)) continue;
      const int64_t stuck = now - c->since_ns.load();
      if (stuck <= limit || c->phase.load() != phase) continue;
      char why[128];
      snprintf(why, sizeof why, "the %s has been %s for %.1f s", c->name, phase_name(phase), stuck / 1e9);
      print_state(why);
      printf("FAIL: the thread pool stalled\n");
      fflush(stdout);
      _exit(3);
    }
  }
}

// --- One call. ---

struct Call {
  PosixThreadPool* pool = nullptr;
  uint64_t id = 0;
  int64_t count = 0;
  std::atomic<uint32_t>* hits = nullptr;
  uint32_t work = 0;       // spins per task
  int64_t long_task = -1;  // this index spins `long_spins`
  uint32_t long_spins = 0;
  int64_t sleepy_task = -1;  // this index sleeps `sleep_ns` (a worker off its core)
  int64_t sleep_ns = 0;
  bool nested = false;  // tasks call parallel_for (which must run inline)
  std::atomic<int> nested_wrong{0};
};

// A call from inside a task: each of its indices once, on any thread (it
// runs inline when the pool is busy with the outer call, which is not so
// when the outer call itself ran inline: one task, or a second caller).
struct Nested {
  std::atomic<int> ran[3] = {};
};

void nested_task(void* context, int64_t i) { static_cast<Nested*>(context)->ran[i].fetch_add(1); }

void task(void* context, int64_t i) {
  Call& c = *static_cast<Call*>(context);
  Slot* slot = t_slot.get();
  if (slot != nullptr) {
    slot->call.store(c.id, std::memory_order_relaxed);
    slot->since_ns.store(now_ns(), std::memory_order_relaxed);
    slot->index.store(i, std::memory_order_relaxed);
  }
  c.hits[i].fetch_add(1, std::memory_order_relaxed);
  spin(c.work);
  if (i == c.long_task) spin(c.long_spins);
  if (i == c.sleepy_task) sleep_ns(c.sleep_ns);
  if (c.nested && i % 5 == 0) {
    Nested n;
    c.pool->parallel_for(3, nested_task, &n);
    if (n.ran[0].load() != 1 || n.ran[1].load() != 1 || n.ran[2].load() != 1) c.nested_wrong.fetch_add(1);
  }
  if (slot != nullptr) {
    slot->index.store(-1, std::memory_order_relaxed);
    slot->tasks.store(slot->tasks.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  g_progress.fetch_add(1, std::memory_order_relaxed);
}

std::atomic<uint64_t> g_next_call{1};

// Runs one call as `r` decides and checks it; false (printed) when wrong.
bool call_once(PosixThreadPool& pool, Random& r, std::vector<std::atomic<uint32_t>>& hits, Caller& who,
               int64_t max_count) {
  Call c;
  c.pool = &pool;
  c.id = g_next_call.fetch_add(1);
  // Mostly what kernels ask (a few tasks per thread, little work each, one
  // call right after another), so that calls run by the million.
  const uint32_t shape = r.below(1000);
  const int threads = pool.concurrency();
  if (shape < 100) {
    c.count = r.below(2);
  } else if (shape < 850) {
    c.count = 2 + r.below(static_cast<uint32_t>(4 * threads + 2));
  } else if (shape < 990) {
    c.count = 2 + r.below(255);
  } else {
    c.count = 2 + r.below(20000);
  }
  if (c.count > max_count) c.count = max_count;
  const uint32_t work = r.below(1000);
  if (work < 750) {
    c.work = 0;
  } else if (work < 950) {
    c.work = r.below(200);
  } else if (work < 995) {
    c.work = r.below(40);
    c.long_task = c.count > 0 ? r.below(static_cast<uint32_t>(c.count)) : -1;
    c.long_spins = 1000 + r.below(100000);
  } else {
    c.sleepy_task = c.count > 0 ? r.below(static_cast<uint32_t>(c.count)) : -1;
    c.sleep_ns = 20000 + r.below(400000);
  }
  c.nested = r.below(50) == 0;
  c.hits = hits.data();

  who.call.store(c.id);
  who.count.store(c.count);
  who.pool_threads.store(threads);
  who.enter(Phase::kCalling);
  pool.parallel_for(c.count, task, &c);
  who.enter(Phase::kChecking);
  bool ok = true;
  for (int64_t i = 0; i < c.count; ++i) {
    const uint32_t h = hits[static_cast<size_t>(i)].load(std::memory_order_relaxed);
    if (h != 1 && ok) {
      printf("FAIL: %s, call #%llu of %lld tasks on %d threads: index %lld ran %u times\n", who.name,
             static_cast<unsigned long long>(c.id), static_cast<long long>(c.count), threads, static_cast<long long>(i),
             h);
      ok = false;
    }
    hits[static_cast<size_t>(i)].store(0, std::memory_order_relaxed);
  }
  if (c.nested_wrong.load() != 0) {
    printf("FAIL: %s, call #%llu: a call from inside a task did not run each index once\n", who.name,
           static_cast<unsigned long long>(c.id));
    ok = false;
  }
  g_progress.fetch_add(1, std::memory_order_relaxed);
  return ok;
}

// The pause before a call: mostly none, sometimes long enough for the
// workers to fall asleep. True when it was that long.
bool pause(Random& r, Caller& who) {
  const uint32_t p = r.below(10000);
  if (p < 8500) return false;  // 85%: the next call at once
  who.enter(Phase::kPausing);
  if (p < 9950) {
    spin(r.below(5000));  // 14.5%: a little work between kernels
  } else if (p < 9970) {
    sched_yield();  // 0.2%
  } else {
    sleep_ns(200000 + r.below(2800000));  // 0.3%: 0.2 to 3 ms, past the workers' spin
    return true;
  }
  return false;
}

struct Stats {
  uint64_t calls = 0;
  uint64_t tasks_before = 0;
  uint64_t woke_sleepers = 0;
  uint64_t second_calls = 0;
  uint64_t restarts = 0;
};

// The second caller: calls the same pool now and then while the main one
// does. One of the two runs inline whenever they meet; both must finish.
struct SecondCaller {
  SecondCaller(PosixThreadPool* p, uint64_t s) : pool(p), seed(s) {}
  PosixThreadPool* pool;
  uint64_t seed;
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> calls{0};
  std::thread thread;

  void start() {
    thread = std::thread([this] {
      g_second.tid.store(tid());
      Random r(seed);
      std::vector<std::atomic<uint32_t>> hits(64);
      while (!stop.load()) {
        g_second.enter(Phase::kPausing);
        sleep_ns(r.below(300000));
        if (!call_once(*pool, r, hits, g_second, 64)) failed.store(true);
        calls.fetch_add(1);
      }
      g_second.enter(Phase::kIdle);
    });
  }
  void join() {
    stop.store(true);
    thread.join();
  }
};

// Runs calls on `pools` (chosen at random each call) until `deadline`,
// starting them again every few thousand calls. False when a call was wrong.
bool run_phase(const std::vector<int>& sizes, int64_t deadline, Random& r, Stats* stats) {
  std::vector<std::atomic<uint32_t>> hits(20002);
  while (now_ns() < deadline) {
    g_main.enter(Phase::kStarting);
    std::vector<std::unique_ptr<PosixThreadPool>> pools;
    for (int n : sizes) {
      pools.push_back(std::make_unique<PosixThreadPool>());
      if (pools.back()->start(n) != kiln::Error::kOk) {
        printf("FAIL: could not start a pool of %d threads\n", n);
        return false;
      }
      register_pool(pools.back().get(), true);
    }
    ++stats->restarts;
    SecondCaller second(pools[0].get(), r.next());
    const bool contend = r.below(2) == 0;
    if (contend) second.start();
    bool ok = true;
    const uint32_t calls = 500 + r.below(5000);
    for (uint32_t k = 0; k < calls && ok && now_ns() < deadline; ++k) {
      PosixThreadPool& pool = *pools[r.below(static_cast<uint32_t>(pools.size()))];
      if (pause(r, g_main)) {
        PosixThreadPool::Snapshot s;
        pool.snapshot(&s);
        if (s.sleepers > 0) ++stats->woke_sleepers;
      }
      ok = call_once(pool, r, hits, g_main, 20000);
      ++stats->calls;
    }
    if (contend) {
      second.join();
      stats->second_calls += second.calls.load();
      if (second.failed.load()) ok = false;
    }
    g_main.enter(Phase::kStopping);
    for (auto& p : pools) register_pool(p.get(), false);
    pools.clear();
    if (!ok) return false;
  }
  return true;
}

struct Options {
  double seconds = 8;
  int lo = 1, hi = 8;
  uint64_t seed = 1;
  double stall_seconds = 20;
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) return false;
    if (a == "--seconds") {
      o->seconds = atof(v);
    } else if (a == "--threads") {
      if (sscanf(v, "%d-%d", &o->lo, &o->hi) != 2) o->hi = o->lo = atoi(v);
    } else if (a == "--seed") {
      o->seed = strtoull(v, nullptr, 10);
    } else if (a == "--stall-seconds") {
      o->stall_seconds = atof(v);
    } else {
      return false;
    }
    ++i;
  }
  return o->seconds > 0 && o->lo >= 1 && o->hi >= o->lo && o->hi <= PosixThreadPool::kMaxThreads &&
         o->stall_seconds > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    fprintf(stderr, "usage: %s [--seconds S] [--threads LO-HI] [--seed N] [--stall-seconds S]\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  g_main.tid.store(tid());
  std::atomic<bool> finished{false};
  std::thread dog(watchdog, o.stall_seconds, &finished);

  // One phase per pool size, and one of three pools used in turn.
  std::vector<std::vector<int>> phases;
  for (int n = o.lo; n <= o.hi; ++n) phases.push_back({n});
  phases.push_back({2, 3, 4});
  const double per_phase = o.seconds / static_cast<double>(phases.size());
  printf("thread pool stress: %zu phases of %.2f s, seed %llu, %d processors\n", phases.size(), per_phase,
         static_cast<unsigned long long>(o.seed), PosixThreadPool::processor_count());
  Random r(o.seed);
  bool ok = true;
  uint64_t total_calls = 0, total_tasks = 0;
  const int64_t start = now_ns();
  for (const std::vector<int>& sizes : phases) {
    Stats stats;
    const uint64_t progress_before = g_progress.load();
    const int64_t t0 = now_ns();
    ok = run_phase(sizes, t0 + static_cast<int64_t>(per_phase * 1e9), r, &stats);
    const double secs = (now_ns() - t0) / 1e9;
    // g_progress counts tasks and calls of both callers.
    const uint64_t tasks = g_progress.load() - progress_before - stats.calls - stats.second_calls;
    std::string label;
    for (int n : sizes) label += (label.empty() ? "" : "+") + std::to_string(n);
    printf(
        "threads %-5s: %9llu calls, %11llu tasks in %6.2f s (%7.0f calls/s); %llu calls woke sleeping workers, "
        "%llu by a second caller, %llu pool starts\n",
        label.c_str(), static_cast<unsigned long long>(stats.calls + stats.second_calls),
        static_cast<unsigned long long>(tasks), secs, (stats.calls + stats.second_calls) / secs,
        static_cast<unsigned long long>(stats.woke_sleepers), static_cast<unsigned long long>(stats.second_calls),
        static_cast<unsigned long long>(stats.restarts));
    total_calls += stats.calls + stats.second_calls;
    total_tasks += tasks;
    if (!ok) break;
  }
  g_main.enter(Phase::kDone);
  finished.store(true);
  dog.join();
  printf("total: %llu calls, %llu tasks in %.1f s: %s\n", static_cast<unsigned long long>(total_calls),
         static_cast<unsigned long long>(total_tasks), (now_ns() - start) / 1e9, ok ? "every index ran once" : "FAIL");
  return ok ? 0 : 1;
}
