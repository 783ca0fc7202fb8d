#include "kiln/comm/mpi_communicator.h"

#include <errno.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kiln/comm/mpi_status.h"
#include "kiln/comm/reduce.h"

namespace kiln {
namespace comm {
namespace {

constexpr uint64_t kControlMagic = 0x6b696c6e2d73686dull;  // "kiln-shm"
// How often a waiting rank checks that the peer it waits for still exists.
constexpr uint64_t kLivenessPeriodNs = 10 * 1000 * 1000;
// Pause instructions before the first sched_yield(), when every rank has a core.
constexpr uint32_t kSpinIterations = 2000;

// The steps of one call (the header's protocol); sequence = 3e + step.
enum Step : uint64_t { kArrive = 1, kReduced = 2, kDepart = 3 };

enum Algorithm : uint32_t {
  kOneShot = 0,
  kTwoShotInPlace = 1,        // the reduced slices go into the input
  kTwoShotThroughOutput = 2,  // into the output, which is in the arena
};

const char* algorithm_name(uint32_t algorithm) {
  switch (algorithm) {
    case kOneShot: return "one-shot";
    case kTwoShotInPlace: return "two-shot in place";
    default: return "two-shot through the output";
  }
}

const char* step_verb(uint64_t step) {
  switch (step) {
    case kArrive: return "arrive at";
    case kReduced: return "reduce its slice of";
    default: return "depart from";
  }
}

// One rank's control block, after its arena in its segment. Line 0 is
// written by its owner and polled by every peer; line 1 is written once
// (gave_up at most once more).
struct ControlBlock {
  alignas(64) uint64_t sequence;
  // The current call's arguments, for the check that every rank agrees.
  uint64_t input_offset;
  uint64_t count;
  uint64_t result_offset;  // two-shot: where the reduced slices lie
  uint32_t kind;           // dtype | op << 8 | algorithm << 16
  alignas(64) uint64_t magic;
  int32_t pid;
  uint32_t rank;
  // 1 + the call this rank's all-reduce failed in (a peer exited or was
  // late): it will not publish another step, so a peer waiting for it
  // fails at once instead of at the timeout, though this rank's process
  // lives on. 0: it has not failed.
  uint64_t gave_up;
};
static_assert(sizeof(ControlBlock) == 128, "two cache lines");

uint64_t load_acquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void store_release(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) & ~(alignment - 1); }

uint32_t cpu_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<uint32_t>(CPU_COUNT(&set));
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<uint32_t>(n) : 1;
}

}  // namespace

struct MpiCommunicator::State {
  struct Window {
    bool in_use = false;
    MPI_Win win = MPI_WIN_NULL;
    uint64_t size = 0;
    // Calls made on this window: e in the protocol.
    uint64_t calls = 0;
    std::vector<uint8_t*> arenas;         // every rank's arena
    std::vector<ControlBlock*> controls;  // every rank's control block
  };

  MPI_Comm node = MPI_COMM_NULL;
  // The node leaders (node rank 0 of each node), on leaders only, with more
  // than one node.
  MPI_Comm leaders = MPI_COMM_NULL;
  std::vector<Window> windows;
  // The watchdog of device collectives (device_peers): the peers' pids (0
  // for this rank), the word it sets to r + 1 when rank r exits (which the
  // kernels read), and its thread, stopped and joined at destruction.
  std::vector<int32_t> peer_pids;
  alignas(64) uint32_t peer_exited = 0;
  std::atomic<bool> stop{false};
  std::thread watchdog;
  // Scratch for all_reduce's input pointers (one per rank), sized at create.
  std::vector<const void*> inputs;
  uint64_t timeout_ns = 0;
  uint32_t timeout_ms = 0;
  uint32_t spin_iterations = 0;
};

namespace {

// Backs off while a wait lasts, checks the awaited peer's liveness, and
// ends the wait at the timeout.
class Backoff {
 public:
  Backoff(uint32_t spin_iterations, uint64_t timeout_ns) : spins_left_(spin_iterations), timeout_ns_(timeout_ns) {}

