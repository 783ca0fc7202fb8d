#include "kiln/comm/mpi_session.h"

#include <mpi.h>
#include <stdlib.h>

#include <vector>

#include "kiln/comm/mpi_status.h"

namespace kiln {
namespace comm {
namespace {

int g_references = 0;
bool g_kiln_initialised_mpi = false;

}  // namespace

const char* mpi_error_string(int code) {
  static thread_local char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "an unknown MPI error";
  return text;
}

Error mpi_session_acquire() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  KILN_CHECK_OR_RETURN(!finalized, Error::kNotSupported,
                       "MPI was already finalised in this process; it cannot be started again");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    KILN_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), Error::kNotSupported,
                   "MPI cannot start");
    g_kiln_initialised_mpi = true;
  }
  ++g_references;
  return Error::kOk;
}

Error MpiSession::open() {
  KILN_RETURN_IF_ERROR(mpi_session_acquire());
  open_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
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

Error mpi_compare_layouts(const char* communicator, uint32_t arena, uint64_t size, uint64_t layout_digest) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<uint64_t> layouts(2 * static_cast<size_t>(ranks));
  const uint64_t mine[2] = {size, layout_digest};
  KILN_MPI_CHECK(MPI_Allgather(mine, 2, MPI_UINT64_T, layouts.data(), 2, MPI_UINT64_T, MPI_COMM_WORLD),
                 Error::kInternal, "%s: rank %d: gathering symmetric arena %u's layout", communicator, rank, arena);
  auto same = [&](int r) { return layouts[2 * r] == layouts[0] && layouts[2 * r + 1] == layouts[1]; };
  bool agree = true;
  for (int r = 1; r < ranks; ++r) agree = agree && same(r);
  if (agree) return Error::kOk;
  for (int r = 1; r < ranks; ++r) {
    if (same(r)) continue;
    KILN_LOG(ERROR, "%s: rank %d: symmetric arena %u: rank %d has %llu bytes, layout digest 0x%016llx", communicator,
             rank, arena, r, static_cast<unsigned long long>(layouts[2 * r]),
             static_cast<unsigned long long>(layouts[2 * r + 1]));
  }
  KILN_RETURN_ERROR(Error::kCommunicatorMismatch,
                    "%s: rank %d: symmetric arena %u is planned differently across ranks (those above); rank 0 has "
                    "%llu bytes, layout digest 0x%016llx",
                    communicator, rank, arena, static_cast<unsigned long long>(layouts[0]),
                    static_cast<unsigned long long>(layouts[1]));
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
