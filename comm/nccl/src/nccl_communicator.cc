#include "kiln/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <sched.h>
#include <time.h>

#include <vector>

#include "kiln/comm/comm_util.h"
#include "nccl_peers.h"
#include "nccl_status.h"

namespace kiln {
namespace comm {
namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Every rank learns whether all succeeded (collective over the world).
bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// A step every rank takes together: this rank's outcome `mine` (logged
// where it failed), or, when it succeeded but another rank failed,
// kDeviceError saying `what` failed there. Collective over the world.
Error on_all_ranks(Error mine, int rank, const char* what) {
  const bool all = all_ranks(mine == Error::kOk);
  KILN_RETURN_IF_ERROR(mine);
  KILN_CHECK_OR_RETURN(all, Error::kDeviceError, "nccl: rank %d: %s failed on another rank", rank, what);
  return Error::kOk;
}

// Selects this rank's device: `wanted`, or its local device (node rank
// modulo the devices: rank_local_device, the rule the CUDA backend's cuda:0
// follows too).
Error select_device(int rank, int node_rank, int wanted, int* out_device) {
  int devices = 0;
  KILN_CUDA_CHECK(cudaGetDeviceCount(&devices), Error::kDeviceError, "nccl: rank %d: no usable CUDA device", rank);
  const int device = wanted >= 0 ? wanted : rank_local_device(node_rank, devices);
  KILN_CHECK_OR_RETURN(devices > 0 && device < devices, Error::kDeviceError,
                       "nccl: rank %d: no usable CUDA device (%d found, device %d wanted)", rank, devices, device);
  KILN_CUDA_CHECK(cudaSetDevice(device), Error::kDeviceError, "nccl: rank %d: selecting device %d", rank, device);
  *out_device = device;
  return Error::kOk;
}

bool nccl_dtype(DType dtype, ncclDataType_t* out) {
  switch (dtype) {
    case DType::FLOAT32: *out = ncclFloat32; return true;
    case DType::FLOAT16: *out = ncclFloat16; return true;
    case DType::BFLOAT16: *out = ncclBfloat16; return true;
    case DType::FLOAT64: *out = ncclFloat64; return true;
    case DType::INT8: *out = ncclInt8; return true;
    case DType::UINT8: *out = ncclUint8; return true;
    case DType::INT32: *out = ncclInt32; return true;
    case DType::UINT32: *out = ncclUint32; return true;
    case DType::INT64: *out = ncclInt64; return true;
    case DType::UINT64: *out = ncclUint64; return true;
    default: return false;
  }
}

bool nccl_op(fb::ReduceOp op, ncclRedOp_t* out) {
  switch (op) {
    case fb::ReduceOp::SUM: *out = ncclSum; return true;
    case fb::ReduceOp::PROD: *out = ncclProd; return true;
    case fb::ReduceOp::MAXIMUM: *out = ncclMax; return true;
    case fb::ReduceOp::MINIMUM: *out = ncclMin; return true;
    case fb::ReduceOp::AVERAGE: *out = ncclAvg; return true;
  }
  return false;
}

}  // namespace

struct NcclCommunicator::Arena {
  bool in_use = false;
  void* allocation = nullptr;  // what to free
  void* base = nullptr;        // aligned: SymmetricMemory::local.handle
  uint64_t size = 0;
  ncclWindow_t window = nullptr;  // null: ordinary memory
  // Every rank's copy, as this device addresses it (device_peers); 0:
  // none (ordinary memory, or ranks outside the LSA team).
  void* peers[kMaxDevicePeers] = {};
  uint32_t peer_count = 0;
};

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<Arena> arenas;
  bool symmetric = true;
  bool said_no_peers = false;  // the log line saying why, once
  uint64_t timeout_ns = 0;
  uint32_t timeout_ms = 0;
};

NcclCommunicator::NcclCommunicator(std::unique_ptr<State> state, uint32_t rank, uint32_t size, int device)
    : state_(std::move(state)), rank_(rank), size_(size), device_(device) {}

bool NcclCommunicator::symmetric_windows() const { return state_->symmetric; }