  // kOk to keep waiting; kPeerFailed (not logged) when `pid` is gone
  // (*out_exited) or the time is up.
  Error pause(int32_t pid, bool* out_exited) {
    checked_ = false;
    if (spins_left_ > 0) {
      --spins_left_;
      cpu_relax();
      return Error::kOk;
    }
    sched_yield();
    const uint64_t now = now_ns();
    if (start_ == 0) {
      start_ = now;
      next_check_ = now + kLivenessPeriodNs;
      return Error::kOk;
    }
    if (now >= next_check_) {
      next_check_ = now + kLivenessPeriodNs;
      checked_ = true;
      if (pid > 0 && process_exited(pid)) {
        *out_exited = true;
        return Error::kPeerFailed;
      }
    }
    if (now - start_ > timeout_ns_) {
      *out_exited = false;
      return Error::kPeerFailed;
    }
    return Error::kOk;
  }

  // Whether the last pause() checked `pid`'s liveness (one in each
  // kLivenessPeriodNs).
  bool checked() const { return checked_; }

 private:
  bool checked_ = false;
  uint32_t spins_left_;
  uint64_t timeout_ns_;
  uint64_t start_ = 0;
  uint64_t next_check_ = 0;
};

}  // namespace

MpiCommunicator::MpiCommunicator(const MpiOptions& options, std::unique_ptr<State> state, uint32_t rank, uint32_t size,
                                 uint32_t world_rank, uint32_t world_size, uint32_t nodes)
    : options_(options),
      state_(std::move(state)),
      rank_(rank),
      size_(size),
      world_rank_(world_rank),
      world_size_(world_size),
      nodes_(nodes) {}

Error MpiCommunicator::create(const MpiOptions& options, std::unique_ptr<MpiCommunicator>* out) {
  KILN_CHECK_OR_RETURN(out != nullptr, Error::kInvalidArgument, "mpi-shm: create() without an output");
  MpiSession session;
  KILN_RETURN_IF_ERROR(session.open());
  const int world_rank = session.world_rank(), world_size = session.world_size();
  const uint32_t per_node = options.ranks_per_node;
  KILN_CHECK_OR_RETURN(per_node == 0 || world_size % static_cast<int>(per_node) == 0, Error::kNotSupported,
                       "mpi-shm: rank %d: %u ranks per node do not divide the %d ranks", world_rank, per_node,
                       world_size);
  MPI_Comm node = MPI_COMM_NULL;
  if (per_node > 0) {
    KILN_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, world_rank / static_cast<int>(per_node), world_rank, &node),
                   Error::kNotSupported, "mpi-shm: rank %d: splitting the ranks into nodes of %u", world_rank,
                   per_node);
  } else {
    KILN_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node),
                   Error::kNotSupported, "mpi-shm: rank %d: splitting off the ranks of this node", world_rank);
  }
  int node_size = 1, node_rank = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_rank(node, &node_rank);
  // The leaders: node rank 0 of each node; every rank learns how many.
  MPI_Comm leaders = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, node_rank == 0 ? 0 : MPI_UNDEFINED, world_rank, &leaders);
  const int leader = node_rank == 0 ? 1 : 0;
  int nodes = 1;
  MPI_Allreduce(&leader, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (nodes == 1 && leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
  if (leaders != MPI_COMM_NULL) MPI_Comm_set_errhandler(leaders, MPI_ERRORS_RETURN);
  if (nodes > 1 && world_rank == 0) {
    KILN_LOG(INFO,
             "mpi-shm: %d ranks on %d nodes: each node reduces through its shared-memory windows, node leaders "
             "through MPI_Allreduce, then each leader broadcasts to its node",
             world_size, nodes);
  }
  MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN);

  auto state = std::make_unique<State>();
  state->node = node;
  state->leaders = leaders;
  state->inputs.resize(static_cast<size_t>(node_size));
  state->timeout_ms = collective_timeout_ms(options.timeout_ms);
  state->timeout_ns = static_cast<uint64_t>(state->timeout_ms) * 1000000ull;
  // Spinning only helps while every rank has a core of its own; beyond that
  // it takes the core a late peer needs.
  state->spin_iterations = static_cast<uint32_t>(node_size) <= cpu_count() ? kSpinIterations : 0;
  out->reset(new MpiCommunicator(options, std::move(state), static_cast<uint32_t>(node_rank),
                                 static_cast<uint32_t>(node_size), static_cast<uint32_t>(world_rank),
                                 static_cast<uint32_t>(world_size), static_cast<uint32_t>(nodes)));
  session.keep();
  return Error::kOk;
}

