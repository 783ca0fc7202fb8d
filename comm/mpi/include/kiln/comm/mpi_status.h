// The status helper for MPI calls made by kiln's communicators (mpi-shm and
// nccl, which starts through MPI): a call whose failure fails the caller
// goes through KILN_MPI_CHECK, which logs the message, the call and MPI's
// own error string, and returns a kiln Error:
//
//   KILN_MPI_CHECK(MPI_Allgather(...), Error::kInternal, "mpi-shm: rank %d: arena %u's layout", rank, arena);
//   -> "mpi-shm: rank 1: arena 0's layout: MPI_Allgather(...): MPI_ERR_COMM: invalid communicator"
//
// Only calls on a communicator whose error handler returns (MPI_ERRORS_RETURN)
// ever see a failure: MPI's default handler aborts the job instead.

#ifndef KILN_COMM_MPI_STATUS_H_
#define KILN_COMM_MPI_STATUS_H_

#include <mpi.h>

#include "kiln/runtime/check.h"

namespace kiln {
namespace comm {

// MPI's words for error code `code`; valid until the calling thread asks
// again.
const char* mpi_error_string(int code);

}  // namespace comm
}  // namespace kiln

#define KILN_MPI_CHECK(call, error, ...) \
  KILN_CHECK_STATUS(call, MPI_SUCCESS, ::kiln::comm::mpi_error_string, error, __VA_ARGS__)

#endif  // KILN_COMM_MPI_STATUS_H_
