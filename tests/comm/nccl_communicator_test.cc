// The nccl communicator, as a single process and under mpirun -n 2.
//
// Without a GPU (CI), or with fewer GPUs than ranks, create() must return
// kDeviceError on every rank: a clean error, never a crash or a hang. With
// one GPU per rank it must work: a new arena reads all zero; device_peers
// hands out every rank's copy (bases[rank] the local one) where the arenas
// are load/store-accessible windows, else kNotSupported; exact all-reduce
// results in place and out of place through all_reduce(), and through
// enqueue_all_reduce() captured into a CUDA graph on a stream of the test's
// own and replayed with new inputs. Without enough GPUs the GPU part is
// skipped, and says so.

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

float value(uint64_t i, uint32_t rank, int round) {
  return static_cast<float>((i * 7 + rank * 13 + static_cast<uint64_t>(round) * 3) % 101) - 50.0f;
}

void check_zero_and_peers(NcclCommunicator& comm, const SymmetricMemory& memory, uint64_t bytes) {
  std::vector<uint8_t> got(bytes, 1);
  cudaMemcpy(got.data(), memory.local.handle, bytes, cudaMemcpyDeviceToHost);
  uint64_t nonzero = 0;
  for (uint8_t b : got) nonzero += b != 0;
  EXPECT(nonzero == 0, "a new arena holds %llu non-zero bytes", static_cast<unsigned long long>(nonzero));
  kiln::DevicePeers peers;
  const Error error = comm.device_peers(memory, &peers);
  fprintf(stderr, "rank %u: device_peers: %s\n", comm.rank(), kiln::error_name(error));
  EXPECT(error == Error::kOk || error == Error::kNotSupported, "device_peers returned %s", kiln::error_name(error));
  EXPECT(error == Error::kNotSupported || comm.symmetric_windows(), "device peers of ordinary memory");
  if (error != Error::kOk) return;
  EXPECT(peers.count == comm.size() && peers.bases[comm.rank()] == memory.local.handle && peers.timeout_ms > 0,
         "device peers: %u of %u, own %p (local %p), timeout %u ms", peers.count, comm.size(), peers.bases[comm.rank()],
         memory.local.handle, peers.timeout_ms);
  for (uint32_t r = 0; r < peers.count; ++r) EXPECT(peers.bases[r] != nullptr, "no address for rank %u", r);
}

// enqueue_all_reduce() captured into a graph, then replayed three times,
// each with new inputs copied in on the same stream before it.
void check_enqueued(NcclCommunicator& comm, const SymmetricMemory& memory, uint64_t count) {
  uint8_t* arena = static_cast<uint8_t*>(memory.local.handle);
  AllReduceArgs args;
  args.memory = memory;
  args.count = count;
  args.output = arena + count * sizeof(float);
  EXPECT(comm.enqueue_all_reduce(args, nullptr) == Error::kOk, "enqueue_all_reduce refused its arguments");
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  const Error enqueued = comm.enqueue_all_reduce(args, stream);
  const cudaError_t captured = cudaStreamEndCapture(stream, &graph);
  EXPECT(enqueued == Error::kOk && captured == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess,
         "capturing ncclAllReduce: %s, %s", kiln::error_name(enqueued), cudaGetErrorString(captured));
  std::vector<float> host(count), got(count);
  for (int round = 0; round < 3 && exec != nullptr; ++round) {
    for (uint64_t i = 0; i < count; ++i) host[i] = value(i, comm.rank(), round);
    cudaMemcpyAsync(arena, host.data(), count * sizeof(float), cudaMemcpyHostToDevice, stream);
    cudaGraphLaunch(exec, stream);
    cudaMemcpyAsync(got.data(), args.output, count * sizeof(float), cudaMemcpyDeviceToHost, stream);
    EXPECT(cudaStreamSynchronize(stream) == cudaSuccess, "replay %d failed", round);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < count; ++i) {
      float want = 0;
      for (uint32_t r = 0; r < comm.size(); ++r) want += value(i, r, round);
      wrong += got[i] != want;
    }
    EXPECT(wrong == 0, "replay %d of the captured all-reduce: %llu wrong elements", round,
           static_cast<unsigned long long>(wrong));
  }
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

void run_on_gpus(NcclCommunicator& comm) {
  fprintf(stderr, "rank %u of %u: device %d, symmetric windows %s\n", comm.rank(), comm.size(), comm.device(),
          comm.symmetric_windows() ? "yes" : "no (fallback)");
  const uint64_t count = 1u << 20;
  SymmetricMemory memory;
  Error error = comm.map_symmetric(2 * count * sizeof(float), 4096, 7, &memory);
  EXPECT(error == Error::kOk, "map_symmetric returned %s", kiln::error_name(error));
  if (error != Error::kOk) return;
  check_zero_and_peers(comm, memory, 2 * count * sizeof(float));
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
  check_enqueued(comm, memory, count);
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
      printf(
          "nccl_communicator_test: %d GPUs for %u ranks%s: create returned %s, as expected; the GPU part "
          "(device peers, all-reduces, the captured ncclAllReduce) skipped: no GPU for every rank\n",
          devices, ranks, under_mpirun ? " (mpirun)" : "", kiln::error_name(error));
    }
    return g_failures == 0 ? 0 : 1;
  }
  EXPECT(error == Error::kOk, "create returned %s with %d GPUs", kiln::error_name(error), devices);
  if (comm != nullptr) run_on_gpus(*comm);
  comm.reset();
  if (g_failures == 0) printf("nccl_communicator_test: all-reduce on %u GPUs passed\n", ranks);
  return g_failures == 0 ? 0 : 1;
}