MpiCommunicator::~MpiCommunicator() {
  if (state_->watchdog.joinable()) {
    state_->stop.store(true, std::memory_order_release);
    state_->watchdog.join();
  }
  for (size_t slot = 0; slot < state_->windows.size(); ++slot) {
    State::Window& window = state_->windows[slot];
    if (!window.in_use) continue;
    SymmetricMemory memory;
    memory.local.handle = window.arenas[rank_];
    memory.local.size = window.size;
    memory.slot = static_cast<uint32_t>(slot);
    unmap_symmetric(memory);
  }
  if (!failed_) {
    MPI_Comm_free(&state_->node);
    if (state_->leaders != MPI_COMM_NULL) MPI_Comm_free(&state_->leaders);
  }
  mpi_session_release(!failed_);
}

Error MpiCommunicator::map_symmetric(uint64_t size, uint32_t alignment, uint64_t layout_digest,
                                     SymmetricMemory* out_memory) {
  KILN_CHECK_OR_RETURN(out_memory != nullptr, Error::kInvalidArgument, "mpi-shm: rank %u: map without an output",
                       rank_);
  if (alignment == 0) alignment = 64;
  KILN_CHECK_OR_RETURN((alignment & (alignment - 1)) == 0, Error::kInvalidArgument,
                       "mpi-shm: rank %u: symmetric arena alignment %u is not a power of two", rank_, alignment);
  if (alignment < 64) alignment = 64;
  const uint32_t slot_index = [&] {
    for (size_t i = 0; i < state_->windows.size(); ++i) {
      if (!state_->windows[i].in_use) return static_cast<uint32_t>(i);
    }
    return static_cast<uint32_t>(state_->windows.size());
  }();

  // 1. Every rank must plan this arena alike: compare sizes and digests
  //    (the node communicator is the world, in the same order).
  KILN_RETURN_IF_ERROR(mpi_compare_layouts(name(), slot_index, size, layout_digest));

  // 2. The window: one segment per rank, its arena aligned within it and the
  //    control block after it (the picture in the header).
  const uint64_t segment = (alignment - 1) + align_up(size, 64) + 63 + sizeof(ControlBlock);
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void* base = nullptr;
  MPI_Win win = MPI_WIN_NULL;
  const int status = MPI_Win_allocate_shared(static_cast<MPI_Aint>(segment), 1, info, state_->node, &base, &win);
  MPI_Info_free(&info);
  KILN_CHECK_OR_RETURN(status == MPI_SUCCESS, Error::kOutOfMemory,
                       "mpi-shm: rank %u: MPI_Win_allocate_shared of %llu bytes for symmetric arena %u: %s", rank_,
                       static_cast<unsigned long long>(segment), slot_index, mpi_error_string(status));
  const uintptr_t base_address = reinterpret_cast<uintptr_t>(base);
  const uint64_t arena_offset = align_up(base_address, alignment) - base_address;
  const uint64_t control_offset = align_up(base_address + arena_offset + size, 64) - base_address;
  const uint64_t offsets_mine[2] = {arena_offset, control_offset};
  std::vector<uint64_t> offsets(2 * static_cast<size_t>(size_));
  MPI_Allgather(offsets_mine, 2, MPI_UINT64_T, offsets.data(), 2, MPI_UINT64_T, state_->node);

  State::Window window;
  window.in_use = true;
  window.win = win;
  window.size = size;
  window.arenas.resize(size_);
  window.controls.resize(size_);
  for (uint32_t r = 0; r < size_; ++r) {
    MPI_Aint peer_bytes = 0;
    int displacement_unit = 0;
    void* peer_base = nullptr;
    MPI_Win_shared_query(win, static_cast<int>(r), &peer_bytes, &displacement_unit, &peer_base);
    uint8_t* peer = static_cast<uint8_t*>(peer_base);
    window.arenas[r] = peer + offsets[2 * r];
    window.controls[r] = reinterpret_cast<ControlBlock*>(peer + offsets[2 * r + 1]);
  }
  ControlBlock* own = window.controls[rank_];
  memset(own, 0, sizeof(*own));
  // Zero before the barrier below: a device all-reduce kernel's signal
  // words start from zero on every rank (Communicator::device_peers).
  memset(window.arenas[rank_], 0, size);
  own->magic = kControlMagic;
  own->pid = static_cast<int32_t>(getpid());
  own->rank = rank_;
  // A passive-target epoch for the life of the window (MPI_Win_sync in
  // barrier mode needs one); then every control block is initialised before
  // any rank looks at a peer's.
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  MPI_Win_sync(win);
  MPI_Barrier(state_->node);
  MPI_Win_sync(win);
  uint32_t misplaced = 0;
  while (misplaced < size_ && window.controls[misplaced]->magic == kControlMagic &&
         window.controls[misplaced]->rank == misplaced) {
    ++misplaced;
  }
  if (misplaced < size_) {
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
  }
  KILN_CHECK_OR_RETURN(misplaced == size_, Error::kInternal,
                       "mpi-shm: rank %u: rank %u's control block of symmetric arena %u is not where it should be",
                       rank_, misplaced, slot_index);

  if (slot_index == state_->windows.size()) {
    state_->windows.push_back(std::move(window));
  } else {
    state_->windows[slot_index] = std::move(window);
  }
  out_memory->local.handle = state_->windows[slot_index].arenas[rank_];
  out_memory->local.size = size;
  out_memory->slot = slot_index;
  return Error::kOk;
}