Error NcclCommunicator::create(const NcclOptions& options, std::unique_ptr<NcclCommunicator>* out) {
  KILN_CHECK_OR_RETURN(out != nullptr, Error::kInvalidArgument, "nccl: create() without an output");
  MpiSession session;
  KILN_RETURN_IF_ERROR(session.open());
  const int rank = session.world_rank(), size = session.world_size();

  // 1. A device on every rank, or all ranks give up together.
  int node_rank = 0;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_free(&node);
  int device = 0;
  KILN_RETURN_IF_ERROR(
      on_all_ranks(select_device(rank, node_rank, options.device, &device), rank, "finding a usable CUDA device"));

  // 2. The NCCL communicator: rank 0's unique id, broadcast over MPI.
  ncclUniqueId id;
  const Error unique = [&]() -> Error {
    if (rank == 0) KILN_NCCL_CHECK(ncclGetUniqueId(&id), Error::kDeviceError, "nccl: rank 0: a unique id");
    return Error::kOk;
  }();
  KILN_RETURN_IF_ERROR(on_all_ranks(unique, rank, "making the unique id (rank 0)"));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  auto state = std::make_unique<State>();
  const Error joined = [&]() -> Error {
    KILN_NCCL_CHECK(ncclCommInitRank(&state->comm, size, id, rank), Error::kDeviceError,
                    "nccl: rank %d: joining %d ranks", rank, size);
    KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking), Error::kDeviceError,
                    "nccl: rank %d: a stream", rank);
    return Error::kOk;
  }();
  const Error everyone = on_all_ranks(joined, rank, "starting NCCL");
  if (everyone != Error::kOk) {
    // Abort before anything that could wait on NCCL's work.
    if (state->comm != nullptr) ncclCommAbort(state->comm);
    if (state->stream != nullptr) cudaStreamDestroy(state->stream);
    return everyone;
  }

  int version = 0;
  ncclGetVersion(&version);
  state->symmetric = options.symmetric_windows && version >= 22700;
  if (options.symmetric_windows && !state->symmetric && rank == 0) {
    KILN_LOG(WARNING, "nccl: NCCL %d has no symmetric windows (2.27 or later); arenas are ordinary device memory",
             version);
  }
  state->timeout_ms = collective_timeout_ms(options.timeout_ms);
  state->timeout_ns = static_cast<uint64_t>(state->timeout_ms) * 1000000ull;
  out->reset(new NcclCommunicator(std::move(state), static_cast<uint32_t>(rank), static_cast<uint32_t>(size), device));
  session.keep();
  return Error::kOk;
}

NcclCommunicator::~NcclCommunicator() {
  for (size_t slot = 0; slot < state_->arenas.size(); ++slot) {
    if (!state_->arenas[slot].in_use) continue;
    SymmetricMemory memory;
    memory.local.handle = state_->arenas[slot].base;
    memory.local.size = state_->arenas[slot].size;
    memory.slot = static_cast<uint32_t>(slot);
    unmap_symmetric(memory);
  }
  // After a failure the NCCL communicator was aborted where it failed
  // (abort_now); otherwise it is finalised before its stream goes.
  if (state_->comm != nullptr) {
    ncclCommFinalize(state_->comm);
    ncclCommDestroy(state_->comm);
  }
  if (state_->stream != nullptr) cudaStreamDestroy(state_->stream);
  mpi_session_release(!failed_);
}

