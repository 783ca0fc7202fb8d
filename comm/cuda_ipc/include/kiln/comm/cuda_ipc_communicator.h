// cuda-ipc: a device communicator for CUDA ranks that are processes on one
// node, with no MPI: symmetric arenas are CUDA virtual memory shared between
// the processes, so every rank's GPU loads from and stores to every peer's
// copy, and the CUDA backend's all-reduce kernels (one-shot, two-shot) read
// their peers' operands where they lie. Two processes may share one GPU
// (each maps the other's allocation), which is how one GPU tests it.
//
// Mapping one symmetric arena (map_symmetric, collective):
//
//   1. every rank's arena size and layout digest gathered and compared
//      (kCommunicatorMismatch naming the ranks that differ);
//   2. each rank cuMemCreates its copy (`size` rounded up to the
//      allocation granularity) with a POSIX file-descriptor handle and
//      exports it (cuMemExportToShareableHandle);
//   3. the descriptors go to every rank over the bootstrap's Unix-domain
//      sockets (SCM_RIGHTS);
//   4. each rank imports every peer's (cuMemImportFromShareableHandle) and
//      maps all N (cuMemAddressReserve + cuMemMap + cuMemSetAccess):
//
//        rank r's address space
//        [ copy of rank 0 ][ copy of rank 1 ] ... [ copy of rank N-1 ]
//          each its own reservation, granularity aligned; bases[q] = copy q
//
//   5. each rank zeroes its own copy, then every rank reports whether it
//      got this far: the arena is zero everywhere before map_symmetric
//      returns on any rank (the kernels' signal words start from zero), and
//      a rank that failed fails the map on every rank.
//
// unmap_symmetric unmaps and releases this rank's mappings (the memory
// itself lives until the last process unmaps it: no peer is waited for).
//
// Bootstrap (no MPI): rank and world size from CudaIpcOptions, else from
// the environment (KILN_RANK / KILN_WORLD_SIZE / KILN_LOCAL_RANK, else
// OpenMPI's OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK, so it also runs under
// mpirun without linking MPI). The ranks meet at a rendezvous: a Unix-domain
// socket that rank 0 listens on, named by CudaIpcOptions::rendezvous or
// KILN_RENDEZVOUS: a path ("/tmp/job7.sock"; a stale socket file of a job
// that died is removed) or, starting with '@', an abstract socket name
// (Linux; nothing left behind). Under mpirun without either, the name is
// derived from the job's PMIx namespace. Every other rank connects; rank 0
// relays every exchange (a star). A rank that does not arrive within the
// rendezvous timeout, a world size that differs, or another job's rank 0
// on the same name ends create() with an error naming them. The ranks
// exchange their pids.
//
// Peers are watched as mpi-shm watches them: device_peers() starts a
// thread that checks every peer's pid (kill(pid, 0); a zombie counts as
// exited) and sets DevicePeers::peer_exited to r + 1 when rank r exits, so
// a kernel waiting for it fails the launch at once. Every wait of the
// communicator's own is bounded by the collective timeout.
//
// all_reduce() (what the runtime uses where it does not run the device
// kernels: a dtype other than float32, more ranks than the kernels take,
// or device_peers off) reduces on the host: every rank's operand copied
// from its peers' mappings, summed in rank order (the same bits on every
// rank), the result copied to the output. Ranks meet through counters in a
// small host shared-memory block per rank (memfd, exchanged at create):
//
//   arrive     publish the call's descriptor, sequence = 2e + 1; wait for
//              every peer >= 2e + 1, check that the descriptors agree;
//   read       copy and reduce every operand (after the device finished
//              its queued work), sequence = 2e + 2; wait for every peer
//              >= 2e + 2: nobody reads any operand any more;
//   write      copy the result to the output (which may be the input).
//
// Counters only grow (e counts the arena's calls). Slow (host staging,
// device synchronisation): a fallback, not the fast path.
//
// What it needs of the memory: CUDA virtual memory with POSIX descriptors
// (Linux, a driver with VMM). Allocations: at create() and map_symmetric();
// all_reduce() allocates nothing. Lifetime: destroy after every Method that
// uses it. Not thread safe (one thread calls it; the watchdog only reads
// pids and sets its word).

#ifndef KILN_COMM_CUDA_IPC_COMMUNICATOR_H_
#define KILN_COMM_CUDA_IPC_COMMUNICATOR_H_

#include <stdint.h>