void MpiCommunicator::unmap_symmetric(SymmetricMemory memory) {
  if (memory.slot >= state_->windows.size()) return;
  State::Window& window = state_->windows[memory.slot];
  if (!window.in_use) return;
  window.in_use = false;
  if (failed_) return;  // MPI_Win_free waits for every rank, the failed one too
  MPI_Win_unlock_all(window.win);
  MPI_Win_free(&window.win);
  window.arenas.clear();
  window.controls.clear();
}

Error MpiCommunicator::device_peers(const SymmetricMemory& memory, DevicePeers* out_peers) {
  KILN_CHECK_OR_RETURN(out_peers != nullptr && memory.slot < state_->windows.size() &&
                           state_->windows[memory.slot].in_use &&
                           memory.local.handle == state_->windows[memory.slot].arenas[rank_],
                       Error::kInvalidArgument,
                       "mpi-shm: rank %u: device peers of symmetric arena %u, which this "
                       "communicator has not mapped",
                       rank_, memory.slot);
  if (options_.memory == DeviceType::CPU || !options_.device_peers || nodes_ > 1 || size_ > kMaxDevicePeers) {
    return Error::kNotSupported;
  }
  const State::Window& window = state_->windows[memory.slot];
  for (uint32_t r = 0; r < size_; ++r) out_peers->bases[r] = window.arenas[r];
  out_peers->count = size_;
  out_peers->timeout_ms = state_->timeout_ms;
  // A kernel cannot see whether a peer process lives: a thread watches them
  // (every kLivenessPeriodNs, as a host wait does) and tells the kernels
  // through the word they poll.
  if (!state_->watchdog.joinable()) {
    state_->peer_pids.assign(size_, 0);
    for (uint32_t r = 0; r < size_; ++r) {
      if (r != rank_) state_->peer_pids[r] = window.controls[r]->pid;
    }
    State* state = state_.get();
    state->watchdog = std::thread([state] {
      while (!state->stop.load(std::memory_order_acquire)) {
        for (size_t r = 0; r < state->peer_pids.size(); ++r) {
          if (state->peer_pids[r] > 0 && process_exited(state->peer_pids[r])) {
            __atomic_store_n(&state->peer_exited, static_cast<uint32_t>(r + 1), __ATOMIC_RELEASE);
            return;
          }
        }
        std::this_thread::sleep_for(std::chrono::nanoseconds(kLivenessPeriodNs));
      }
    });
  }
  out_peers->peer_exited = &state_->peer_exited;
  return Error::kOk;
}

