#include "nccl_peers.h"

#include <nccl_device.h>

namespace kiln {
namespace comm {
namespace internal {
namespace {

__global__ void window_peers_kernel(ncclWindow_t window, size_t offset, int ranks, void** out_bases) {
  const int rank = static_cast<int>(threadIdx.x);
  if (rank < ranks) out_bases[rank] = ncclGetPeerPointer(window, offset, rank);
}

}  // namespace

cudaError_t nccl_window_peers(ncclWindow_t window, size_t offset, int ranks, void** out_bases) {
  void** bases = nullptr;
  cudaError_t error = cudaMalloc(reinterpret_cast<void**>(&bases), sizeof(void*) * static_cast<size_t>(ranks));
  if (error != cudaSuccess) return error;
  window_peers_kernel<<<1, ranks>>>(window, offset, ranks, bases);
  error = cudaGetLastError();
  if (error == cudaSuccess) error = cudaDeviceSynchronize();
  if (error == cudaSuccess) {
    error = cudaMemcpy(out_bases, bases, sizeof(void*) * static_cast<size_t>(ranks), cudaMemcpyDeviceToHost);
  }
  const cudaError_t freed = cudaFree(bases);
  return error != cudaSuccess ? error : freed;
}

int nccl_lsa_ranks(ncclComm_t comm) { return ncclTeamLsa(comm).nRanks; }

}  // namespace internal
}  // namespace comm
}  // namespace kiln
