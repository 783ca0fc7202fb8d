#include "kiln/comm/cuda_ipc_communicator.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "bootstrap.h"
#include "kiln/comm/comm_util.h"
#include "kiln/comm/reduce.h"
#include "kiln/runtime/check.h"

namespace kiln {
namespace comm {
namespace {

constexpr uint64_t kControlMagic = 0x6b696c6e2d637469ull;  // "kiln-cti"
// Symmetric arenas mapped at once (one counter line each in the control block).
constexpr uint32_t kMaxSlots = 64;
// How often a waiting rank (and the watchdog) checks that its peers live.
constexpr uint64_t kLivenessPeriodNs = 10 * 1000 * 1000;
// all_reduce() stages each rank's operand through host memory in chunks of this.
constexpr uint64_t kChunkBytes = 1 << 20;
constexpr uint32_t kDefaultRendezvousTimeoutMs = 30000;

// One symmetric arena's line of a rank's control block: written by its
// owner only; `sequence` only grows.
struct SlotLine {
  alignas(64) uint64_t sequence;
  uint64_t input_offset;
  uint64_t count;
  uint64_t kind;  // dtype | op << 8
};

// A rank's control block (host shared memory, a memfd every rank maps).
struct Control {
  alignas(64) uint64_t magic;
  int32_t pid;
  uint32_t rank;
  // Nonzero once an all-reduce of this rank failed (a peer exited or was
  // late): it publishes no further step, so a peer waiting for it fails at
  // once instead of at the timeout, though this rank's process lives on.
  uint64_t gave_up;
  SlotLine slots[kMaxSlots];
};

uint64_t load_acquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void store_release(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t round_up(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

uint64_t control_bytes() { return round_up(sizeof(Control), static_cast<uint64_t>(sysconf(_SC_PAGESIZE))); }

// An integer from the environment; false when unset or not a number.
bool env_int(const char* name, int* out) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  const long value = strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 1 << 20) return false;
  *out = static_cast<int>(value);
  return true;
}

// The rendezvous: the option, else KILN_RENDEZVOUS, else (under mpirun) an
// abstract name from the job's PMIx namespace; empty when none.
std::string rendezvous_name(const std::string& option) {
  if (!option.empty()) return option;
  if (const char* env = getenv("KILN_RENDEZVOUS")) {
    if (*env != '\0') return env;
  }
  const char* job = getenv("PMIX_NAMESPACE");
  if (job == nullptr) job = getenv("OMPI_MCA_ess_base_jobid");
  if (job == nullptr || getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return "";
  return "@kiln-cuda-ipc-" + std::to_string(static_cast<unsigned>(getuid())) + "-" + job;
}

uint32_t rendezvous_timeout_ms(uint32_t option) {
  if (option != 0) return option;
  int value = 0;
  return env_int("KILN_RENDEZVOUS_TIMEOUT_MS", &value) && value > 0 ? static_cast<uint32_t>(value)
                                                                    : kDefaultRendezvousTimeoutMs;
}

}  // namespace

Error cuda_ipc_ranks_from_environment(int* out_rank, int* out_size, int* out_local_rank) {
  int rank = 0, size = 1, local = -1;
  if (env_int("KILN_WORLD_SIZE", &size)) {
    KILN_CHECK_OR_RETURN(env_int("KILN_RANK", &rank), Error::kInvalidArgument,
                         "cuda-ipc: KILN_WORLD_SIZE=%d is set but KILN_RANK is not a rank", size);
    if (!env_int("KILN_LOCAL_RANK", &local)) local = rank;
  } else if (env_int("OMPI_COMM_WORLD_SIZE", &size)) {
    KILN_CHECK_OR_RETURN(env_int("OMPI_COMM_WORLD_RANK", &rank), Error::kInvalidArgument,
                         "cuda-ipc: OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not");
    if (!env_int("OMPI_COMM_WORLD_LOCAL_RANK", &local)) local = rank;
  } else {
    size = 1;
    rank = 0;
    local = 0;
  }
  *out_rank = rank;
  *out_size = size;
  *out_local_rank = local;
  return Error::kOk;
}

struct CudaIpcCommunicator::State {
  struct Window {
    bool in_use = false;
    uint64_t size = 0;              // the arena's planned bytes
    uint64_t bytes = 0;             // mapped: size rounded up to the granularity
    std::vector<void*> bases;       // every rank's copy, as this device addresses it
    std::vector<uint64_t> handles;  // this rank's allocation and its imports of the peers'
  };