namespace {

// Who waits for whom, for the message when a peer fails.
struct Waiting {
  const std::vector<ControlBlock*>& controls;
  uint32_t rank;
  uint32_t slot;
  uint64_t call;
};

// The first peer that gave up (ControlBlock::gave_up), or w.rank when none did.
uint32_t peer_that_gave_up(const Waiting& w, uint32_t size) {
  for (uint32_t p = 0; p < size; ++p) {
    if (p != w.rank && __atomic_load_n(&w.controls[p]->gave_up, __ATOMIC_ACQUIRE) != 0) return p;
  }
  return w.rank;
}

// kPeerFailed, logged: `peer` gave up after a failure of its own.
Error report_gave_up(const Waiting& w, uint32_t peer, uint64_t step) {
  KILN_RETURN_ERROR(Error::kPeerFailed,
                    "mpi-shm: rank %u: peer rank %u (pid %d) gave up on all-reduce #%llu of symmetric arena %u "
                    "before it could %s it: a rank failed there",
                    w.rank, peer, w.controls[peer]->pid, static_cast<unsigned long long>(w.call), w.slot,
                    step_verb(step));
}

// kPeerFailed, logged: the peer exited, or did not reach `step` in time.
Error report_failure(const Waiting& w, uint32_t peer, uint64_t step, bool exited, uint32_t timeout_ms) {
  KILN_CHECK_OR_RETURN(!exited, Error::kPeerFailed,
                       "mpi-shm: rank %u: peer rank %u (pid %d) exited; it did not %s all-reduce #%llu on symmetric "
                       "arena %u",
                       w.rank, peer, w.controls[peer]->pid, step_verb(step), static_cast<unsigned long long>(w.call),
                       w.slot);
  KILN_RETURN_ERROR(Error::kPeerFailed,
                    "mpi-shm: rank %u: peer rank %u (pid %d) did not %s all-reduce #%llu on symmetric arena %u within "
                    "%u ms (KILN_COLLECTIVE_TIMEOUT_MS)",
                    w.rank, peer, w.controls[peer]->pid, step_verb(step), static_cast<unsigned long long>(w.call),
                    w.slot, timeout_ms);
}

}  // namespace

// One all-reduce on a mapped window, its arguments checked (check_call).
struct MpiCommunicator::Call {
  const AllReduceArgs* args = nullptr;
  State::Window* window = nullptr;
  uint8_t* output = nullptr;
  uint64_t element = 0;  // bytes per element
  uint32_t algorithm = kOneShot;
  uint64_t result_offset = 0;  // two-shot: where every rank's reduced slices lie
  uint64_t index = 0;          // the window's calls before this one: e in the protocol
};

Error MpiCommunicator::check_call(const AllReduceArgs& args, Call* out_call) {
  State& state = *state_;
  KILN_CHECK_OR_RETURN(!failed_, Error::kPeerFailed,
                       "mpi-shm: rank %u: all-reduce refused: a collective failed earlier", rank_);
  KILN_CHECK_OR_RETURN(args.memory.slot < state.windows.size() && state.windows[args.memory.slot].in_use &&
                           args.memory.local.handle == state.windows[args.memory.slot].arenas[rank_],
                       Error::kInvalidArgument,
                       "mpi-shm: rank %u: all-reduce on symmetric arena %u, which this communicator has not mapped",
                       rank_, args.memory.slot);
  State::Window& window = state.windows[args.memory.slot];
  KILN_CHECK_OR_RETURN(internal::reducible(args.dtype, args.op), Error::kNotSupported,
                       "mpi-shm: rank %u: all-reduce of %s with reduce op %u is not supported (float32, float16, "
                       "bfloat16, int32)",
                       rank_, dtype_name(args.dtype), static_cast<unsigned>(args.op));
  uint8_t* arena = window.arenas[rank_];
  KILN_RETURN_IF_ERROR(check_all_reduce_operands(name(), rank_, args, arena, window.size, true));
  const uint64_t element = dtype_size(args.dtype);
  const uint64_t bytes = args.count * element;
  uint8_t* output = static_cast<uint8_t*>(args.output);
  const bool in_place = output == arena + args.input_offset;
  Call& call = *out_call;
  call.args = &args;
  call.window = &window;
  call.output = output;
  call.element = element;
  // The algorithm (the header's protocol). An output elsewhere in the arena
  // is where peers can read reduced slices from, at the same offset.
  const bool output_in_arena = bytes > 0 && output >= arena && output + bytes <= arena + window.size;
  if (in_place) {
    call.algorithm = kTwoShotInPlace;
    call.result_offset = args.input_offset;
  } else if (output_in_arena && bytes >= options_.two_shot_min_bytes) {
    call.algorithm = kTwoShotThroughOutput;
    call.result_offset = static_cast<uint64_t>(output - arena);
  }
  return Error::kOk;
}