Error NcclCommunicator::map_symmetric(uint64_t size, uint32_t alignment, uint64_t layout_digest,
                                      SymmetricMemory* out_memory) {
  KILN_CHECK_OR_RETURN(out_memory != nullptr, Error::kInvalidArgument, "nccl: rank %u: map without an output", rank_);
  KILN_CHECK_OR_RETURN(!failed_, Error::kPeerFailed, "nccl: rank %u: map refused: a collective failed earlier", rank_);
  if (alignment == 0) alignment = 256;
  KILN_CHECK_OR_RETURN((alignment & (alignment - 1)) == 0, Error::kInvalidArgument,
                       "nccl: rank %u: symmetric arena alignment %u is not a power of two", rank_, alignment);
  uint32_t slot = 0;
  while (slot < state_->arenas.size() && state_->arenas[slot].in_use) ++slot;
  KILN_RETURN_IF_ERROR(mpi_compare_layouts(name(), slot, size, layout_digest));

  Arena arena;
  arena.size = size;
  // Room to align (ncclMemAlloc's granularity is at least 4 KiB, so
  // only alignments beyond that need it).
  const uint64_t bytes = (size == 0 ? 1 : size) + (alignment > 256 ? alignment : 0);
  if (state_->symmetric) {
    // 1. A symmetric window, on every rank or on none. Registering is
    //    collective: every rank must have its memory before any registers.
    ncclResult_t result = ncclMemAlloc(&arena.allocation, bytes);
    bool ok = all_ranks(result == ncclSuccess);
    if (ok) {
      result = ncclCommWindowRegister(state_->comm, arena.allocation, bytes, &arena.window, NCCL_WIN_COLL_SYMMETRIC);
      ok = all_ranks(result == ncclSuccess && arena.window != nullptr);
    }
    if (!ok) {
      if (rank_ == 0) {
        KILN_LOG(WARNING,
                 "nccl: symmetric memory is unavailable (ncclCommWindowRegister on rank %u: %s%s); symmetric arenas "
                 "are ordinary device memory and all-reduces run NCCL's ordinary algorithms from now on",
                 rank_, ncclGetErrorString(result),
                 result == ncclSuccess ? ", here it worked but not on every rank" : "");
      }
      if (arena.window != nullptr) (void)ncclCommWindowDeregister(state_->comm, arena.window);
      if (arena.allocation != nullptr) (void)ncclMemFree(arena.allocation);
      arena.allocation = nullptr;
      arena.window = nullptr;
      state_->symmetric = false;
    }
  }
  if (arena.allocation == nullptr) {
    // 2. Ordinary device memory.
    const cudaError_t allocated = cudaMalloc(&arena.allocation, bytes);
    const bool everywhere = all_ranks(allocated == cudaSuccess);
    if (!everywhere && allocated == cudaSuccess) cudaFree(arena.allocation);
    KILN_CHECK_OR_RETURN(everywhere, Error::kDeviceAllocationFailed,
                         "nccl: rank %u: cudaMalloc of %llu bytes for symmetric arena %u: %s", rank_,
                         static_cast<unsigned long long>(bytes), slot, cudaGetErrorString(allocated));
  }
  const uintptr_t address = reinterpret_cast<uintptr_t>(arena.allocation);
  arena.base = reinterpret_cast<void*>((address + alignment - 1) & ~static_cast<uintptr_t>(alignment - 1));
  // 3. Zero on every rank before any rank returns (the device kernels'
  //    signal words start from zero), and the peers' addresses.
  const Error ready =
      on_all_ranks(zero_and_find_peers(bytes, &arena), static_cast<int>(rank_), "zeroing a symmetric arena");
  if (ready != Error::kOk) {
    release(arena, true);
    return ready;
  }
  arena.in_use = true;
  if (slot == state_->arenas.size()) {
    state_->arenas.push_back(arena);
  } else {
    state_->arenas[slot] = arena;
  }
  out_memory->local.handle = arena.base;
  out_memory->local.size = size;
  out_memory->slot = slot;
  return Error::kOk;
}

// Zeroes a new arena's bytes and, for a window, reads every rank's address
// of it through NCCL's device API where all ranks are load/store
// accessible; says once why not otherwise.
Error NcclCommunicator::zero_and_find_peers(uint64_t bytes, Arena* arena) {
  KILN_CUDA_CHECK(cudaMemset(arena->allocation, 0, bytes), Error::kDeviceError,
                  "nccl: rank %u: zeroing a symmetric arena of %llu bytes", rank_,
                  static_cast<unsigned long long>(bytes));
  KILN_CUDA_CHECK(cudaDeviceSynchronize(), Error::kDeviceError, "nccl: rank %u: zeroing a symmetric arena", rank_);
  int lsa_ranks = 0;
  if (arena->window != nullptr) lsa_ranks = internal::nccl_lsa_ranks(state_->comm);
  const char* why = device_peers_unavailable(arena->window != nullptr, static_cast<uint32_t>(lsa_ranks), size_);
  if (why != nullptr) {
    if (!state_->said_no_peers && rank_ == 0) {
      KILN_LOG(INFO,
               "nccl: no device peers (%s: %d of %u ranks load/store accessible); device collectives run "
               "ncclAllReduce on the CUDA backend's stream",
               why, lsa_ranks, size_);
    }
    state_->said_no_peers = true;
    return Error::kOk;
  }
  const size_t offset =
      static_cast<size_t>(static_cast<uint8_t*>(arena->base) - static_cast<uint8_t*>(arena->allocation));
  KILN_CUDA_CHECK(internal::nccl_window_peers(arena->window, offset, static_cast<int>(size_), arena->peers),
                  Error::kDeviceError, "nccl: rank %u: reading the peers' addresses of a symmetric window", rank_);
  // This rank's own copy as it maps it (DevicePeers: bases[rank] is
  // SymmetricMemory::local); NCCL's is another address of the same memory.
  arena->peers[rank_] = arena->base;
  arena->peer_count = size_;
  return Error::kOk;
}

