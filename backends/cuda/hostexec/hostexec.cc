// hostexec's scheduler and its CUDA runtime API over host memory (see
// hostexec.h; test infrastructure).
//
// How a block runs:
//   1. every thread of the block gets a fiber (a ucontext on its own stack
//      from a per-OS-thread pool, reused by every block and launch);
//   2. the scheduler resumes the runnable fibers in thread order, each until
//      it finishes or waits: at a block barrier (runnable again once every
//      live thread of the block arrived), at a warp barrier (once every live
//      lane of its warp arrived) or after a yield (runnable at once);
//   3. a pass that finds no runnable fiber while some are unfinished is a
//      deadlock: the launch fails with cudaErrorLaunchFailure.
// Stack switches are announced to AddressSanitizer when it is on
// (__sanitizer_start/finish_switch_fiber), so ASan builds run the model too,
// and to ThreadSanitizer: each fiber is a TSan fiber (__tsan_create_fiber,
// made afresh for every block, since a finished fiber never returns from
// fiber_main and would leave its frames on TSan's shadow stack), and every
// switch is __tsan_switch_to_fiber with synchronisation, as it is: the
// fibers of a block run one at a time on one OS thread, so what one wrote
// before it switched out happens before what the next reads. A race between
// OS threads (two Methods' launches at once) is still seen.

#include "hostexec.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include <memory>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define KILN_HOSTEXEC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_HOSTEXEC_ASAN 1
#endif
#endif
#ifdef KILN_HOSTEXEC_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(__SANITIZE_THREAD__)
#define KILN_HOSTSIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_HOSTSIM_TSAN 1
#endif
#endif
#ifdef KILN_HOSTSIM_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace kiln::backends::cuda::hostexec {
namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kWarp = 32;

enum class Wait { kNone, kBlockBarrier, kWarpBarrier, kDone };

struct Fiber {
  ucontext_t context;
  void* tsan = nullptr;  // its ThreadSanitizer fiber, in TSan builds
  ThreadContext thread;
  Wait wait = Wait::kNone;
  uint64_t generation = 0;  // of the barrier it waits at
  unsigned linear = 0;
};

struct Barrier {
  unsigned arrived = 0;
  uint64_t generation = 0;
};

// One launch's block in progress, per OS thread.
struct BlockRun {
  KernelFn fn = nullptr;
  const void* args = nullptr;
  unsigned threads = 0;
  unsigned live = 0;
  Barrier block;
  Barrier warps[kMaxThreadsPerBlock / kWarp];
  unsigned warp_live[kMaxThreadsPerBlock / kWarp] = {};
  uint64_t slots[kMaxThreadsPerBlock] = {};
  bool trapped = false;  // a thread called __trap()
};

struct Scheduler {
  ucontext_t main_context;
  Fiber* current = nullptr;
  BlockRun* run = nullptr;
  Fiber fibers[kMaxThreadsPerBlock];
  uint8_t* stacks = nullptr;  // kMaxThreadsPerBlock * kStackBytes, mapped once
  void* main_stack_bottom = nullptr;
  size_t main_stack_size = 0;
  void* fake_stack = nullptr;
  void* tsan_thread = nullptr;  // the OS thread's own ThreadSanitizer context
  cudaError_t last_error = cudaSuccess;
  Stats stats;

  ~Scheduler();
};

// Per OS thread, made on first use. A pointer, not the object: static TLS
// of a megabyte would raise the smallest stack every thread of the program
// may be created with (glibc counts static TLS against it).
thread_local Scheduler* g_scheduler_ptr = nullptr;
thread_local struct SchedulerOwner {
  ~SchedulerOwner() { delete g_scheduler_ptr; }
} g_scheduler_owner;

Scheduler& scheduler() {
  if (g_scheduler_ptr == nullptr) {
    g_scheduler_ptr = new Scheduler();
    (void)&g_scheduler_owner;
  }
  return *g_scheduler_ptr;
}
#define g_scheduler (scheduler())

void start_switch(Scheduler& s, void* bottom, size_t size) {
#ifdef KILN_HOSTEXEC_ASAN
  __sanitizer_start_switch_fiber(&s.fake_stack, bottom, size);
#endif
}

