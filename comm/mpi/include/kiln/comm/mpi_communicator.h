// mpi-shm: a host communicator for ranks that are processes started by
// OpenMPI's mpirun, on one node (or on several: "Ranks on several nodes"
// below). Symmetric arenas are MPI-3 shared-memory windows, so every rank
// addresses every peer's copy of an arena directly and an all-reduce reads
// its peers' operands where they lie.
//
// Window of one symmetric arena (MPI_Win_allocate_shared on the node
// communicator; one segment per rank, page aligned, mapped by every rank):
//
//   rank r's segment
//   +-----+----------------------------------+-----+----------------------+
//   | pad | arena: `size` bytes, aligned to  | pad | control block of r:  |
//   |     | `alignment` (the planned tensors)| (to | line 0: sequence,    |
//   |     |                                  | 64) |   call descriptor    |
//   +-----+----------------------------------+-----+ line 1: pid, rank    |
//         ^ SymmetricMemory::local.handle            +----------------------+
//   Every rank holds the address of every peer's arena and control block.
//   The pads are per rank (gathered at map time), not assumed equal.
//
// Flag protocol (MpiSync::kFlags). Each rank owns one counter, `sequence`,
// in its control block; only the owner writes it, it only grows, and every
// call moves it on by 3, so nothing is ever reset between calls. For call e
// on an arena (e counts that arena's calls from 0, the same on every rank):
//
//   arrive  publish descriptor(e), then sequence = 3e+1 (release): "my input
//           is written". Wait until every peer's sequence >= 3e+1
//           (acquire), then check that every peer's descriptor (offset,
//           count, dtype, op, algorithm, result offset) equals ours.
//   reduce  one-shot (output outside the input): read all N inputs, reduce
//           them in rank order into the output.
//           two-shot (in place, where the output is the input, which peers
//           read; or an output elsewhere in the arena, at least
//           two_shot_min_bytes, where peers can read it): rank r reduces
//           slice r of all N inputs into slice r of its result (its input
//           in place, else its output; no peer reads that slice of it
//           now); sequence = 3e+2 (release); wait for every peer >= 3e+2;
//           copy slice j of rank j's result, for every j != r, into its own
//           output. Each rank reads about 2 messages instead of N.
//   depart  sequence = 3e+3 (release): "I have stopped reading your
//           arenas". Wait until every peer's sequence >= 3e+3, then return.
//
// Why two-shot in place: a one-shot rank writing its result over its input
// would change what its peers are still reading, and a staging buffer is
// what symmetric memory exists to avoid; two-shot only ever writes what no
// peer reads at that moment. The descriptor check catches ranks that
// disagree about it.
//
// The depart wait is what makes reuse safe: after all_reduce() returns, the
// caller may overwrite the input (the planner reuses symmetric buffers
// across layers, and an in-place output is the input), and no peer is still
// reading it. A peer cannot arrive at e+1 before every rank departed e, so
// the descriptor a peer reads is never overwritten under it. Every rank sums
// in rank order 0..N-1, so all ranks get the same bits.
//
// Barrier mode (MpiSync::kBarrier), the fallback to measure against: each
// wait above is MPI_Win_sync + a barrier on the node communicator +
// MPI_Win_sync instead (non-blocking barrier, polled, so it has the same
// timeout; OpenMPI allocates inside it).
//
// Waits spin briefly (only while there are no more ranks than cores), then
// sched_yield(): ranks may be oversubscribed, and a spinning rank would take
// the core its peer needs to arrive. While waiting, a rank checks that the
// peer it waits for is alive (every rank publishes its pid; kill(pid, 0),
// and a zombie not yet reaped counts as exited)
// and gives up after the timeout: kPeerFailed, naming the rank. After that
// the communicator is failed: later collectives return kPeerFailed at once,
// and unmapping and destruction skip MPI's collective clean-up (a failed peer
// would never join it); the process should end with an error, which makes
// mpirun end the job.
//
// Ranks on several nodes (a job that outgrows one machine). Windows
// are per node; rank() and size() stay the job's (MPI_COMM_WORLD), the
// protocol above runs among the ranks of one node, and an all-reduce goes
// in three steps: the node's own all-reduce through its window (AVERAGE as
// a SUM), then MPI_Allreduce of that result between the node leaders (node
// rank 0 of each; MPI's own transport, nothing home-made), then a
// broadcast from each leader to its node (MPI_Bcast on the node
// communicator); AVERAGE divides by size() last. Every rank of a node gets
// its leader's bits. The two MPI steps are non-blocking calls polled with
// the same timeout, the leader's liveness checked while a node waits for
// it. float32 and int32 only (MPI has no 16-bit float types); device peers
// are not handed out (the kernels address one node's peers), so device
// collectives come through all_reduce(). MpiOptions::ranks_per_node = k
// makes every k consecutive ranks a node: how this is tested on one
// machine.
//
// all_reduce() allocates nothing and makes no MPI call in flags mode on one
// node.
// Lifetime: create() once per process; destroy after every Method that
// uses it. Not thread safe: one thread calls it (MPI_THREAD_FUNNELED).

#ifndef KILN_COMM_MPI_COMMUNICATOR_H_
#define KILN_COMM_MPI_COMMUNICATOR_H_

#include <stdint.h>

#include <memory>

#include "kiln/comm/mpi_session.h"
#include "kiln/runtime/communicator.h"

