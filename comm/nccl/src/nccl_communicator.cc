#include "kiln/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <sched.h>
#include <time.h>

#include <vector>

#include "kiln/runtime/log.h"

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

struct NcclCommunicator::State {
  struct Arena {
    bool in_use = false;
    void* allocation = nullptr;  // what to free
    void* base = nullptr;        // aligned: SymmetricMemory::local.handle
    uint64_t size = 0;
    ncclWindow_t window = nullptr;  // null: ordinary memory
  };
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<Arena> arenas;
  bool symmetric = true;
  uint64_t timeout_ns = 0;
  uint32_t timeout_ms = 0;
};

NcclCommunicator::NcclCommunicator(std::unique_ptr<State> state, uint32_t rank, uint32_t size, int device)
    : state_(std::move(state)), rank_(rank), size_(size), device_(device) {}

bool NcclCommunicator::symmetric_windows() const { return state_->symmetric; }

Error NcclCommunicator::create(const NcclOptions& options, std::unique_ptr<NcclCommunicator>* out) {
  if (out == nullptr) return Error::kInvalidArgument;
  Error error = mpi_session_acquire();
  if (error != Error::kOk) return error;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  // 1. A device on every rank, or all ranks give up together.
  int node_rank = 0;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_free(&node);
  int devices = 0;
  const cudaError_t count_error = cudaGetDeviceCount(&devices);
  int device = options.device >= 0 ? options.device : (devices > 0 ? node_rank % devices : 0);
  bool ok = count_error == cudaSuccess && devices > 0 && device < devices;
  if (!ok) {
    KILN_LOG(ERROR, "nccl: rank %d: no usable CUDA device (%d found, device %d wanted%s%s)", rank, devices, device,
             count_error != cudaSuccess ? ": " : "", count_error != cudaSuccess ? cudaGetErrorString(count_error) : "");
  } else if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    KILN_LOG(ERROR, "nccl: rank %d: cudaSetDevice(%d): %s", rank, device, cudaGetErrorString(e));
    ok = false;
  }
  if (!all_ranks(ok)) {
    if (ok) KILN_LOG(ERROR, "nccl: rank %d: another rank has no usable CUDA device", rank);
    mpi_session_release(true);
    return Error::kDeviceError;
  }

  // 2. The NCCL communicator: rank 0's unique id, broadcast over MPI.
  ncclUniqueId id;
  ncclResult_t result = ncclSuccess;
  if (rank == 0) result = ncclGetUniqueId(&id);
  if (!all_ranks(result == ncclSuccess)) {
    KILN_LOG(ERROR, "nccl: rank %d: ncclGetUniqueId failed on rank 0: %s", rank, ncclGetErrorString(result));
    mpi_session_release(true);
    return Error::kDeviceError;
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  auto state = std::make_unique<State>();
  result = ncclCommInitRank(&state->comm, size, id, rank);
  if (result != ncclSuccess) {
    KILN_LOG(ERROR, "nccl: rank %d: ncclCommInitRank(%d ranks): %s", rank, size, ncclGetErrorString(result));
  }
  cudaError_t stream_error = cudaSuccess;
  if (result == ncclSuccess) stream_error = cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking);
  if (stream_error != cudaSuccess)
    KILN_LOG(ERROR, "nccl: rank %d: cudaStreamCreate: %s", rank, cudaGetErrorString(stream_error));
  if (!all_ranks(result == ncclSuccess && stream_error == cudaSuccess)) {
    if (state->stream != nullptr) cudaStreamDestroy(state->stream);
    if (state->comm != nullptr) ncclCommAbort(state->comm);
    mpi_session_release(true);
    return Error::kDeviceError;
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
  if (state_->stream != nullptr) cudaStreamDestroy(state_->stream);
  if (failed_) {
    ncclCommAbort(state_->comm);
  } else {
    ncclCommFinalize(state_->comm);
    ncclCommDestroy(state_->comm);
  }
  mpi_session_release(!failed_);
}

Error NcclCommunicator::map_symmetric(uint64_t size, uint32_t alignment, uint64_t layout_digest,
                                      SymmetricMemory* out_memory) {
  if (out_memory == nullptr) return Error::kInvalidArgument;
  if (alignment == 0) alignment = 256;
  if ((alignment & (alignment - 1)) != 0) {
    KILN_LOG(ERROR, "nccl: rank %u: symmetric arena alignment %u is not a power of two", rank_, alignment);
    return Error::kInvalidArgument;
  }
  uint32_t slot = 0;
  while (slot < state_->arenas.size() && state_->arenas[slot].in_use) ++slot;
  Error error = mpi_compare_layouts(name(), slot, size, layout_digest);
  if (error != Error::kOk) return error;

  State::Arena arena;
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
    const cudaError_t e = cudaMalloc(&arena.allocation, bytes);
    if (!all_ranks(e == cudaSuccess)) {
      KILN_LOG(ERROR, "nccl: rank %u: cudaMalloc of %llu bytes for symmetric arena %u: %s", rank_,
               static_cast<unsigned long long>(bytes), slot, cudaGetErrorString(e));
      if (e == cudaSuccess) cudaFree(arena.allocation);
      return Error::kDeviceAllocationFailed;
    }
  }
  const uintptr_t address = reinterpret_cast<uintptr_t>(arena.allocation);
  arena.base = reinterpret_cast<void*>((address + alignment - 1) & ~static_cast<uintptr_t>(alignment - 1));
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