void finish_switch(Scheduler& s) {
#ifdef KILN_HOSTEXEC_ASAN
  const void* old_bottom = nullptr;
  size_t old_size = 0;
  __sanitizer_finish_switch_fiber(s.fake_stack, &old_bottom, &old_size);
  if (s.current == nullptr) return;
  if (s.main_stack_bottom == nullptr) {
    s.main_stack_bottom = const_cast<void*>(old_bottom);
    s.main_stack_size = old_size;
  }
#endif
}

// ThreadSanitizer's view of the fibers (nothing in other builds): a fresh
// TSan fiber for `f` before a block, the switches, and the end of a finished
// or abandoned one.
void tsan_new_fiber(Fiber& f) {
#ifdef KILN_HOSTSIM_TSAN
  if (f.tsan != nullptr) __tsan_destroy_fiber(f.tsan);  // abandoned at a deadlock
  f.tsan = __tsan_create_fiber(0);
#else
  (void)f;
#endif
}

void tsan_switch_to(Scheduler& s, Fiber* f) {
#ifdef KILN_HOSTSIM_TSAN
  if (s.tsan_thread == nullptr) s.tsan_thread = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(f != nullptr ? f->tsan : s.tsan_thread, 0);
#else
  (void)s;
  (void)f;
#endif
}

void tsan_end_fiber(Fiber& f) {
#ifdef KILN_HOSTSIM_TSAN
  if (f.tsan != nullptr) __tsan_destroy_fiber(f.tsan);
  f.tsan = nullptr;
#else
  (void)f;
#endif
}

Scheduler::~Scheduler() {
  for (Fiber& f : fibers) tsan_end_fiber(f);
  if (stacks != nullptr) munmap(stacks, size_t{kMaxThreadsPerBlock} * kStackBytes);
}

uint8_t* stack_of(Scheduler& s, unsigned i) { return s.stacks + size_t{i} * kStackBytes; }

// A fiber hands control back to the scheduler.
void switch_to_scheduler(Scheduler& s, Fiber& f, bool finished) {
  ++s.stats.switches;
#ifdef KILN_HOSTEXEC_ASAN
  // A finished fiber's fake stack is dropped (nullptr), as ASan asks.
  void** save = finished ? nullptr : &s.fake_stack;
  __sanitizer_start_switch_fiber(save, s.main_stack_bottom, s.main_stack_size);
#endif
  tsan_switch_to(s, nullptr);
  swapcontext(&f.context, &s.main_context);
  finish_switch(s);
}

void fiber_main() {
  Scheduler& s = g_scheduler;
  finish_switch(s);
  Fiber& f = *s.current;
  s.run->fn(s.run->args);
  f.wait = Wait::kDone;
  BlockRun& run = *s.run;
  --run.live;
  --run.warp_live[f.linear / kWarp];
  // Exited threads count as arrived: release barriers they were the last for.
  if (run.live > 0 && run.block.arrived == run.live) {
    run.block.arrived = 0;
    ++run.block.generation;
  }
  Barrier& warp = run.warps[f.linear / kWarp];
  if (run.warp_live[f.linear / kWarp] > 0 && warp.arrived == run.warp_live[f.linear / kWarp]) {
    warp.arrived = 0;
    ++warp.generation;
  }
  switch_to_scheduler(s, f, true);
  abort();  // a finished fiber is never resumed
}

bool runnable(const Scheduler& s, const Fiber& f) {
  switch (f.wait) {
    case Wait::kNone: return true;
    case Wait::kDone: return false;
    case Wait::kBlockBarrier: return s.run->block.generation != f.generation;
    case Wait::kWarpBarrier: return s.run->warps[f.linear / kWarp].generation != f.generation;
  }
  return false;
}

// Arrives at `barrier` (of `members` live threads) and waits until released.
void arrive(Barrier& barrier, unsigned members, Wait kind) {
  Scheduler& s = g_scheduler;
  Fiber& f = *s.current;
  if (++barrier.arrived >= members) {
    barrier.arrived = 0;
    ++barrier.generation;
    return;
  }
  f.wait = kind;
  f.generation = barrier.generation;
  switch_to_scheduler(s, f, false);
  f.wait = Wait::kNone;
}