// Publishes step `which` of the call as this rank's sequence and waits
// until every peer's is at least as far (or, in barrier mode, until every
// rank reaches the node barrier). A peer that exits or is late fails the
// communicator.
Error MpiCommunicator::step(const Call& call, uint64_t which) {
  const uint64_t target = 3 * call.index + which;
  store_release(&call.window->controls[rank_]->sequence, target);
  const Error error =
      options_.sync == MpiSync::kBarrier ? wait_barrier(call, target, which) : wait_flags(call, target, which);
  if (error != Error::kOk) {
    failed_ = true;
    // Peers waiting for this rank's next step stop waiting.
    __atomic_store_n(&call.window->controls[rank_]->gave_up, call.index + 1, __ATOMIC_RELEASE);
  }
  return error;
}

Error MpiCommunicator::wait_flags(const Call& call, uint64_t target, uint64_t which) {
  const State::Window& window = *call.window;
  Backoff backoff(state_->spin_iterations, state_->timeout_ns);
  bool exited = false;
  for (uint32_t p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const uint64_t* sequence = &window.controls[p]->sequence;
    while (load_acquire(sequence) < target) {
      if (__atomic_load_n(&window.controls[p]->gave_up, __ATOMIC_ACQUIRE) != 0) {
        return report_gave_up({window.controls, rank_, call.args->memory.slot, call.index}, p, which);
      }
      if (backoff.pause(window.controls[p]->pid, &exited) != Error::kOk) {
        return report_failure({window.controls, rank_, call.args->memory.slot, call.index}, p, which, exited,
                              state_->timeout_ms);
      }
    }
  }
  return Error::kOk;
}

Error MpiCommunicator::wait_barrier(const Call& call, uint64_t target, uint64_t which) {
  const State::Window& window = *call.window;
  Backoff backoff(state_->spin_iterations, state_->timeout_ns);
  bool exited = false;
  MPI_Request request;
  MPI_Win_sync(window.win);
  MPI_Ibarrier(state_->node, &request);
  int done = 0;
  // Once every peer has published this step, the barrier may still wait on
  // any of them (its messages pass through every rank, and one that died
  // inside it holds up the others): each liveness check then looks at the
  // next peer in turn.
  uint32_t suspect = (rank_ + 1) % size_;
  for (;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) break;
    // A peer that failed elsewhere never completes the barrier (it may
    // have published this step before it gave up, and live on).
    const Waiting waiting{window.controls, rank_, call.args->memory.slot, call.index};
    const uint32_t gave_up = peer_that_gave_up(waiting, size_);
    if (gave_up != rank_) return report_gave_up(waiting, gave_up, which);
    // Name the first peer that has not published this step.
    uint32_t late = rank_;
    for (uint32_t p = 0; p < size_ && late == rank_; ++p) {
      if (p != rank_ && load_acquire(&window.controls[p]->sequence) < target) late = p;
    }
    if (late == rank_) late = suspect;
    if (backoff.pause(window.controls[late]->pid, &exited) != Error::kOk) {
      return report_failure({window.controls, rank_, call.args->memory.slot, call.index}, late, which, exited,
                            state_->timeout_ms);
    }
    if (backoff.checked() && late == suspect) {
      suspect = (suspect + 1) % size_;
      if (suspect == rank_) suspect = (suspect + 1) % size_;
    }
  }
  MPI_Win_sync(window.win);
  return Error::kOk;
}

