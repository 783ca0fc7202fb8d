// The cuda-ipc communicator's bootstrap: how N processes on one node meet
// and exchange bytes and file descriptors without MPI (the header of
// kiln/comm/cuda_ipc_communicator.h says where they meet). A star: rank 0
// listens on a Unix-domain socket, every other rank connects and says who
// it is; each exchange is every rank sending its part to rank 0, and rank 0
// sending everything to every rank. Every receive is bounded by a timeout;
// a peer that closes its socket (it exited) fails the exchange at once, and
// a failed exchange closes every socket, so the other ranks fail too
// instead of waiting out their timeouts.
//
// Allocates (at open and in each exchange); not thread safe.

#ifndef KILN_COMM_CUDA_IPC_SRC_BOOTSTRAP_H_
#define KILN_COMM_CUDA_IPC_SRC_BOOTSTRAP_H_

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

#include "kiln/runtime/error.h"

namespace kiln {
namespace comm {
namespace internal {

constexpr uint32_t kMaxBootstrapRanks = 64;

class Bootstrap {
 public:
  Bootstrap() = default;
  ~Bootstrap() { close_all(); }
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  // Meets the other `size` - 1 ranks at `rendezvous` (a socket path, or
  // '@' and an abstract name) within `timeout_ms`. kPeerFailed (logged,
  // naming what is missing or wrong) when they do not all arrive, when a
  // rank names another world size, or when two ranks claim one rank.
  Error open(uint32_t rank, uint32_t size, const std::string& rendezvous, uint32_t timeout_ms);

  // Every rank's `bytes` bytes, in rank order, into `out_all` (size * bytes).
  // Waits at most `timeout_ms` in all; `what` names the exchange in messages.
  Error all_gather(const void* mine, size_t bytes, void* out_all, uint32_t timeout_ms, const char* what);
  // Every rank's file descriptor `mine`: out_fds[r] a descriptor of this
  // process for rank r's (this rank's own slot: -1). The caller closes them.
  Error all_gather_fds(int mine, int* out_fds, uint32_t timeout_ms, const char* what);

  void close_all();

 private:
  uint32_t rank_ = 0;
  uint32_t size_ = 1;
  // Rank 0: one socket per peer (index r; -1 for itself); others: [0], rank 0's.
  std::vector<int> sockets_;
};

}  // namespace internal
}  // namespace comm
}  // namespace kiln

#endif  // KILN_COMM_CUDA_IPC_SRC_BOOTSTRAP_H_
