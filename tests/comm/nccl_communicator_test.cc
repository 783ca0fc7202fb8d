// The nccl communicator, as a single process and under mpirun -n 2.
//
// Without a GPU (CI), or with fewer GPUs than ranks, create() must return
// kDeviceError on every rank: a clean error, never a crash or a hang. With
// one GPU per rank it must work: exact all-reduce results in place and out
// of place, and it says whether its arenas are symmetric windows.

#include <cuda_runtime_api.h>
#include <stdio.h>

#include <memory>
#include <vector>

#include "kiln/comm/nccl_communicator.h"

using kiln::AllReduceArgs;
using kiln::Error;
using kiln::SymmetricMemory;
using kiln::comm::NcclCommunicator;
using kiln::comm::NcclOptions;

namespace {

int g_failures = 0;

#define EXPECT(cond, ...)                          \
  do {                                             \
    if (!(cond)) {                                 \
      ++g_failures;                                \
      fprintf(stderr, "FAIL line %d: ", __LINE__); \
      fprintf(stderr, __VA_ARGS__);                \
      fprintf(stderr, "\n");                       \
    }                                              \
  } while (0)

void run_on_gpus(NcclCommunicator& comm) {
  fprintf(stderr, "rank %u of %u: device %d, symmetric windows %s\n", comm.rank(), comm.size(), comm.device(),
          comm.symmetric_windows() ? "yes" : "no (fallback)");
  const uint64_t count = 1u << 20;
  SymmetricMemory memory;
  Error error = comm.map_symmetric(2 * count * sizeof(float), 4096, 7, &memory);
  EXPECT(error == Error::kOk, "map_symmetric returned %s", kiln::error_name(error));
  if (error != Error::kOk) return;
  std::vector<float> host(count);
  for (uint64_t i = 0; i < count; ++i) host[i] = static_cast<float>((i * 7 + comm.rank() * 13) % 101) - 50.0f;
  uint8_t* arena = static_cast<uint8_t*>(memory.local.handle);
  for (int in_place = 0; in_place < 2; ++in_place) {
    cudaMemcpy(arena, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
    AllReduceArgs args;
    args.memory = memory;
    args.count = count;
    args.output = in_place ? arena : arena + count * sizeof(float);
    error = comm.all_reduce(args);
    EXPECT(error == Error::kOk, "all_reduce (%s) returned %s", in_place ? "in place" : "out of place",
           kiln::error_name(error));
    std::vector<float> got(count);
    cudaMemcpy(got.data(), args.output, count * sizeof(float), cudaMemcpyDeviceToHost);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < count; ++i) {
      float want = 0;
      for (uint32_t r = 0; r < comm.size(); ++r) want += static_cast<float>((i * 7 + r * 13) % 101) - 50.0f;
      wrong += got[i] != want;
    }
    EXPECT(wrong == 0, "all_reduce (%s): %llu wrong elements", in_place ? "in place" : "out of place",
           static_cast<unsigned long long>(wrong));
  }
  comm.unmap_symmetric(memory);
}

}  // namespace

int main() {
  unsigned ranks = 1;
  const bool under_mpirun = kiln::comm::launched_by_mpirun(&ranks);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;

  std::unique_ptr<NcclCommunicator> comm;
  const Error error = NcclCommunicator::create(NcclOptions(), &comm);
  if (devices < static_cast<int>(ranks)) {
    EXPECT(error == Error::kDeviceError, "%d GPUs for %u ranks: create returned %s, expected DeviceError", devices,
           ranks, kiln::error_name(error));
    EXPECT(comm == nullptr, "create failed yet made a communicator");
    if (g_failures == 0) {
      printf("nccl_communicator_test: %d GPUs for %u ranks%s: create returned %s, as expected\n", devices, ranks,
             under_mpirun ? " (mpirun)" : "", kiln::error_name(error));
    }
    return g_failures == 0 ? 0 : 1;
  }
  EXPECT(error == Error::kOk, "create returned %s with %d GPUs", kiln::error_name(error), devices);
  if (comm != nullptr) run_on_gpus(*comm);
  comm.reset();
  if (g_failures == 0) printf("nccl_communicator_test: all-reduce on %u GPUs passed\n", ranks);
  return g_failures == 0 ? 0 : 1;
}