// Every peer's descriptor of the call equals this rank's.
Error MpiCommunicator::check_peers_agree(const Call& call) const {
  const ControlBlock& own = *call.window->controls[rank_];
  for (uint32_t p = 0; p < size_; ++p) {
    const ControlBlock& peer = *call.window->controls[p];
    KILN_CHECK_OR_RETURN(peer.input_offset == own.input_offset && peer.count == own.count && peer.kind == own.kind &&
                             peer.result_offset == own.result_offset,
                         Error::kCommunicatorMismatch,
                         "mpi-shm: rank %u: all-reduce #%llu on symmetric arena %u: rank %u called it with offset "
                         "%llu, count %llu, dtype %u, op %u, %s (%llu); this rank with offset %llu, count %llu, dtype "
                         "%u, op %u, %s (%llu)",
                         rank_, static_cast<unsigned long long>(call.index), call.args->memory.slot, p,
                         static_cast<unsigned long long>(peer.input_offset),
                         static_cast<unsigned long long>(peer.count), peer.kind & 0xffu, (peer.kind >> 8) & 0xffu,
                         algorithm_name(peer.kind >> 16), static_cast<unsigned long long>(peer.result_offset),
                         static_cast<unsigned long long>(own.input_offset), static_cast<unsigned long long>(own.count),
                         own.kind & 0xffu, (own.kind >> 8) & 0xffu, algorithm_name(call.algorithm),
                         static_cast<unsigned long long>(call.result_offset));
  }
  return Error::kOk;
}

// One-shot: every input, read where it lies. Two-shot: slice r of every
// input into slice r of the result (this rank's input in place, else its
// output), then, after the reduce step, every other slice from its owner's
// result. Slices start on cache lines.
Error MpiCommunicator::reduce_into_output(const Call& call) {
  const AllReduceArgs& args = *call.args;
  const State::Window& window = *call.window;
  for (uint32_t p = 0; p < size_; ++p) state_->inputs[p] = window.arenas[p] + args.input_offset;
  const void* const* inputs = state_->inputs.data();
  const size_t count = static_cast<size_t>(args.count);
  if (call.algorithm == kOneShot) {
    (void)internal::reduce(args.dtype, args.op, inputs, size_, call.output, 0, count);
    return Error::kOk;
  }
  const size_t per_line = 64 / call.element;
  const size_t slice = ((count + size_ - 1) / size_ + per_line - 1) / per_line * per_line;
  auto begin_of = [&](uint32_t r) { return static_cast<size_t>(r) * slice < count ? r * slice : count; };
  (void)internal::reduce(args.dtype, args.op, inputs, size_, call.output, begin_of(rank_), begin_of(rank_ + 1));
  KILN_RETURN_IF_ERROR(step(call, kReduced));
  for (uint32_t p = 0; p < size_; ++p) {
    const size_t begin = begin_of(p), end = begin_of(p + 1);
    if (p == rank_ || end <= begin) continue;
    memcpy(call.output + begin * call.element, window.arenas[p] + call.result_offset + begin * call.element,
           (end - begin) * call.element);
  }
  return Error::kOk;
}

Error MpiCommunicator::all_reduce(const AllReduceArgs& args) {
  if (nodes_ == 1) return node_all_reduce(args);
  KILN_CHECK_OR_RETURN(args.dtype == DType::FLOAT32 || args.dtype == DType::INT32, Error::kNotSupported,
                       "mpi-shm: rank %u: all-reduce of %s across %u nodes: float32 and int32 only (MPI has no "
                       "16-bit float types)",
                       world_rank_, dtype_name(args.dtype), nodes_);
  // The node's own all-reduce; an average is a sum until the end.
  AllReduceArgs local = args;
  if (args.op == fb::ReduceOp::AVERAGE) local.op = fb::ReduceOp::SUM;
  KILN_RETURN_IF_ERROR(node_all_reduce(local));
  KILN_RETURN_IF_ERROR(across_nodes(local));
  if (args.op != fb::ReduceOp::AVERAGE) return Error::kOk;
  if (args.dtype == DType::FLOAT32) {
    float* out = static_cast<float*>(args.output);
    for (uint64_t i = 0; i < args.count; ++i) out[i] /= static_cast<float>(world_size_);
  } else {
    int32_t* out = static_cast<int32_t*>(args.output);
    for (uint64_t i = 0; i < args.count; ++i) out[i] /= static_cast<int32_t>(world_size_);
  }
  return Error::kOk;
}

