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
// Results are the same either way; only the speed differs.
//
// Ordering with the delegates (keep it simple and correct): all_reduce()
// first waits for the whole device (cudaDeviceSynchronize: whatever stream a
// CUDA delegate wrote the input on has finished), runs ncclAllReduce on the
// communicator's own stream and waits for it before returning, so the output
// is ready for whatever runs next on any stream. The wait polls
// ncclCommGetAsyncError and gives up after the timeout
// (KILN_COLLECTIVE_TIMEOUT_MS, as for mpi-shm): kPeerFailed. On every
// failure of a collective the NCCL communicator is aborted at once, before
// anything synchronises the stream or the device (a stuck NCCL kernel would
// otherwise hang unmapping and teardown); the communicator is then failed:
// later collectives return kPeerFailed, and unmapping skips the stream wait.
// TODO(issue 16): hand-off through events on the delegate's stream instead
// of device-wide waits, once the CUDA backend's runtime half exposes its
// stream.
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

  int device() const { return device_; }
  // Whether arenas are NCCL symmetric windows (false after the fallback).
  bool symmetric_windows() const;
  bool failed() const { return failed_; }

 private:
  struct State;
  struct Call;
  NcclCommunicator(std::unique_ptr<State> state, uint32_t rank, uint32_t size, int device);

  // all_reduce(): its arguments checked, then the wait for NCCL's work.
  Error check_call(const AllReduceArgs& args, Call* out_call) const;
  Error run_all_reduce(const AllReduceArgs& args, const Call& call);
  Error wait_for_stream();
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
