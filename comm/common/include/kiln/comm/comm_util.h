// What every communicator of comm/ checks and reads alike: an all-reduce's
// operands, the collective timeout, whether a peer process has exited.
// No MPI, no CUDA: kiln_comm_common, which the communicators link.

#ifndef KILN_COMM_COMM_UTIL_H_
#define KILN_COMM_COMM_UTIL_H_

#include <stdint.h>

#include "kiln/runtime/communicator.h"
#include "kiln/runtime/error.h"

namespace kiln {
namespace comm {

// The checks of an all-reduce's operands every communicator makes, against
// this rank's copy of the symmetric arena (`arena`, `arena_size` bytes): the
// input (`count` elements of the dtype from `input_offset`) inside it, and an
// output that is the input itself or shares no bytes with it; with
// `aligned`, both on whole elements. kInvalidArgument, logged, naming
// `communicator` and `rank`. The dtype is one the communicator reduces.
// `arena` is only compared with, never read: it may be device memory.
Error check_all_reduce_operands(const char* communicator, uint32_t rank, const AllReduceArgs& args,
                                const uint8_t* arena, uint64_t arena_size, bool aligned);

// The collective timeout in milliseconds: `option` when not 0, else
// KILN_COLLECTIVE_TIMEOUT_MS from the environment, else 30000.
uint32_t collective_timeout_ms(uint32_t option);

// Whether process `pid` has exited: gone, or a zombie its parent has not
// reaped yet (kill(pid, 0) still succeeds on one, and a launcher busy with
// the failure may reap late).
bool process_exited(int32_t pid);

// Why a device communicator cannot hand out a mapped arena as device peers
// (Communicator::device_peers), or nullptr when it can: `window`, the arena
// is a window its library maps on every rank (not ordinary device memory);
// `lsa_ranks`, how many of the `ranks` this rank's device reaches by load
// and store (NCCL's load/store-accessible team, LSA), which must be all of
// them, and at most kMaxDevicePeers.
const char* device_peers_unavailable(bool window, uint32_t lsa_ranks, uint32_t ranks);

}  // namespace comm
}  // namespace kiln

#endif  // KILN_COMM_COMM_UTIL_H_
