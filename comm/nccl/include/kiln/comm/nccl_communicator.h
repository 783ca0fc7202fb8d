// nccl: a device communicator for ranks that each drive one CUDA GPU,
// started by mpirun (one process per GPU; MPI only carries the start-up:
// rank 0's ncclUniqueId goes to every rank by MPI_Bcast, and layout digests
// are compared by MPI_Allgather).
//
// Symmetric arenas: ncclMemAlloc + ncclCommWindowRegister(...,
// NCCL_WIN_COLL_SYMMETRIC) (NCCL 2.27 and later), so NCCL's symmetric
// kernels read peers' buffers directly over NVLink. When a window cannot be
// registered on some rank (no NVLink/P2P between the GPUs, NCCL older than
// 2.27, a null window), every rank frees what it registered, logs once that
// symmetric memory is unavailable, and from then on maps arenas as ordinary
// cudaMalloc memory, where ncclAllReduce runs NCCL's ordinary algorithms.
// Results are the same either way; only the speed differs. Arenas are zero
// on every rank before map_symmetric returns on any.
//
// Three ways a collective runs, the first that applies:
//   - device_peers(): where every rank is in this rank's load/store-
//     accessible (LSA) team, each rank's address of a window (read once per
//     arena through NCCL 2.28's device API, src/nccl_peers.cu), so the CUDA
//     backend's own all-reduce kernels read the peers directly;
//   - enqueue_all_reduce(): ncclAllReduce on the CUDA backend's stream, not
//     waited for, recorded into its CUDA graph (no host synchronisation, no
//     stream of this communicator's);
//   - all_reduce() (collectives planned for the communicator, and callers
//     outside a CUDA program): first waits for the whole device
//     (cudaDeviceSynchronize: whatever stream wrote the input has
//     finished), runs ncclAllReduce on the communicator's own stream and
//     waits for it, polling ncclCommGetAsyncError, giving up after the
//     timeout (KILN_COLLECTIVE_TIMEOUT_MS, as for mpi-shm): kPeerFailed.
// On every failure of an NCCL call (and on mark_failed(), a device
// collective that failed in the backend) the NCCL communicator is aborted
// at once, before anything synchronises a stream or the device (a stuck
// NCCL kernel would otherwise hang unmapping and teardown); the
// communicator is then failed: later collectives return kPeerFailed, and
// unmapping skips the device wait. An enqueued ncclAllReduce whose peer
// never arrives is bounded by nothing here: no call of this communicator
// waits on the backend's stream.
//
// all_reduce() allocates nothing itself (NCCL may, inside). Lifetime and
// threading as for every Communicator (communicator.h); the CUDA device is
// made current by create() and must stay current on the calling thread.

#ifndef KILN_COMM_NCCL_COMMUNICATOR_H_
#define KILN_COMM_NCCL_COMMUNICATOR_H_

#include <stdint.h>

#include <memory>

#include "kiln/comm/mpi_session.h"
#include "kiln/runtime/communicator.h"

namespace kiln {
namespace comm {

struct NcclOptions {
  // This rank's CUDA device; -1: its local device, rank_local_device(its
  // rank on the node, the devices) (communicator.h), which is what cuda:0
  // names in the CUDA backend of a multi-rank program
  // (CudaOptions::node_rank), so that both use one GPU.
  int device = -1;
  // false: never try symmetric windows (always ordinary memory).
  bool symmetric_windows = true;
  // As MpiOptions::timeout_ms: 0 reads KILN_COLLECTIVE_TIMEOUT_MS, else 30000.
  uint32_t timeout_ms = 0;
};

class NcclCommunicator final : public Communicator {
 public:
  // Initialises MPI unless the application has, picks and sets the device,
  // and creates the NCCL communicator over MPI_COMM_WORLD. Collective: when
  // any rank has no usable device (no GPU, no driver) or NCCL fails, every
  // rank returns the same error (kDeviceError; logged, naming the ranks and
  // the CUDA/NCCL error), never a hang or a crash.
  static Error create(const NcclOptions& options, std::unique_ptr<NcclCommunicator>* out);
  // Unmaps what is still mapped, destroys the NCCL communicator (aborts it
  // after a failure) and finalises MPI if create() initialised it.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  const char* name() const override { return "nccl"; }
  uint32_t rank() const override { return rank_; }
  uint32_t size() const override { return size_; }
  DeviceType device_type() const override { return DeviceType::CUDA; }

  // `local.handle` is a CUDA device pointer. kDeviceAllocationFailed when
  // the device memory cannot be had, kCommunicatorMismatch as in
  // communicator.h.
  Error map_symmetric(uint64_t size, uint32_t alignment, uint64_t layout_digest, SymmetricMemory* out_memory) override;
  void unmap_symmetric(SymmetricMemory memory) override;
  // `output`: a device pointer. Every NCCL dtype kiln has (FLOAT32,
  // FLOAT16, BFLOAT16, FLOAT64, INT8, UINT8, INT32, UINT32, INT64, UINT64)
  // and every ReduceOp.
  Error all_reduce(const AllReduceArgs& args) override;
  // Every rank's copy of a mapped window, read through NCCL's device API,
  // where every rank is in this rank's load/store-accessible (LSA) team;
  // kNotSupported for ordinary memory or when some rank is not (said once,
  // when the arena is mapped). `peer_exited` is nullptr: the kernels' wait
  // ends at the timeout.
  Error device_peers(const SymmetricMemory& memory, DevicePeers* out_peers) override;
  // ncclAllReduce of `args` on `stream` (a cudaStream_t of this rank's
  // device), not waited for: what the CUDA backend records into its graph
  // where this hands out no device peers. The dtypes and ops of
  // all_reduce().
  Error enqueue_all_reduce(const AllReduceArgs& args, void* stream) override;
  // Aborts the NCCL communicator (first, as after a failure of its own).
  void mark_failed() override;

  int device() const { return device_; }
  // Whether arenas are NCCL symmetric windows (false after the fallback).
  bool symmetric_windows() const;
  bool failed() const { return failed_; }

 private:
  struct Arena;
  struct State;
  struct Call;
  NcclCommunicator(std::unique_ptr<State> state, uint32_t rank, uint32_t size, int device);

  // all_reduce(): its arguments checked, then the wait for NCCL's work.
  Error check_call(const AllReduceArgs& args, Call* out_call) const;
  Error run_all_reduce(const AllReduceArgs& args, const Call& call);
  Error wait_for_stream();
  // map_symmetric's last step, on every rank.
  Error zero_and_find_peers(uint64_t bytes, Arena* arena);
  void release(const Arena& arena, bool collective);
  // On any failure of a collective, before anything synchronises: aborts
  // the NCCL communicator (its kernels stop) and marks this one failed.
  void abort_now();

  std::unique_ptr<State> state_;
  uint32_t rank_ = 0;
  uint32_t size_ = 1;
  int device_ = 0;
  bool failed_ = false;
};

}  // namespace comm
}  // namespace kiln

#endif  // KILN_COMM_NCCL_COMMUNICATOR_H_