// Polls `request` (an MPI_Request) until it completes or the collective
// timeout passes; where the node waits for its leader, checks the leader's
// liveness as a flag wait does.
Error MpiCommunicator::wait_request(void* request, const char* what, bool leader_alive_check) {
  MPI_Request* r = static_cast<MPI_Request*>(request);
  Backoff backoff(state_->spin_iterations, state_->timeout_ns);
  const ControlBlock* leader = nullptr;
  for (const State::Window& w : state_->windows) {
    if (w.in_use && !w.controls.empty()) leader = w.controls[0];
  }
  bool exited = false;
  for (;;) {
    int done = 0;
    const int status = MPI_Test(r, &done, MPI_STATUS_IGNORE);
    if (status != MPI_SUCCESS) {
      failed_ = true;
      KILN_RETURN_ERROR(Error::kPeerFailed, "mpi-shm: rank %u: %s failed: %s", world_rank_, what,
                        mpi_error_string(status));
    }
    if (done) return Error::kOk;
    const int32_t pid = leader_alive_check && leader != nullptr ? leader->pid : 0;
    if (backoff.pause(pid, &exited) != Error::kOk) {
      failed_ = true;
      KILN_CHECK_OR_RETURN(!exited, Error::kPeerFailed, "mpi-shm: rank %u: its node's leader (pid %d) exited in %s",
                           world_rank_, pid, what);
      KILN_RETURN_ERROR(Error::kPeerFailed,
                        "mpi-shm: rank %u: %s did not complete within %u ms (KILN_COLLECTIVE_TIMEOUT_MS): a rank "
                        "of another node failed or is late",
                        world_rank_, what, state_->timeout_ms);
    }
  }
}

Error MpiCommunicator::across_nodes(const AllReduceArgs& args) {
  const MPI_Datatype type = args.dtype == DType::FLOAT32 ? MPI_FLOAT : MPI_INT32_T;
  MPI_Op op = MPI_SUM;
  if (args.op == fb::ReduceOp::PROD) op = MPI_PROD;
  if (args.op == fb::ReduceOp::MAXIMUM) op = MPI_MAX;
  if (args.op == fb::ReduceOp::MINIMUM) op = MPI_MIN;
  KILN_CHECK_OR_RETURN(args.count <= 0x7fffffffu, Error::kNotSupported,
                       "mpi-shm: rank %u: all-reduce of %llu elements across nodes (MPI counts are int)", world_rank_,
                       static_cast<unsigned long long>(args.count));
  const int count = static_cast<int>(args.count);
  MPI_Request request = MPI_REQUEST_NULL;
  if (state_->leaders != MPI_COMM_NULL) {
    KILN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, args.output, count, type, op, state_->leaders, &request),
                   Error::kInternal, "mpi-shm: rank %u: MPI_Iallreduce between node leaders", world_rank_);
    KILN_RETURN_IF_ERROR(wait_request(&request, "the all-reduce between node leaders", false));
  }
  KILN_MPI_CHECK(MPI_Ibcast(args.output, count, type, 0, state_->node, &request), Error::kInternal,
                 "mpi-shm: rank %u: MPI_Ibcast from the node leader", world_rank_);
  return wait_request(&request, "the broadcast from the node leader", rank_ != 0);
}

Error MpiCommunicator::node_all_reduce(const AllReduceArgs& args) {
  Call call;
  KILN_RETURN_IF_ERROR(check_call(args, &call));
  call.index = call.window->calls++;
  // Arrive: the call's arguments first, for the check that every rank agrees.
  ControlBlock& own = *call.window->controls[rank_];
  own.input_offset = args.input_offset;
  own.count = args.count;
  own.result_offset = call.result_offset;
  own.kind = static_cast<uint32_t>(args.dtype) | static_cast<uint32_t>(args.op) << 8 | call.algorithm << 16;
  KILN_RETURN_IF_ERROR(step(call, kArrive));
  // Ranks that called differently all see it and depart without reading,
  // so the communicator stays usable.
  const Error agreed = check_peers_agree(call);
  if (agreed == Error::kOk) KILN_RETURN_IF_ERROR(reduce_into_output(call));
  KILN_RETURN_IF_ERROR(step(call, kDepart));
  return agreed;
}

}  // namespace comm
}  // namespace kiln