void NcclCommunicator::unmap_symmetric(SymmetricMemory memory) {
  if (memory.slot >= state_->arenas.size() || !state_->arenas[memory.slot].in_use) return;
  State::Arena& arena = state_->arenas[memory.slot];
  arena.in_use = false;
  cudaStreamSynchronize(state_->stream);
  if (arena.window != nullptr) {
    // Collective; after a failure the communicator is aborted instead.
    if (!failed_) (void)ncclCommWindowDeregister(state_->comm, arena.window);
    (void)ncclMemFree(arena.allocation);
  } else {
    cudaFree(arena.allocation);
  }
  arena = State::Arena();
}

Error NcclCommunicator::all_reduce(const AllReduceArgs& args) {
  if (failed_) {
    KILN_LOG(ERROR, "nccl: rank %u: all-reduce refused: a collective failed earlier", rank_);
    return Error::kPeerFailed;
  }
  if (args.memory.slot >= state_->arenas.size() || !state_->arenas[args.memory.slot].in_use ||
      args.memory.local.handle != state_->arenas[args.memory.slot].base) {
    KILN_LOG(ERROR, "nccl: rank %u: all-reduce on symmetric arena %u, which this communicator has not mapped", rank_,
             args.memory.slot);
    return Error::kInvalidArgument;
  }
  const State::Arena& arena = state_->arenas[args.memory.slot];
  ncclDataType_t dtype;
  ncclRedOp_t op;
  if (!nccl_dtype(args.dtype, &dtype) || !nccl_op(args.op, &op)) {
    KILN_LOG(ERROR, "nccl: rank %u: all-reduce of %s with reduce op %u is not supported", rank_, dtype_name(args.dtype),
             static_cast<unsigned>(args.op));
    return Error::kNotSupported;
  }
  const uint64_t element = dtype_size(args.dtype);
  if (args.count > arena.size / element || args.input_offset > arena.size - args.count * element ||
      (args.count > 0 && args.output == nullptr)) {
    KILN_LOG(ERROR,
             "nccl: rank %u: all-reduce of %llu %s elements at offset %llu does not fit symmetric arena %u "
             "(%llu bytes), or has no output",
             rank_, static_cast<unsigned long long>(args.count), dtype_name(args.dtype),
             static_cast<unsigned long long>(args.input_offset), args.memory.slot,
             static_cast<unsigned long long>(arena.size));
    return Error::kInvalidArgument;
  }
  const uint8_t* input = static_cast<const uint8_t*>(arena.base) + args.input_offset;
  const uint8_t* output = static_cast<const uint8_t*>(args.output);
  const uint64_t bytes = args.count * element;
  if (output != input && output < input + bytes && input < output + bytes) {
    KILN_LOG(ERROR, "nccl: rank %u: all-reduce output %p overlaps the input without being it", rank_, args.output);
    return Error::kInvalidArgument;
  }

  // The input was written on whatever stream its producer used.
  cudaError_t cuda = cudaDeviceSynchronize();
  if (cuda != cudaSuccess) {
    KILN_LOG(ERROR, "nccl: rank %u: the device failed before the all-reduce: %s", rank_, cudaGetErrorString(cuda));
    return Error::kDeviceError;
  }
  ncclResult_t result =
      ncclAllReduce(input, args.output, static_cast<size_t>(args.count), dtype, op, state_->comm, state_->stream);
  if (result != ncclSuccess) {
    KILN_LOG(ERROR, "nccl: rank %u: ncclAllReduce: %s (%s)", rank_, ncclGetErrorString(result),
             ncclGetLastError(state_->comm));
    failed_ = true;
    return result == ncclRemoteError ? Error::kPeerFailed : Error::kDeviceError;
  }
  // Wait for it, watching NCCL's asynchronous errors and the clock.
  const uint64_t start = now_ns();
  for (;;) {
    cuda = cudaStreamQuery(state_->stream);
    if (cuda == cudaSuccess) return Error::kOk;
    if (cuda != cudaErrorNotReady) {
      KILN_LOG(ERROR, "nccl: rank %u: all-reduce failed on the device: %s", rank_, cudaGetErrorString(cuda));
      failed_ = true;
      return Error::kDeviceError;
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(state_->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      KILN_LOG(ERROR, "nccl: rank %u: all-reduce failed: %s (%s)", rank_, ncclGetErrorString(async),
               ncclGetLastError(state_->comm));
      failed_ = true;
      return Error::kPeerFailed;
    }
    if (now_ns() - start > state_->timeout_ns) {
      KILN_LOG(ERROR,
               "nccl: rank %u: all-reduce did not finish within %u ms (KILN_COLLECTIVE_TIMEOUT_MS): a peer "
               "failed or is stuck; aborting the NCCL communicator",
               rank_, state_->timeout_ms);
      failed_ = true;
      return Error::kPeerFailed;
    }
    sched_yield();
  }
}

}  // namespace comm
}  // namespace kiln