// Frees an arena's memory; `collective`: deregisters its window (every rank
// does, together), which a failed communicator skips (it was aborted).
void NcclCommunicator::release(const Arena& arena, bool collective) {
  if (arena.window != nullptr) {
    if (collective && !failed_) (void)ncclCommWindowDeregister(state_->comm, arena.window);
    (void)ncclMemFree(arena.allocation);
  } else if (arena.allocation != nullptr) {
    cudaFree(arena.allocation);
  }
}

void NcclCommunicator::unmap_symmetric(SymmetricMemory memory) {
  if (memory.slot >= state_->arenas.size() || !state_->arenas[memory.slot].in_use) return;
  Arena& arena = state_->arenas[memory.slot];
  arena.in_use = false;
  // After a failure nothing waits on the device: the communicator was
  // aborted, and a stuck kernel must not turn teardown into a hang.
  // Otherwise whatever read the arena (all_reduce() on the communicator's
  // stream, a device collective on the backend's) is done first.
  if (!failed_) cudaDeviceSynchronize();
  release(arena, true);
  arena = Arena();
}

Error NcclCommunicator::device_peers(const SymmetricMemory& memory, DevicePeers* out_peers) {
  KILN_CHECK_OR_RETURN(
      out_peers != nullptr && memory.slot < state_->arenas.size() && state_->arenas[memory.slot].in_use &&
          memory.local.handle == state_->arenas[memory.slot].base,
      Error::kInvalidArgument,
      "nccl: rank %u: device peers of symmetric arena %u, which this communicator has not mapped", rank_, memory.slot);
  const Arena& arena = state_->arenas[memory.slot];
  if (arena.peer_count == 0) return Error::kNotSupported;
  for (uint32_t r = 0; r < arena.peer_count; ++r) out_peers->bases[r] = arena.peers[r];
  out_peers->count = arena.peer_count;
  out_peers->timeout_ms = state_->timeout_ms;
  out_peers->peer_exited = nullptr;  // NCCL watches no processes: the timeout ends a wait
  return Error::kOk;
}

// One all-reduce, its arguments checked (check_call).
struct NcclCommunicator::Call {
  const uint8_t* input = nullptr;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
};

Error NcclCommunicator::check_call(const AllReduceArgs& args, Call* out_call) const {
  KILN_CHECK_OR_RETURN(!failed_, Error::kPeerFailed, "nccl: rank %u: all-reduce refused: a collective failed earlier",
                       rank_);
  KILN_CHECK_OR_RETURN(args.memory.slot < state_->arenas.size() && state_->arenas[args.memory.slot].in_use &&
                           args.memory.local.handle == state_->arenas[args.memory.slot].base,
                       Error::kInvalidArgument,
                       "nccl: rank %u: all-reduce on symmetric arena %u, which this communicator has not mapped", rank_,
                       args.memory.slot);
  const Arena& arena = state_->arenas[args.memory.slot];
  KILN_CHECK_OR_RETURN(nccl_dtype(args.dtype, &out_call->dtype) && nccl_op(args.op, &out_call->op),
                       Error::kNotSupported, "nccl: rank %u: all-reduce of %s with reduce op %u is not supported",
                       rank_, dtype_name(args.dtype), static_cast<unsigned>(args.op));
  const uint8_t* input = static_cast<const uint8_t*>(arena.base);
  KILN_RETURN_IF_ERROR(check_all_reduce_operands(name(), rank_, args, input, arena.size, false));
  input += args.input_offset;
  out_call->input = input;
  return Error::kOk;
}

