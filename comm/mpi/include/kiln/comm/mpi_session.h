// MPI initialisation shared by kiln's communicators (mpi-shm, nccl), so that
// one process may hold both and neither finalises MPI under the other.
//
// The first mpi_session_acquire() initialises MPI unless the application
// already has (MPI_THREAD_FUNNELED: one thread calls MPI); every acquire is
// matched by one mpi_session_release(), and the last one finalises MPI only
// if kiln initialised it, and only when `may_finalize` (false after a peer
// failed: MPI_Finalize synchronises with every rank and would wait for the
// failed one). MPI cannot be initialised again once finalised: an acquire
// then fails. Not thread safe, like the communicators.

#ifndef KILN_COMM_MPI_SESSION_H_
#define KILN_COMM_MPI_SESSION_H_

#include <stdint.h>

#include "kiln/comm/comm_util.h"
#include "kiln/runtime/communicator.h"
#include "kiln/runtime/error.h"

namespace kiln {
namespace comm {

// kOk, or kNotSupported (logged) when MPI was finalised or fails to start.
Error mpi_session_acquire();
void mpi_session_release(bool may_finalize);

// One acquire of the session for a communicator's create(): open()
// acquires it and learns this process's place in MPI_COMM_WORLD; unless
// keep() is called (the communicator was made), it is released (may
// finalise) when this goes out of scope, so a create() that fails part-way
// leaves MPI as it found it.
class MpiSession {
 public:
  MpiSession() = default;
  ~MpiSession() {
    if (open_ && !kept_) mpi_session_release(true);
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  Error open();
  void keep() { kept_ = true; }
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

 private:
  bool open_ = false;
  bool kept_ = false;
  int world_rank_ = 0;
  int world_size_ = 1;
};

// Compares one symmetric arena's planned size and layout digest across
// MPI_COMM_WORLD (every rank calls it; collective). kOk when all agree;
// otherwise every rank logs which ranks differ, with their sizes and
// digests, and returns kCommunicatorMismatch. `communicator` and `arena`
// name them in the message. kInternal when MPI fails.
Error mpi_compare_layouts(const char* communicator, uint32_t arena, uint64_t size, uint64_t layout_digest);

// Whether this process was started by OpenMPI's mpirun/mpiexec (or another
// PMIx launcher): its environment names the job (OMPI_COMM_WORLD_SIZE,
// PMIX_RANK). `out_world_size`, when given and known, receives the job's
// rank count. Reads the environment only: MPI is not initialised, so a
// program can decide whether to create a communicator at all (kiln run).
bool launched_by_mpirun(unsigned* out_world_size = nullptr);

}  // namespace comm
}  // namespace kiln

#endif  // KILN_COMM_MPI_SESSION_H_
