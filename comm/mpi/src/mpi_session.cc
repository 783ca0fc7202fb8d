#include "kiln/comm/mpi_session.h"

#include <mpi.h>
#include <stdlib.h>

#include "kiln/runtime/log.h"

namespace kiln {
namespace comm {
namespace {

int g_references = 0;
bool g_kiln_initialised_mpi = false;

}  // namespace

Error mpi_session_acquire() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    KILN_LOG(ERROR, "MPI was already finalised in this process; it cannot be started again");
    return Error::kNotSupported;
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      KILN_LOG(ERROR, "MPI_Init_thread failed");
      return Error::kNotSupported;
    }
    g_kiln_initialised_mpi = true;
  }
  ++g_references;
  return Error::kOk;
}

void mpi_session_release(bool may_finalize) {
  if (g_references == 0 || --g_references > 0) return;
  if (!g_kiln_initialised_mpi) return;
  if (!may_finalize) {
    KILN_LOG(WARNING, "MPI is left running: a peer failed, and MPI_Finalize would wait for it");
    return;
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
  g_kiln_initialised_mpi = false;
}

bool launched_by_mpirun(unsigned* out_world_size) {
  // OpenMPI sets OMPI_COMM_WORLD_*; PMIx launchers PMIX_RANK; MPICH's hydra PMI_*.
  const char* size = getenv("OMPI_COMM_WORLD_SIZE");
  if (size == nullptr) size = getenv("PMI_SIZE");
  const bool launched = size != nullptr || getenv("PMIX_RANK") != nullptr || getenv("PMI_RANK") != nullptr;
  if (launched && size != nullptr && out_world_size != nullptr) {
    *out_world_size = static_cast<unsigned>(strtoul(size, nullptr, 10));
  }
  return launched;
}

}  // namespace comm
}  // namespace kiln
