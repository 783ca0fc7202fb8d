// Every rank's address of an NCCL symmetric window, as this rank's device
// loads from and stores to it (NCCL's load/store-accessible team, LSA).
// NCCL 2.28 gives these only in device code (ncclGetPeerPointer, an inline
// function of its device API), so a one-thread-per-rank kernel
// (nccl_peers.cu, compiled by nvcc) writes them into device memory and
// they are copied back. Called once per mapped window, when a method maps
// its symmetric arenas; it allocates (a few bytes of device memory) and
// synchronises the device.

#ifndef KILN_COMM_NCCL_SRC_NCCL_PEERS_H_
#define KILN_COMM_NCCL_SRC_NCCL_PEERS_H_

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stddef.h>

namespace kiln {
namespace comm {
namespace internal {

// out_bases[r] = rank r's copy of `window` plus `offset`, for r < ranks
// (world ranks, which must all be in this rank's LSA team). The CUDA
// runtime's error where a call failed.
cudaError_t nccl_window_peers(ncclWindow_t window, size_t offset, int ranks, void** out_bases);

// How many ranks of `comm` this rank's device reaches by load and store
// (the size of its LSA team, ncclTeamLsa; a host call of the device API).
int nccl_lsa_ranks(ncclComm_t comm);

}  // namespace internal
}  // namespace comm
}  // namespace kiln

#endif  // KILN_COMM_NCCL_SRC_NCCL_PEERS_H_