// Waits for the all-reduce on the communicator's stream, watching NCCL's
// asynchronous errors and the clock.
Error NcclCommunicator::wait_for_stream() {
  const uint64_t start = now_ns();
  for (;;) {
    const cudaError_t cuda = cudaStreamQuery(state_->stream);
    if (cuda == cudaSuccess) return Error::kOk;
    KILN_CHECK_OR_RETURN(cuda == cudaErrorNotReady, Error::kDeviceError,
                         "nccl: rank %u: all-reduce failed on the device: %s", rank_, cudaGetErrorString(cuda));
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(state_->comm, &async);
    KILN_CHECK_OR_RETURN(async == ncclSuccess || async == ncclInProgress, Error::kPeerFailed,
                         "nccl: rank %u: all-reduce failed: %s (%s)", rank_, ncclGetErrorString(async),
                         ncclGetLastError(state_->comm));
    KILN_CHECK_OR_RETURN(now_ns() - start <= state_->timeout_ns, Error::kPeerFailed,
                         "nccl: rank %u: all-reduce did not finish within %u ms (KILN_COLLECTIVE_TIMEOUT_MS): a peer "
                         "failed or is stuck; aborting the NCCL communicator",
                         rank_, state_->timeout_ms);
    sched_yield();
  }
}

Error NcclCommunicator::run_all_reduce(const AllReduceArgs& args, const Call& call) {
  // The input was written on whatever stream its producer used.
  KILN_CUDA_CHECK(cudaDeviceSynchronize(), Error::kDeviceError,
                  "nccl: rank %u: the device failed before the all-reduce", rank_);
  const ncclResult_t result = ncclAllReduce(call.input, args.output, static_cast<size_t>(args.count), call.dtype,
                                            call.op, state_->comm, state_->stream);
  KILN_CHECK_OR_RETURN(result == ncclSuccess, result == ncclRemoteError ? Error::kPeerFailed : Error::kDeviceError,
                       "nccl: rank %u: ncclAllReduce: %s (%s)", rank_, ncclGetErrorString(result),
                       ncclGetLastError(state_->comm));
  return wait_for_stream();
}

void NcclCommunicator::abort_now() {
  failed_ = true;
  if (state_->comm == nullptr) return;
  ncclCommAbort(state_->comm);
  state_->comm = nullptr;
}

Error NcclCommunicator::enqueue_all_reduce(const AllReduceArgs& args, void* stream) {
  Call call;
  KILN_RETURN_IF_ERROR(check_call(args, &call));
  if (stream == nullptr) return Error::kOk;
  const ncclResult_t result = ncclAllReduce(call.input, args.output, static_cast<size_t>(args.count), call.dtype,
                                            call.op, state_->comm, static_cast<cudaStream_t>(stream));
  if (result == ncclSuccess) return Error::kOk;
  // Abort first, then say so: nothing may wait on the stream before.
  const char* last = ncclGetLastError(state_->comm);
  KILN_LOG(ERROR, "nccl: rank %u: ncclAllReduce on the CUDA backend's stream: %s (%s)", rank_,
           ncclGetErrorString(result), last != nullptr ? last : "");
  abort_now();
  return result == ncclRemoteError ? Error::kPeerFailed : Error::kDeviceError;
}

void NcclCommunicator::mark_failed() {
  if (!failed_) abort_now();
}

Error NcclCommunicator::all_reduce(const AllReduceArgs& args) {
  Call call;
  KILN_RETURN_IF_ERROR(check_call(args, &call));
  const Error done = run_all_reduce(args, call);
  // Abort first, on every failure path: NCCL's kernels stop, so nothing
  // that later waits on the stream or the device (unmapping, teardown) can
  // hang on a peer that will never arrive.
  if (done != Error::kOk) abort_now();
  return done;
}

}  // namespace comm
}  // namespace kiln