#include <memory>
#include <string>

#include "kiln/comm/cuda_ipc_driver.h"
#include "kiln/runtime/communicator.h"

namespace kiln {
namespace comm {

struct CudaIpcOptions {
  // The CUDA build to call: hostexec_cuda_ipc_driver() or
  // gpu_cuda_ipc_driver(). Required.
  const CudaIpcDriver* driver = nullptr;
  // This rank and the world's size; -1: from the environment (header).
  int rank = -1;
  int size = -1;
  // This rank's rank on the node, which picks its GPU (rank_local_device);
  // -1: from the environment, else the rank.
  int local_rank = -1;
  // Where the ranks meet (header); empty: KILN_RENDEZVOUS, else derived
  // under mpirun, else an error.
  std::string rendezvous;
  // How long ranks wait for each other at the rendezvous. 0:
  // KILN_RENDEZVOUS_TIMEOUT_MS, else 30000.
  uint32_t rendezvous_timeout_ms = 0;
  // How long a rank waits for a peer in a collective (mapping, all_reduce,
  // and the device kernels' waits). 0: KILN_COLLECTIVE_TIMEOUT_MS, else 30000.
  uint32_t timeout_ms = 0;
  // Off: device_peers() answers kNotSupported, so device collectives run
  // through all_reduce() (how that path is tested).
  bool device_peers = true;
};

// What the environment says about this rank (CudaIpcOptions's -1 fields):
// kOk with *out_size 1 and *out_rank 0 when nothing names a world.
Error cuda_ipc_ranks_from_environment(int* out_rank, int* out_size, int* out_local_rank);

class CudaIpcCommunicator final : public Communicator {
 public:
  // Meets the other ranks (the bootstrap above) and opens this rank's GPU.
  // kInvalidArgument for options that cannot work (no driver, a rank
  // outside the world, more than 64 ranks), kNotSupported when the device
  // cannot share memory, kPeerFailed when the rendezvous fails (all
  // logged).
  static Error create(const CudaIpcOptions& options, std::unique_ptr<CudaIpcCommunicator>* out);
  // Stops the watchdog, unmaps every arena still mapped; waits for no peer.
  ~CudaIpcCommunicator();
  CudaIpcCommunicator(const CudaIpcCommunicator&) = delete;
  CudaIpcCommunicator& operator=(const CudaIpcCommunicator&) = delete;

  const char* name() const override { return "cuda-ipc"; }
  uint32_t rank() const override { return rank_; }
  uint32_t size() const override { return size_; }
  DeviceType device_type() const override { return DeviceType::CUDA; }
  // The GPU this rank maps its arenas on.
  int device() const { return device_; }

  // `alignment`: a power of two up to the allocation granularity (0 means
  // 64). Also kOutOfMemory when the device memory cannot be had,
  // kCommunicatorMismatch when the ranks disagree on size or digest,
  // kPeerFailed when a peer fails or is late.
  Error map_symmetric(uint64_t size, uint32_t alignment, uint64_t layout_digest, SymmetricMemory* out_memory) override;
  void unmap_symmetric(SymmetricMemory memory) override;
  // FLOAT32, FLOAT16, BFLOAT16, INT32, every ReduceOp, as mpi-shm; the
  // protocol above. kPeerFailed when a peer exits or is late,
  // kCommunicatorMismatch when the ranks called differently.
  Error all_reduce(const AllReduceArgs& args) override;
  // Every rank's copy, as this device addresses it; kNotSupported with
  // CudaIpcOptions::device_peers off or more than kMaxDevicePeers ranks.
  Error device_peers(const SymmetricMemory& memory, DevicePeers* out_peers) override;
  void mark_failed() override { failed_ = true; }

  bool failed() const { return failed_; }

 private:
  struct State;
  CudaIpcCommunicator(const CudaIpcOptions& options, std::unique_ptr<State> state, uint32_t rank, uint32_t size,
                      int device);

  Error wait_peers(uint32_t slot, uint64_t target, uint64_t call, const char* step);
  void give_up();
  Error check_peers_agree(uint32_t slot, uint64_t call) const;

  CudaIpcOptions options_;
  std::unique_ptr<State> state_;
  uint32_t rank_ = 0;
  uint32_t size_ = 1;
  int device_ = 0;
  bool failed_ = false;
};

}  // namespace comm
}  // namespace kiln

#endif  // KILN_COMM_CUDA_IPC_COMMUNICATOR_H_