// Runs one block to completion. False on a deadlock.
bool run_block(Scheduler& s, BlockRun& run, dim3 grid, dim3 block, uint3 block_idx) {
  s.run = &run;
  for (unsigned i = 0; i < run.threads; ++i) {
    Fiber& f = s.fibers[i];
    f.thread.thread_idx = {i % block.x, i / block.x % block.y, i / (block.x * block.y)};
    f.thread.block_idx = block_idx;
    f.thread.block_dim = block;
    f.thread.grid_dim = grid;
    f.wait = Wait::kNone;
    f.linear = i;
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = stack_of(s, i);
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_main, 0);
    tsan_new_fiber(f);
  }
  run.live = run.threads;
  for (unsigned w = 0; w * kWarp < run.threads; ++w) {
    const unsigned rest = run.threads - w * kWarp;
    run.warp_live[w] = rest < kWarp ? rest : kWarp;
    run.warps[w] = Barrier();
  }
  run.block = Barrier();
  while (run.live > 0) {
    bool progressed = false;
    for (unsigned t = 0; t < run.threads; ++t) {
      Fiber& f = s.fibers[t];
      if (!runnable(s, f)) continue;
      progressed = true;
      s.current = &f;
      ++s.stats.switches;
      start_switch(s, stack_of(s, t), kStackBytes);
      tsan_switch_to(s, &f);
      swapcontext(&s.main_context, &f.context);
      finish_switch(s);
      s.current = nullptr;
      if (f.wait == Wait::kDone) tsan_end_fiber(f);
    }
    if (!progressed) {
      ++s.stats.deadlocks;
      fprintf(stderr,
              "hostexec: deadlock in block (%u,%u,%u): %u of %u threads wait at a barrier the others cannot "
              "reach\n",
              block_idx.x, block_idx.y, block_idx.z, run.live, run.threads);
      return false;
    }
  }
  return true;
}

// --- Streams and graphs: synchronous, with capture recording. ---

struct Node {
  enum Kind { kKernel, kCopy, kMemset } kind = kKernel;
  dim3 grid, block;
  KernelFn fn = nullptr;
  std::vector<uint8_t> args;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  int value = 0;
};

void run_node(const Node& n);

}  // namespace

struct Graph {
  std::vector<Node> nodes;
};

struct Stream {
  Graph* capturing = nullptr;
  bool invalidated = false;
};

namespace {

void execute_launch(dim3 grid, dim3 block, KernelFn fn, const void* args) {
  Scheduler& s = g_scheduler;
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535) {
    s.last_error = cudaErrorInvalidConfiguration;
    return;
  }
  if (s.stacks == nullptr) {
    void* p = mmap(nullptr, size_t{kMaxThreadsPerBlock} * kStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      s.last_error = cudaErrorMemoryAllocation;
      return;
    }
    s.stacks = static_cast<uint8_t*>(p);
  }
  ++s.stats.launches;
  // Kept for the thread's lifetime, like its stacks, and freed when the
  // thread ends (ranks run as threads in the tests).
  static thread_local std::unique_ptr<BlockRun> run_ptr;
  if (run_ptr == nullptr) run_ptr = std::make_unique<BlockRun>();
  BlockRun& run = *run_ptr;
  run.fn = fn;
  run.args = args;
  run.threads = static_cast<unsigned>(threads);
  run.trapped = false;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        if (!run_block(s, run, grid, block, {x, y, z}) || run.trapped) {
          s.last_error = cudaErrorLaunchFailure;
          s.run = nullptr;
          return;
        }
      }
    }
  }
  s.run = nullptr;
}

void run_node(const Node& n) {
  switch (n.kind) {
    case Node::kKernel: execute_launch(n.grid, n.block, n.fn, n.args.data()); break;
    case Node::kCopy: memmove(n.dst, n.src, n.bytes); break;
    case Node::kMemset: memset(n.dst, n.value, n.bytes); break;
  }
}

thread_local uint32_t g_failing_launches = 0;
thread_local void (*g_capture_hook)(void*) = nullptr;
thread_local void* g_capture_hook_arg = nullptr;