  internal::Bootstrap bootstrap;
  const CudaIpcDriver* driver = nullptr;
  uint64_t granularity = 1;
  uint32_t timeout_ms = 0;
  uint64_t timeout_ns = 0;
  // Every rank's control block, mapped here (this rank's own included).
  std::vector<Control*> controls;
  std::vector<int32_t> pids;
  std::vector<Window> windows;
  // Calls made on each slot since create(): e in the protocol. Never reset,
  // like the counters, when a slot is unmapped and mapped again.
  uint64_t slot_calls[kMaxSlots] = {};
  // all_reduce's host staging: a chunk per rank, and the whole result.
  std::vector<uint8_t> staging;
  std::vector<uint8_t> result;
  std::vector<const void*> inputs;
  // The watchdog of device collectives (device_peers).
  uint32_t* peer_exited = nullptr;
  std::atomic<bool> stop{false};
  std::thread watchdog;
};

CudaIpcCommunicator::CudaIpcCommunicator(const CudaIpcOptions& options, std::unique_ptr<State> state, uint32_t rank,
                                         uint32_t size, int device)
    : options_(options), state_(std::move(state)), rank_(rank), size_(size), device_(device) {}

namespace {

// Maps every rank's control block: each rank makes its own (a memfd),
// passes it to the others, and maps theirs. The pids come with it.
Error share_controls(internal::Bootstrap& bootstrap, uint32_t rank, uint32_t size, uint32_t timeout_ms,
                     std::vector<Control*>* out_controls, std::vector<int32_t>* out_pids) {
  const uint64_t bytes = control_bytes();
  const int fd = memfd_create("kiln-cuda-ipc-control", MFD_CLOEXEC);
  KILN_CHECK_OR_RETURN(fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) == 0, Error::kOutOfMemory,
                       "cuda-ipc: rank %u: cannot make its control block (memfd)", rank);
  std::vector<int> fds(size, -1);
  const Error passed = bootstrap.all_gather_fds(fd, fds.data(), timeout_ms, "passing the control blocks");
  fds[rank] = fd;
  if (passed != Error::kOk) {
    close(fd);
    return passed;
  }
  Error error = Error::kOk;
  out_controls->assign(size, nullptr);
  for (uint32_t r = 0; r < size && error == Error::kOk; ++r) {
    void* at = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[r], 0);
    if (at == MAP_FAILED) error = Error::kOutOfMemory;
    (*out_controls)[r] = at == MAP_FAILED ? nullptr : static_cast<Control*>(at);
  }
  for (int f : fds) {
    if (f >= 0) close(f);
  }
  KILN_CHECK_OR_RETURN(error == Error::kOk, error, "cuda-ipc: rank %u: mapping the control blocks failed", rank);
  Control* own = (*out_controls)[rank];
  own->pid = static_cast<int32_t>(getpid());
  own->rank = rank;
  own->magic = kControlMagic;
  // The pids, which is also the barrier after which every block is ready.
  out_pids->assign(size, 0);
  const int32_t pid = own->pid;
  KILN_RETURN_IF_ERROR(bootstrap.all_gather(&pid, sizeof(pid), out_pids->data(), timeout_ms, "exchanging pids"));
  for (uint32_t r = 0; r < size; ++r) {
    const Control* c = (*out_controls)[r];
    KILN_CHECK_OR_RETURN(c->magic == kControlMagic && c->rank == r && c->pid == (*out_pids)[r], Error::kInternal,
                         "cuda-ipc: rank %u: rank %u's control block is not what it said", rank, r);
  }
  return Error::kOk;
}

void unmap_controls(std::vector<Control*>& controls) {
  for (Control*& c : controls) {
    if (c != nullptr) munmap(c, control_bytes());
    c = nullptr;
  }
}

}  // namespace

Error CudaIpcCommunicator::create(const CudaIpcOptions& options, std::unique_ptr<CudaIpcCommunicator>* out) {
  KILN_CHECK_OR_RETURN(out != nullptr && options.driver != nullptr, Error::kInvalidArgument,
                       "cuda-ipc: create() without an output or a driver (CudaIpcOptions::driver)");
  int rank = options.rank, size = options.size, local = options.local_rank;
  if (rank < 0 || size < 0) {
    int env_local = -1;
    KILN_RETURN_IF_ERROR(cuda_ipc_ranks_from_environment(&rank, &size, &env_local));
    if (local < 0) local = env_local;
  }
  if (local < 0) local = rank;
  KILN_CHECK_OR_RETURN(
      size >= 1 && static_cast<uint32_t>(size) <= internal::kMaxBootstrapRanks && rank >= 0 && rank < size,
      Error::kInvalidArgument, "cuda-ipc: rank %d of %d ranks: not a rank of 1 to %u ranks", rank, size,
      internal::kMaxBootstrapRanks);
  auto state = std::make_unique<State>();
  state->driver = options.driver;
  state->timeout_ms = collective_timeout_ms(options.timeout_ms);
  state->timeout_ns = static_cast<uint64_t>(state->timeout_ms) * 1000000ull;
  const std::string rendezvous = rendezvous_name(options.rendezvous);
  KILN_CHECK_OR_RETURN(size == 1 || !rendezvous.empty(), Error::kInvalidArgument,
                       "cuda-ipc: rank %d of %d: no rendezvous: set KILN_RENDEZVOUS (a socket path, or @name for an "
                       "abstract socket) the same for every rank",
                       rank, size);
  const uint32_t r = static_cast<uint32_t>(rank), n = static_cast<uint32_t>(size);
  KILN_RETURN_IF_ERROR(state->bootstrap.open(r, n, rendezvous, rendezvous_timeout_ms(options.rendezvous_timeout_ms)));
  const Error shared = share_controls(state->bootstrap, r, n, state->timeout_ms, &state->controls, &state->pids);
  if (shared != Error::kOk) {
    unmap_controls(state->controls);
    return shared;
  }
  // Every rank opens its GPU, and learns whether all could.
  int device = 0;
  const Error opened = state->driver->open(local, &device, &state->granularity);
  uint32_t mine = opened == Error::kOk ? 1 : 0;
  std::vector<uint32_t> all(n, 0);
  Error error = state->bootstrap.all_gather(&mine, sizeof(mine), all.data(), state->timeout_ms, "opening the GPUs");
  for (uint32_t q = 0; q < n && error == Error::kOk; ++q) {
    if (all[q] == 0) {
      KILN_LOG(ERROR, "cuda-ipc: rank %u: rank %u could not open its GPU for shareable memory", r, q);
      error = Error::kNotSupported;
    }
  }
  if (error != Error::kOk) {
    unmap_controls(state->controls);
    return error;
  }
  state->inputs.resize(n);
  out->reset(new CudaIpcCommunicator(options, std::move(state), r, n, device));
  return Error::kOk;
}

CudaIpcCommunicator::~CudaIpcCommunicator() {
  if (state_->watchdog.joinable()) {
    state_->stop.store(true, std::memory_order_release);
    state_->watchdog.join();
  }
  for (size_t slot = 0; slot < state_->windows.size(); ++slot) {
    if (!state_->windows[slot].in_use) continue;
    SymmetricMemory memory;
    memory.local.handle = state_->windows[slot].bases[rank_];
    memory.slot = static_cast<uint32_t>(slot);
    unmap_symmetric(memory);
  }
  if (state_->peer_exited != nullptr) state_->driver->free_host_word(state_->peer_exited);
  unmap_controls(state_->controls);
}

namespace {

// Gathers one word per rank: kOk when every rank's is 1, else `error`,
// logged with the ranks whose is not.
Error all_ok(internal::Bootstrap& bootstrap, uint32_t rank, uint32_t size, bool ok, uint32_t timeout_ms,
             const char* what, uint32_t slot, Error error) {
  const uint32_t mine = ok ? 1 : 0;
  std::vector<uint32_t> all(size, 0);
  KILN_RETURN_IF_ERROR(bootstrap.all_gather(&mine, sizeof(mine), all.data(), timeout_ms, what));
  bool every = true;
  for (uint32_t r = 0; r < size; ++r) {
    if (all[r] != 0) continue;
    every = false;
    KILN_LOG(ERROR, "cuda-ipc: rank %u: symmetric arena %u: rank %u failed %s", rank, slot, r, what);
  }
  return every ? Error::kOk : error;
}

}  // namespace

Error CudaIpcCommunicator::map_symmetric(uint64_t size, uint32_t alignment, uint64_t layout_digest,
                                         SymmetricMemory* out_memory) {
  State& state = *state_;
  KILN_CHECK_OR_RETURN(out_memory != nullptr, Error::kInvalidArgument, "cuda-ipc: rank %u: map without an output",
                       rank_);
  KILN_CHECK_OR_RETURN(!failed_, Error::kPeerFailed, "cuda-ipc: rank %u: map refused: a collective failed earlier",
                       rank_);
  if (alignment == 0) alignment = 64;
  KILN_CHECK_OR_RETURN((alignment & (alignment - 1)) == 0 && alignment <= state.granularity, Error::kInvalidArgument,
                       "cuda-ipc: rank %u: symmetric arena alignment %u is not a power of two up to the allocation "
                       "granularity (%llu)",
                       rank_, alignment, static_cast<unsigned long long>(state.granularity));
  uint32_t slot = 0;
  while (slot < state.windows.size() && state.windows[slot].in_use) ++slot;
  KILN_CHECK_OR_RETURN(slot < kMaxSlots, Error::kNotSupported,
                       "cuda-ipc: rank %u: more than %u symmetric arenas mapped at once", rank_, kMaxSlots);

  // 1. Every rank must plan this arena alike (and be at the same slot).
  const uint64_t layout[3] = {size, layout_digest, slot};
  std::vector<uint64_t> layouts(3 * static_cast<size_t>(size_));
  KILN_RETURN_IF_ERROR(
      state.bootstrap.all_gather(layout, sizeof(layout), layouts.data(), state.timeout_ms, "comparing layouts"));
  bool agree = true;
  for (uint32_t r = 0; r < size_; ++r) {
    if (layouts[3 * r] == size && layouts[3 * r + 1] == layout_digest && layouts[3 * r + 2] == slot) continue;
    agree = false;
    KILN_LOG(ERROR,
             "cuda-ipc: rank %u: symmetric arena %u: rank %u has %llu bytes, layout digest 0x%016llx (slot %llu)",
             rank_, slot, r, static_cast<unsigned long long>(layouts[3 * r]),
             static_cast<unsigned long long>(layouts[3 * r + 1]), static_cast<unsigned long long>(layouts[3 * r + 2]));
  }
  KILN_CHECK_OR_RETURN(agree, Error::kCommunicatorMismatch,
                       "cuda-ipc: rank %u: symmetric arena %u is planned differently across ranks (those above); this "
                       "rank has %llu bytes, layout digest 0x%016llx",
                       rank_, slot, static_cast<unsigned long long>(size),
                       static_cast<unsigned long long>(layout_digest));

  // 2. This rank's copy, exported; every rank learns whether all have one.
  State::Window window;
  window.size = size;
  window.bytes = round_up(size > 0 ? size : 1, state.granularity);
  uint64_t own = 0;
  int fd = -1;
  const bool made = state.driver->create(device_, window.bytes, &own, &fd) == Error::kOk;
  const Error all_made =
      all_ok(state.bootstrap, rank_, size_, made, state.timeout_ms, "allocating its copy", slot, Error::kOutOfMemory);
  if (all_made != Error::kOk) {
    if (made) {
      close(fd);
      state.driver->release(own);
    }
    return all_made;
  }
  // 3. The descriptors to every rank; 4. every copy imported and mapped.
  std::vector<int> fds(size_, -1);
  const Error passed =
      state.bootstrap.all_gather_fds(fd, fds.data(), state.timeout_ms, "passing the arena's file descriptors");
  close(fd);
  if (passed != Error::kOk) {
    state.driver->release(own);
    return passed;
  }
  window.bases.assign(size_, nullptr);
  bool mapped = true;
  for (uint32_t r = 0; r < size_; ++r) {
    uint64_t handle = own;
    if (r != rank_) {
      const bool imported = state.driver->import(fds[r], &handle) == Error::kOk;
      close(fds[r]);
      if (!imported) {
        mapped = false;
        continue;
      }
    }
    window.handles.push_back(handle);
    if (state.driver->map(device_, handle, window.bytes, state.granularity, &window.bases[r]) != Error::kOk) {
      window.bases[r] = nullptr;
      mapped = false;
    }
  }
  // 5. Zero this rank's copy; then every copy is zero before any rank
  //    goes on (the gather is the barrier).
  if (mapped) mapped = state.driver->zero(window.bases[rank_], window.bytes) == Error::kOk;
  const Error ready =
      all_ok(state.bootstrap, rank_, size_, mapped, state.timeout_ms, "mapping every copy", slot, Error::kNotSupported);
  if (ready != Error::kOk) {
    for (void* base : window.bases) {
      if (base != nullptr) state.driver->unmap(base, window.bytes);
    }
    for (uint64_t handle : window.handles) state.driver->release(handle);
    if (ready == Error::kPeerFailed) failed_ = true;
    return ready;
  }
  window.in_use = true;
  if (state.result.size() < size) state.result.resize(size);
  if (state.staging.empty()) state.staging.resize(kChunkBytes * size_);
  if (slot == state.windows.size()) {
    state.windows.push_back(std::move(window));
  } else {
    state.windows[slot] = std::move(window);
  }
  out_memory->local.handle = state.windows[slot].bases[rank_];
  out_memory->local.size = size;
  out_memory->slot = slot;
  return Error::kOk;
}

void CudaIpcCommunicator::unmap_symmetric(SymmetricMemory memory) {
  if (memory.slot >= state_->windows.size()) return;
  State::Window& window = state_->windows[memory.slot];
  if (!window.in_use || memory.local.handle != window.bases[rank_]) return;
  window.in_use = false;
  // Nothing to wait for: a peer still reading keeps the memory alive
  // through its own mapping.
  for (void* base : window.bases) {
    if (base != nullptr) state_->driver->unmap(base, window.bytes);
  }
  for (uint64_t handle : window.handles) state_->driver->release(handle);
  window.bases.clear();
  window.handles.clear();
}

Error CudaIpcCommunicator::device_peers(const SymmetricMemory& memory, DevicePeers* out_peers) {
  State& state = *state_;
  KILN_CHECK_OR_RETURN(out_peers != nullptr && memory.slot < state.windows.size() &&
                           state.windows[memory.slot].in_use &&
                           memory.local.handle == state.windows[memory.slot].bases[rank_],
                       Error::kInvalidArgument,
                       "cuda-ipc: rank %u: device peers of symmetric arena %u, which this communicator has not mapped",
                       rank_, memory.slot);
  if (!options_.device_peers || size_ > kMaxDevicePeers) return Error::kNotSupported;
  const State::Window& window = state.windows[memory.slot];
  for (uint32_t r = 0; r < size_; ++r) out_peers->bases[r] = window.bases[r];
  out_peers->count = size_;
  out_peers->timeout_ms = state.timeout_ms;
  // A kernel cannot see whether a peer process lives: a thread watches the
  // pids and tells the kernels through a word they poll.
  if (state.peer_exited == nullptr) {
    KILN_RETURN_IF_ERROR(state.driver->alloc_host_word(&state.peer_exited));
    State* s = state_.get();
    const uint32_t self = rank_;
    state.watchdog = std::thread([s, self] {
      while (!s->stop.load(std::memory_order_acquire)) {
        for (uint32_t r = 0; r < s->pids.size(); ++r) {
          if (r != self && process_exited(s->pids[r])) {
            __atomic_store_n(s->peer_exited, r + 1, __ATOMIC_RELEASE);
            return;
          }
        }
        std::this_thread::sleep_for(std::chrono::nanoseconds(kLivenessPeriodNs));
      }
    });
  }
  out_peers->peer_exited = state.peer_exited;
  return Error::kOk;
}

// Until every peer's sequence on `slot` reaches `target`; a peer that exits
// or is late fails the communicator.
Error CudaIpcCommunicator::wait_peers(uint32_t slot, uint64_t target, uint64_t call, const char* step) {
  State& state = *state_;
  const uint64_t start = now_ns();
  uint64_t next_check = start + kLivenessPeriodNs;
  for (uint32_t p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const uint64_t* sequence = &state.controls[p]->slots[slot].sequence;
    while (load_acquire(sequence) < target) {
      if (load_acquire(&state.controls[p]->gave_up) != 0) {
        give_up();
        KILN_RETURN_ERROR(Error::kPeerFailed,
                          "cuda-ipc: rank %u: peer rank %u (pid %d) gave up on all-reduce #%llu of symmetric arena %u "
                          "before it could %s it: a rank failed there",
                          rank_, p, state.pids[p], static_cast<unsigned long long>(call), slot, step);
      }
      sched_yield();
      const uint64_t now = now_ns();
      if (now < next_check) continue;
      next_check = now + kLivenessPeriodNs;
      if (process_exited(state.pids[p])) {
        give_up();
        KILN_RETURN_ERROR(Error::kPeerFailed,
                          "cuda-ipc: rank %u: peer rank %u (pid %d) exited; it did not %s all-reduce #%llu on "
                          "symmetric arena %u",
                          rank_, p, state.pids[p], step, static_cast<unsigned long long>(call), slot);
      }
      if (now - start > state.timeout_ns) {
        give_up();
        KILN_RETURN_ERROR(Error::kPeerFailed,
                          "cuda-ipc: rank %u: peer rank %u (pid %d) did not %s all-reduce #%llu on symmetric arena "
                          "%u within %u ms (KILN_COLLECTIVE_TIMEOUT_MS)",
                          rank_, p, state.pids[p], step, static_cast<unsigned long long>(call), slot, state.timeout_ms);
      }
    }
  }
  return Error::kOk;
}

Error CudaIpcCommunicator::check_peers_agree(uint32_t slot, uint64_t call) const {
  const SlotLine& own = state_->controls[rank_]->slots[slot];
  for (uint32_t p = 0; p < size_; ++p) {
    const SlotLine& peer = state_->controls[p]->slots[slot];
    KILN_CHECK_OR_RETURN(
        peer.input_offset == own.input_offset && peer.count == own.count && peer.kind == own.kind,
        Error::kCommunicatorMismatch,
        "cuda-ipc: rank %u: all-reduce #%llu on symmetric arena %u: rank %u called it with offset "
        "%llu, count %llu, dtype %llu, op %llu; this rank with offset %llu, count %llu, dtype %llu, "
        "op %llu",
        rank_, static_cast<unsigned long long>(call), slot, p, static_cast<unsigned long long>(peer.input_offset),
        static_cast<unsigned long long>(peer.count), static_cast<unsigned long long>(peer.kind & 0xff),
        static_cast<unsigned long long>(peer.kind >> 8), static_cast<unsigned long long>(own.input_offset),
        static_cast<unsigned long long>(own.count), static_cast<unsigned long long>(own.kind & 0xff),
        static_cast<unsigned long long>(own.kind >> 8));
  }
  return Error::kOk;
}

Error CudaIpcCommunicator::all_reduce(const AllReduceArgs& args) {
  State& state = *state_;
  KILN_CHECK_OR_RETURN(!failed_, Error::kPeerFailed,
                       "cuda-ipc: rank %u: all-reduce refused: a collective failed earlier", rank_);
  const uint32_t slot = args.memory.slot;
  KILN_CHECK_OR_RETURN(slot < state.windows.size() && state.windows[slot].in_use &&
                           args.memory.local.handle == state.windows[slot].bases[rank_],
                       Error::kInvalidArgument,
                       "cuda-ipc: rank %u: all-reduce on symmetric arena %u, which this communicator has not mapped",
                       rank_, slot);
  KILN_CHECK_OR_RETURN(internal::reducible(args.dtype, args.op), Error::kNotSupported,
                       "cuda-ipc: rank %u: all-reduce of %s with reduce op %u is not supported (float32, float16, "
                       "bfloat16, int32)",
                       rank_, dtype_name(args.dtype), static_cast<unsigned>(args.op));
  const State::Window& window = state.windows[slot];
  KILN_RETURN_IF_ERROR(check_all_reduce_operands(name(), rank_, args, static_cast<const uint8_t*>(window.bases[rank_]),
                                                 window.size, true));
  const uint64_t call = state.slot_calls[slot]++;
  SlotLine& own = state.controls[rank_]->slots[slot];
  own.input_offset = args.input_offset;
  own.count = args.count;
  own.kind = static_cast<uint64_t>(args.dtype) | static_cast<uint64_t>(args.op) << 8;
  // Arrive: this rank's operand is written (the device's queued work done).
  Error done = state.driver->synchronize();
  store_release(&own.sequence, 2 * call + 1);
  KILN_RETURN_IF_ERROR(wait_peers(slot, 2 * call + 1, call, "arrive at"));
  const Error agreed = check_peers_agree(slot, call);
  // Read: every operand, chunk by chunk, reduced in rank order.
  const uint64_t element = dtype_size(args.dtype);
  const uint64_t per_chunk = kChunkBytes / element;
  for (uint64_t begin = 0; agreed == Error::kOk && done == Error::kOk && begin < args.count; begin += per_chunk) {
    const uint64_t n = args.count - begin < per_chunk ? args.count - begin : per_chunk;
    for (uint32_t p = 0; p < size_ && done == Error::kOk; ++p) {
      uint8_t* staged = state.staging.data() + p * kChunkBytes;
      done = state.driver->copy(
          staged, static_cast<const uint8_t*>(window.bases[p]) + args.input_offset + begin * element, n * element);
      state.inputs[p] = staged;
    }
    if (done == Error::kOk) {
      (void)internal::reduce(args.dtype, args.op, state.inputs.data(), size_, state.result.data() + begin * element, 0,
                             static_cast<size_t>(n));
    }
  }
  // Read done everywhere: nobody reads an operand any more, so the output
  // (which may be the input) can be written.
  store_release(&own.sequence, 2 * call + 2);
  KILN_RETURN_IF_ERROR(wait_peers(slot, 2 * call + 2, call, "finish reading"));
  KILN_RETURN_IF_ERROR(agreed);
  if (done == Error::kOk && args.count > 0)
    done = state.driver->copy(args.output, state.result.data(), args.count * element);
  if (done != Error::kOk) give_up();
  return done;
}

// Failed: later calls are refused, and peers waiting for this rank's next
// step stop waiting (Control::gave_up).
void CudaIpcCommunicator::give_up() {
  failed_ = true;
  store_release(&state_->controls[rank_]->gave_up, 1);
}

}  // namespace comm
}  // namespace kiln
