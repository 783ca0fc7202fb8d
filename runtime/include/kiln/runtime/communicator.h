// Communicators: how the ranks of a group run the collectives a program
// names (CollectiveCall) over its symmetric arenas.
//
// A symmetric arena has the same size and the same tensor offsets on every
// rank of its group: the planner lays it out once for all ranks. A
// communicator maps one copy of it per rank so that every rank can address
// every peer's copy, and a one-shot all-reduce reads its peers' operands in
// place, with no staging copy:
//
//   rank 0 window   [ arena bytes (planned)  | communicator's own flags ]
//   rank 1 window   [ arena bytes (planned)  | communicator's own flags ]
//     ...             ^ offset X holds the same tensor on every rank
//
// Implementations live outside the runtime core (comm/<name>/: MPI shared
// memory between host processes, NCCL symmetric windows between GPUs); they
// may allocate and talk to their peers while they are created and while a
// method maps its arenas, never in all_reduce(). The runtime itself has one
// built in, for a group of one rank, used when a program's group has size 1
// and the application gives none (a collective is then a copy, or nothing
// when in place).
//
// Lifetime: the application creates a communicator, passes it to method
// loading (MemoryManager::communicators), and destroys it after every Method
// that uses it. Every rank must load the same program and method, in the
// same order: mapping is a collective operation. Not thread safe.

#ifndef KILN_RUNTIME_COMMUNICATOR_H_
#define KILN_RUNTIME_COMMUNICATOR_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/error.h"
#include "kiln/runtime/tensor.h"

namespace kiln {

// One mapped symmetric arena: this rank's copy (`local`: a host pointer in
// `handle` for host communicators, a device buffer for device ones) and the
// communicator's handle for it.
struct SymmetricMemory {
  DeviceBuffer local;
  uint32_t slot = 0;
};

// One all-reduce: `count` elements of `dtype` at `input_offset` in the
// symmetric arena `memory` (the same offset on every rank), reduced with
// `op` into `output`. `output` is an address in the communicator's memory
// space (host memory for host communicators, device memory for device
// ones: the output's device buffer handle, its base address, plus its
// offset); it may be the input itself (in place) or anywhere else, including
// elsewhere in the same arena.
struct AllReduceArgs {
  SymmetricMemory memory;
  uint64_t input_offset = 0;
  void* output = nullptr;
  uint64_t count = 0;
  DType dtype = DType::FLOAT32;
  fb::ReduceOp op = fb::ReduceOp::SUM;
};

// Every rank's copy of one mapped symmetric arena, as addresses this
// rank's device loads from and stores to (peer access over NVLink, CUDA
// IPC, or host memory under the host execution model of CUDA): what the
// device backend's all-reduce kernels read their peers through
// (CollectiveCall.algorithm ONE_SHOT, TWO_SHOT). `bases[r]` is rank r's
// copy, `bases[rank()]` this rank's own (SymmetricMemory::local).
// `timeout_ms`: how long a kernel waits for a peer before it fails the
// launch, the communicator's own collective timeout. `peer_exited`, where
// the communicator watches its peers' processes: a word the kernels can
// read (host memory under the host execution model; mapped, pinned host
// memory on a GPU) that it sets to r + 1 when it sees rank r exit, so that
// a kernel waiting for r fails the launch at once instead of at the
// timeout; nullptr: only the timeout ends a wait.
constexpr uint32_t kMaxDevicePeers = 8;
struct DevicePeers {
  void* bases[kMaxDevicePeers] = {};
  uint32_t count = 0;
  uint32_t timeout_ms = 0;
  const volatile uint32_t* peer_exited = nullptr;
};

// The GPU a rank drives among the `devices` of its node: its rank on the
// node modulo the devices. One rule for both halves of a multi-rank GPU
// program, so they agree: a device communicator's device (comm/nccl) and
// the device the CUDA backend's cuda:0 names (CudaOptions::node_rank).
inline int rank_local_device(int node_rank, int devices) {
  return devices > 0 && node_rank >= 0 ? node_rank % devices : 0;
}

class Communicator {
 public:
  // "mpi-shm", "nccl", "local": for messages.
  virtual const char* name() const = 0;
  virtual uint32_t rank() const = 0;
  virtual uint32_t size() const = 0;
  // Where its symmetric memory lives (CPU for host communicators).
  virtual DeviceType device_type() const = 0;

  // Maps a symmetric arena of `size` bytes aligned to `alignment` on every
  // rank. `layout_digest` summarises the arena's planned layout (size and
  // every tensor's offset and byte size, see Method): the communicator
  // compares it across ranks and returns kCommunicatorMismatch, with a
  // message naming the ranks that differ, when they do not all agree.
  // Collective across the group.
  virtual Error map_symmetric(uint64_t size, uint32_t alignment, uint64_t layout_digest,
                              SymmetricMemory* out_memory) = 0;
  // Releases what map_symmetric made. Collective across the group.
  virtual void unmap_symmetric(SymmetricMemory memory) = 0;

  // Sum (or another reduction) of one tensor across the group, every rank
  // receiving the result. Allocates nothing itself (an MPI or NCCL call
  // inside may). kPeerFailed when a peer exits or does not arrive in time;
  // kNotSupported for a dtype or op the communicator does not reduce.
  virtual Error all_reduce(const AllReduceArgs& args) = 0;

  // Device communicators whose peers' arenas this rank's device can address
  // directly: every rank's copy of `memory` (mapped by map_symmetric), for
  // the device backend's all-reduce kernels. Such a communicator hands out
  // arenas whose bytes are zero on every rank before map_symmetric returns
  // on any (the kernels' signal words start from zero). kNotSupported (the
  // default) where it reduces only through its own library: then the
  // runtime enqueues its all-reduce on the device backend's stream where it
  // can (enqueue_all_reduce), else calls all_reduce(). Allocates nothing.
  virtual Error device_peers(const SymmetricMemory& memory, DevicePeers* out_peers) {
    (void)memory;
    (void)out_peers;
    return Error::kNotSupported;
  }
  // Device communicators that reduce through their own library (NCCL) where
  // they hand out no device peers: enqueues the all-reduce of `args` (as
  // all_reduce() takes them) on `stream`, a stream of the communicator's
  // device (a cudaStream_t for CUDA), and returns without waiting, so that
  // the device backend runs it in order with its own launches and can
  // record it into its CUDA graph (no host synchronisation, no stream of
  // the communicator's). With `stream` nullptr it only checks `args`: kOk
  // when it would enqueue them (the runtime asks once, at load).
  // kNotSupported (the default) where it has no such call; the runtime then
  // calls all_reduce() instead. A failed call fails the communicator before
  // it returns (as all_reduce() does). Allocates nothing itself (the
  // library may, inside).
  virtual Error enqueue_all_reduce(const AllReduceArgs& args, void* stream) {
    (void)args;
    (void)stream;
    return Error::kNotSupported;
  }
  // A collective on this communicator's memory failed outside it (a device
  // all-reduce kernel whose peer did not arrive, a graph holding its
  // enqueued all-reduce that failed): the communicator behaves
  // as after a failure of its own (later calls kPeerFailed; unmapping and
  // destruction skip what would wait for the failed peer).
  virtual void mark_failed() {}

 protected:
  ~Communicator() = default;
};

}  // namespace kiln

#endif  // KILN_RUNTIME_COMMUNICATOR_H_