// Records `n` when `stream` captures, else runs it.
cudaError_t submit(cudaStream_t stream, Node n) {
  if (stream != nullptr && stream->capturing != nullptr) {
    ++g_scheduler.stats.captured;
    stream->capturing->nodes.push_back(std::move(n));
    return cudaSuccess;
  }
  run_node(n);
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  const char* env = getenv("KILN_HOSTEXEC_DEVICES");
  *count = env != nullptr ? atoi(env) : 4;
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return cudaErrorNoDevice;
  return device >= 0 && device < count ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  *ptr = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void* ptr) {
  free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  Node n;
  n.kind = Node::kCopy;
  n.dst = dst;
  n.src = src;
  n.bytes = bytes;
  return submit(stream, std::move(n));
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  Node n;
  n.kind = Node::kMemset;
  n.dst = dst;
  n.value = value;
  n.bytes = bytes;
  return submit(stream, std::move(n));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  *stream = new Stream();
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return stream != nullptr && stream->capturing != nullptr ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (stream == nullptr || stream->capturing != nullptr) return cudaErrorStreamCaptureUnsupported;
  stream->capturing = new Graph();
  stream->invalidated = false;
  if (g_capture_hook != nullptr) g_capture_hook(g_capture_hook_arg);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (stream == nullptr || stream->capturing == nullptr) return cudaErrorStreamCaptureInvalidated;
  *graph = stream->capturing;
  stream->capturing = nullptr;
  if (stream->invalidated) {
    delete *graph;
    *graph = nullptr;
    return cudaErrorStreamCaptureInvalidated;
  }
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (graph == nullptr) return cudaErrorInvalidValue;
  *exec = new Graph(*graph);
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return cudaErrorInvalidValue;
  ++g_scheduler.stats.graph_launches;
  for (const Node& n : exec->nodes) {
    run_node(n);
    if (g_scheduler.last_error != cudaSuccess) return g_scheduler.last_error;
  }
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

void fail_next_launches(uint32_t count) { g_failing_launches = count; }

void set_capture_hook(void (*hook)(void* arg), void* arg) {
  g_capture_hook = hook;
  g_capture_hook_arg = arg;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = g_scheduler.last_error;
  g_scheduler.last_error = cudaSuccess;
  return e;
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorLaunchFailure: return "unspecified launch failure (hostexec: a deadlock or __trap())";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
  }
  return "unknown error";
}

void launch(dim3 grid, dim3 block, cudaStream_t stream, KernelFn fn, const void* args, size_t args_bytes) {
  if (g_failing_launches > 0) {
    --g_failing_launches;
    g_scheduler.last_error = cudaErrorLaunchFailure;
    return;
  }
  Node n;
  n.kind = Node::kKernel;
  n.grid = grid;
  n.block = block;
  n.fn = fn;
  n.args.assign(static_cast<const uint8_t*>(args), static_cast<const uint8_t*>(args) + args_bytes);
  submit(stream, std::move(n));
}

Stats& stats() { return g_scheduler.stats; }
void reset_stats() { g_scheduler.stats = Stats(); }

const ThreadContext& this_thread() { return g_scheduler.current->thread; }

void syncthreads() {
  Scheduler& s = g_scheduler;
  arrive(s.run->block, s.run->live, Wait::kBlockBarrier);
}

void syncwarp() {
  Scheduler& s = g_scheduler;
  const unsigned w = s.current->linear / kWarp;
  arrive(s.run->warps[w], s.run->warp_live[w], Wait::kWarpBarrier);
}

int lane_id() { return static_cast<int>(g_scheduler.current->linear % kWarp); }

uint64_t shfl_bits(uint64_t bits, int src_lane) {
  Scheduler& s = g_scheduler;
  const unsigned me = s.current->linear;
  const unsigned base = me - me % kWarp;
  s.run->slots[me] = bits;
  syncwarp();  // every lane has published
  uint64_t out = bits;
  if (src_lane >= 0 && src_lane < static_cast<int>(kWarp) && base + src_lane < s.run->threads) {
    out = s.run->slots[base + src_lane];
  }
  syncwarp();  // every lane has read before a slot is written again
  return out;
}

void relax() { sched_yield(); }

uint64_t global_timer_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void trap() {
  Scheduler& s = g_scheduler;
  if (s.run != nullptr) s.run->trapped = true;
}

void yield() {
  Scheduler& s = g_scheduler;
  if (s.current == nullptr) return;
  switch_to_scheduler(s, *s.current, false);
}

}  // namespace kiln::backends::cuda::hostexec