namespace kiln {
namespace comm {

enum class MpiSync : uint8_t {
  // Per-rank counters in the window (the protocol above). The default.
  kFlags,
  // MPI_Win_sync + a node barrier at each step: the fallback.
  kBarrier,
};

struct MpiOptions {
  MpiSync sync = MpiSync::kFlags;
  // Out-of-place all-reduces of at least this many bytes whose output lies
  // in the same symmetric arena (at the same offset on every rank, as the
  // planner places it) use two-shot; in place always does. UINT64_MAX:
  // never. The default is where two-shot overtook one-shot in
  // bench/allreduce (bench/RESULTS.md).
  uint64_t two_shot_min_bytes = 256 * 1024;
  // How long a rank waits for a peer within one collective before giving up
  // with kPeerFailed. 0: KILN_COLLECTIVE_TIMEOUT_MS from the environment,
  // else 30000.
  uint32_t timeout_ms = 0;
  // The memory its windows serve: CPU, or CUDA under the host execution
  // model of CUDA (KILN_CUDA_EXECUTION=host), where a CUDA device's memory
  // is host memory. Then a program planned for GPUs maps its device
  // symmetric arenas here and reduces them by the protocol above, across
  // real processes (test infrastructure; a GPU needs a device communicator).
  DeviceType memory = DeviceType::CPU;
  // With memory = CUDA: whether device_peers() hands out the windows. Off,
  // it answers kNotSupported, as a communicator without load/store access
  // to its peers' memory does (NCCL without windows), so device
  // collectives run through all_reduce(): how that path is tested.
  bool device_peers = true;
  // 0: ranks sharing memory form a node (MPI_COMM_TYPE_SHARED). k: every k
  // consecutive ranks form one (the multi-node path, tested on one
  // machine); size() must be a multiple of k.
  uint32_t ranks_per_node = 0;
};

class MpiCommunicator final : public Communicator {
 public:
  // Initialises MPI unless the application has (mpi_session.h) and splits
  // the world into node communicators (above) and the leaders' one:
  // kNotSupported, logged, when MPI cannot start or ranks_per_node does not
  // divide the ranks. Collective across MPI_COMM_WORLD.
  static Error create(const MpiOptions& options, std::unique_ptr<MpiCommunicator>* out);
  // Frees the windows still mapped and finalises MPI if create() initialised
  // it (neither after a peer failed). Collective, like MPI_Finalize.
  ~MpiCommunicator();
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  const char* name() const override { return "mpi-shm"; }
  uint32_t rank() const override { return world_rank_; }
  uint32_t size() const override { return world_size_; }
  // The nodes the ranks span (1: one shared-memory node).
  uint32_t nodes() const { return nodes_; }
  DeviceType device_type() const override { return options_.memory; }

  // `alignment`: a power of two (0 means 64). A zero-byte arena maps too.
  // Also kOutOfMemory when the window cannot be allocated, and
  // kCommunicatorMismatch when the ranks disagree on size or digest.
  Error map_symmetric(uint64_t size, uint32_t alignment, uint64_t layout_digest, SymmetricMemory* out_memory) override;
  void unmap_symmetric(SymmetricMemory memory) override;
  // FLOAT32, FLOAT16, BFLOAT16 (reduced in float32, rounded once) and INT32
  // (SUM and PROD wrap around); every ReduceOp (AVERAGE: the sum divided by
  // size(), truncated for INT32). `output` must be the input itself or not
  // overlap it, and the input must be aligned to its element size. Also
  // kInvalidArgument for a bad slot, offset or count (logged), and
  // kCommunicatorMismatch when the ranks called with different arguments.
  // A call refused for its own arguments (logged) takes no part in the
  // protocol: when only some ranks refuse, the others time out.
  Error all_reduce(const AllReduceArgs& args) override;
  // With MpiOptions::memory = CUDA (the host execution model): every rank's
  // copy of the arena, where the model's device (host memory) reads it, and
  // the collective timeout. kNotSupported for host memory and for more than
  // kMaxDevicePeers ranks. The arenas are zeroed when they are mapped. The
  // first call starts a thread that watches the peers' processes and sets
  // DevicePeers::peer_exited when one exits (joined at destruction).
  Error device_peers(const SymmetricMemory& memory, DevicePeers* out_peers) override;
  void mark_failed() override { failed_ = true; }

  // True once a collective failed (kPeerFailed or a call mismatch).
  bool failed() const { return failed_; }

 private:
  struct State;
  struct Call;
  MpiCommunicator(const MpiOptions& options, std::unique_ptr<State> state, uint32_t rank, uint32_t size,
                  uint32_t world_rank, uint32_t world_size, uint32_t nodes);

  // all_reduce() in the steps of the protocol above, among the node's ranks.
  Error node_all_reduce(const AllReduceArgs& args);
  Error check_call(const AllReduceArgs& args, Call* out_call);
  Error step(const Call& call, uint64_t which);
  Error wait_flags(const Call& call, uint64_t target, uint64_t which);
  Error wait_barrier(const Call& call, uint64_t target, uint64_t which);
  Error check_peers_agree(const Call& call) const;
  Error reduce_into_output(const Call& call);
  // The steps between nodes (more than one node): between the leaders,
  // then from each leader to its node.
  Error across_nodes(const AllReduceArgs& args);
  Error wait_request(void* request, const char* what, bool leader_alive_check);

  MpiOptions options_;
  std::unique_ptr<State> state_;
  // This rank and the ranks in its node (the window protocol's), and in
  // the job.
  uint32_t rank_ = 0;
  uint32_t size_ = 1;
  uint32_t world_rank_ = 0;
  uint32_t world_size_ = 1;
  uint32_t nodes_ = 1;
  bool failed_ = false;
};

}  // namespace comm
}  // namespace kiln

#endif  // KILN_COMM_MPI_COMMUNICATOR_H_
