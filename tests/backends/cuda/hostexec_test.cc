// The host execution model of CUDA (backends/cuda/hostexec) on its own:
// block barriers order shared-memory writes and reads, warp shuffles
// exchange lanes, atomics interleave without losing updates, a barrier
// that cannot be reached is reported instead of hanging, stream capture
// records launches that a graph launch replays, and the driver's virtual
// memory subset (hostexec_vmm.h) shares one allocation between mappings
// and processes.

#include <gtest/gtest.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "backends/cuda/hostexec/hostexec.h"
#include "backends/cuda/hostexec/hostexec_vmm.h"
// The host execution model's build of the backend (cuda_flavor.h).
#define KILN_CUDA_HOSTEXEC 1
#include "kiln/backends/cuda/cuda_backend.h"
#include "kiln/runtime/communicator.h"

namespace kiln::backends::cuda::hostexec {
namespace {

template <typename Args>
void run(void (*kernel)(Args), dim3 grid, dim3 block, const Args& args, cudaStream_t stream = nullptr) {
  // The same shape as KILN_CUDA_LAUNCH, without the backend's headers.
  static void (*k)(Args) = nullptr;
  k = kernel;
  launch(
      grid, block, stream, [](const void* a) { k(*static_cast<const Args*>(a)); }, &args, sizeof(args));
}

struct ReverseArgs {
  const int* in;
  int* out;
};

// Each thread writes its element to shared memory; after the barrier each
// reads another thread's: wrong without a real barrier between.
__global__ void reverse_kernel(ReverseArgs p) {
  __shared__ int tile[256];
  const unsigned t = threadIdx.x;
  tile[t] = p.in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  p.out[blockIdx.x * blockDim.x + t] = tile[blockDim.x - 1 - t];
}

TEST(CudaHostExec, BlockBarrierOrdersSharedMemory) {
  std::vector<int> in(512), out(512, -1);
  for (int i = 0; i < 512; ++i) in[i] = i;
  run(reverse_kernel, dim3(2), dim3(256), ReverseArgs{in.data(), out.data()});
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < 256; ++t) EXPECT_EQ(out[b * 256 + t], b * 256 + 255 - t);
  }
}

struct IndexArgs {
  unsigned* out;
};

__global__ void index_kernel(IndexArgs p) {
  const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  p.out[block * blockDim.x * blockDim.y * blockDim.z + thread] = block * 1000 + thread;
}

TEST(CudaHostExec, EveryThreadOfEveryBlockRunsOnceWithItsIndices) {
  std::vector<unsigned> out(2 * 3 * 2 * 4 * 2 * 3, 0);
  run(index_kernel, dim3(2, 3, 2), dim3(4, 2, 3), IndexArgs{out.data()});
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (unsigned i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], i / 24 * 1000 + i % 24) << i;
}

struct ShuffleArgs {
  float* down;
  int* xor_out;
  float* sum;
};

__global__ void shuffle_kernel(ShuffleArgs p) {
  const unsigned t = threadIdx.x, lane = t % 32;
  p.down[t] = __shfl_down_sync(0xffffffffu, static_cast<float>(t), 3);
  p.xor_out[t] = __shfl_xor_sync(0xffffffffu, static_cast<int>(t), 5);
  float v = static_cast<float>(lane);
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  p.sum[t] = v;
}

TEST(CudaHostExec, WarpShufflesExchangeLanesOfTheirOwnWarp) {
  std::vector<float> down(64), sum(64);
  std::vector<int> x(64);
  run(shuffle_kernel, dim3(1), dim3(64), ShuffleArgs{down.data(), x.data(), sum.data()});
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (unsigned t = 0; t < 64; ++t) {
    const unsigned lane = t % 32;
    // Lanes past the warp's end keep their own value.
    EXPECT_EQ(down[t], lane + 3 < 32 ? static_cast<float>(t + 3) : static_cast<float>(t)) << t;
    EXPECT_EQ(x[t], static_cast<int>(t - lane + (lane ^ 5))) << t;
    EXPECT_EQ(sum[t], 496.f) << t;  // 0 + 1 + ... + 31 in every lane
  }
}

struct AtomicArgs {
  int* counter;
  int* max;
  float* sum;
};

__global__ void atomic_kernel(AtomicArgs p) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(p.counter, 1);
  atomicMax(p.max, t);
  atomicAdd(p.sum, 0.5f);
}

TEST(CudaHostExec, AtomicsInterleaveWithoutLosingUpdates) {
  int counter = 0, max = -1;
  float sum = 0.f;
  reset_stats();
  run(atomic_kernel, dim3(3), dim3(128), AtomicArgs{&counter, &max, &sum});
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(counter, 384);
  EXPECT_EQ(max, 383);
  EXPECT_EQ(sum, 192.f);
  // Each atomic yields: threads interleave between them.
  EXPECT_GT(stats().switches, 3u * 384u);
}

struct DivergentArgs {
  int* out;
};

// Half the block waits at a barrier the other half never reaches while
// staying alive (they wait at a second, different barrier).
__global__ void divergent_kernel(DivergentArgs p) {
  if (threadIdx.x < 16) {
    __syncwarp();
  } else {
    __syncthreads();
  }
  p.out[threadIdx.x] = 1;
}

TEST(CudaHostExec, AnUnreachableBarrierIsADeadlockNotAHang) {
  std::vector<int> out(64, 0);
  reset_stats();
  run(divergent_kernel, dim3(1), dim3(64), DivergentArgs{out.data()});
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(stats().deadlocks, 1u);
  // The next launch runs normally.
  std::vector<int> in(256, 7), rev(256);
  run(reverse_kernel, dim3(1), dim3(256), ReverseArgs{in.data(), rev.data()});
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(rev[0], 7);
}

struct EarlyExitArgs {
  int* out;
};

// Threads that exit count as arrived at later barriers (sm_70 and later).
__global__ void early_exit_kernel(EarlyExitArgs p) {
  if (threadIdx.x >= 32) return;
  __syncthreads();
  p.out[threadIdx.x] = 2;
}

TEST(CudaHostExec, ExitedThreadsCountAsArrived) {
  std::vector<int> out(64, 0);
  run(early_exit_kernel, dim3(1), dim3(64), EarlyExitArgs{out.data()});
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[40], 0);
}

struct AddOneArgs {
  int* data;
};

__global__ void add_one_kernel(AddOneArgs p) { p.data[threadIdx.x] += 1; }

TEST(CudaHostExec, CaptureRecordsAndAGraphReplays) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::vector<int> data(32, 0), host(32, 5);
  reset_stats();
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(data.data(), host.data(), 32 * sizeof(int), cudaMemcpyHostToDevice, stream), cudaSuccess);
  run(add_one_kernel, dim3(1), dim3(32), AddOneArgs{data.data()}, stream);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(data[0], 0);  // captured, not run
  EXPECT_EQ(stats().captured, 2u);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(data[31], 6);
  host[31] = 10;  // the copy reads the host bytes when replayed
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(data[31], 11);
  EXPECT_EQ(stats().graph_launches, 2u);
  EXPECT_EQ(stats().launches, 2u);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

struct SharedArgs {
  int* counter;
  float* sum;
};

__global__ void shared_add_kernel(SharedArgs p) {
  for (int i = 0; i < 50; ++i) {
    atomicAdd_system(p.counter, 1);
    atomicAdd_system(p.sum, 1.0f);
  }
}

struct MessageArgs {
  int* data;
  unsigned* flag;
  int* wrong;
  int n;
};

// The producer writes the data, fences at system scope, then raises the flag.
__global__ void produce_kernel(MessageArgs p) {
  for (int i = static_cast<int>(threadIdx.x); i < p.n; i += static_cast<int>(blockDim.x)) p.data[i] = 3 * i + 1;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    atomicExch_system(p.flag, 1u);
  }
}

// The consumer waits for the flag (bounded), fences, then reads the data.
__global__ void consume_kernel(MessageArgs p) {
  if (threadIdx.x == 0) {
    int spins = 0;
    while (atomicCAS_system(p.flag, 0u, 0u) == 0u && ++spins < 4000000) __nanosleep(100);
    __threadfence_system();
    if (spins >= 4000000) atomicAdd(p.wrong, 1 << 20);
  }
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < p.n; i += static_cast<int>(blockDim.x)) {
    if (p.data[i] != 3 * i + 1) atomicAdd(p.wrong, 1);
  }
}

// Kernels in two processes sharing memory (as ranks share an MPI window
// standing in for device memory): no update of a system atomic is lost,
// and data written before a fence and a flag is what the peer reads after
// seeing the flag and fencing.
TEST(CudaHostExec, SystemAtomicsAndFencesHoldBetweenProcesses) {
  void* shared = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  int* counter = static_cast<int*>(shared);
  float* sum = reinterpret_cast<float*>(counter + 1);
  unsigned* flag = reinterpret_cast<unsigned*>(counter + 2);
  int* wrong = counter + 3;
  int* data = counter + 16;
  const int n = 4096;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    run(shared_add_kernel, dim3(2), dim3(64), SharedArgs{counter, sum});
    run(consume_kernel, dim3(1), dim3(64), MessageArgs{data, flag, wrong, n});
    _exit(cudaGetLastError() == cudaSuccess && *wrong == 0 ? 0 : 1);
  }
  run(shared_add_kernel, dim3(2), dim3(64), SharedArgs{counter, sum});
  run(produce_kernel, dim3(1), dim3(64), MessageArgs{data, flag, wrong, n});
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the consumer read " << *wrong << " wrong values";
  EXPECT_EQ(*counter, 2 * 2 * 64 * 50);
  EXPECT_EQ(*sum, 2.f * 2 * 64 * 50);
  munmap(shared, 1 << 16);
}

// In a multi-rank program cuda:0 is the rank's local GPU, by the rule the
// device communicator follows (rank_local_device), so a rank computes and
// reduces on one GPU; cuda:N are the GPUs after it. One rank: cuda:N is GPU N.
TEST(CudaHostExec, CudaZeroOfARankIsTheCommunicatorsDevice) {
  setenv("KILN_HOSTEXEC_DEVICES", "4", 1);
  for (int node_rank : {-1, 0, 1, 3, 6}) {
    CudaOptions options;
    options.node_rank = node_rank;
    CudaBackend backend(options);
    DeviceBuffer first, second;
    ASSERT_EQ(backend.allocate(Device(DeviceType::CUDA, 0), 256, 256, &first), Error::kOk);
    ASSERT_EQ(backend.allocate(Device(DeviceType::CUDA, 1), 256, 256, &second), Error::kOk);
    const int local = node_rank < 0 ? 0 : rank_local_device(node_rank, 4);
    EXPECT_EQ(local, node_rank < 0 ? 0 : node_rank % 4);
    EXPECT_EQ(backend.physical_device(0), local) << "node rank " << node_rank;
    EXPECT_EQ(backend.physical_device(1), (local + 1) % 4) << "node rank " << node_rank;
    backend.release(Device(DeviceType::CUDA, 0), first);
    backend.release(Device(DeviceType::CUDA, 1), second);
  }
  unsetenv("KILN_HOSTEXEC_DEVICES");
}

CUmemAllocationProp shareable_properties() {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

// Reserves `size` bytes aligned to `alignment` and maps `handle` there.
unsigned char* map_handle(CUmemGenericAllocationHandle handle, size_t size, size_t alignment) {
  CUdeviceptr at = 0;
  if (cuMemAddressReserve(&at, size, alignment, 0, 0) != CUDA_SUCCESS) return nullptr;
  if (cuMemMap(at, size, 0, handle, 0) != CUDA_SUCCESS) return nullptr;
  CUmemAccessDesc access;
  memset(&access, 0, sizeof(access));
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (cuMemSetAccess(at, size, &access, 1) != CUDA_SUCCESS) return nullptr;
  return reinterpret_cast<unsigned char*>(at);
}

// cuMemCreate, export, import and map: two mappings of one allocation
// (one through an imported descriptor, in a child process too) are the same
// bytes, a new allocation is zero, a mapping outlives its released handle,
// and what the driver refuses is refused.
TEST(CudaHostExec, VirtualMemorySharesOneAllocationBetweenMappingsAndProcesses) {
  const CUmemAllocationProp prop = shareable_properties();
  size_t granularity = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), CUDA_SUCCESS);
  const size_t size = 4 * granularity;
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, size, &prop, 0), CUDA_SUCCESS);
  int fd = -1;
  ASSERT_EQ(cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_EQ(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_SUCCESS);
  unsigned char* a = map_handle(handle, size, 1 << 16);
  unsigned char* b = map_handle(imported, size, 0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % (1 << 16), 0u) << "the reservation's alignment";
  EXPECT_NE(a, b);
  size_t nonzero = 0;
  for (size_t i = 0; i < size; ++i) nonzero += a[i] != 0;
  EXPECT_EQ(nonzero, 0u) << "a new allocation is zero";
  a[0] = 7;
  a[size - 1] = 9;
  EXPECT_EQ(b[0], 7);
  EXPECT_EQ(b[size - 1], 9);
  // The handles released (and the caller's descriptor closed, as after an
  // import from a peer), the mappings still hold the memory.
  EXPECT_EQ(cuMemRelease(imported), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A process that maps the exported descriptor writes what the parent reads.
    CUmemGenericAllocationHandle theirs = 0;
    if (cuMemImportFromShareableHandle(&theirs, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != CUDA_SUCCESS) {
      _exit(2);
    }
    unsigned char* c = map_handle(theirs, size, 0);
    if (c == nullptr || c[0] != 7) _exit(3);
    c[1] = 11;
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(a[1], 11);
  close(fd);
  a[2] = 5;
  EXPECT_EQ(b[2], 5);
  EXPECT_EQ(cuMemUnmap(reinterpret_cast<CUdeviceptr>(a), size), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(reinterpret_cast<CUdeviceptr>(a), size), CUDA_SUCCESS);
  EXPECT_EQ(b[2], 5) << "unmapping one mapping leaves the other";
  EXPECT_EQ(cuMemUnmap(reinterpret_cast<CUdeviceptr>(b), size), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(reinterpret_cast<CUdeviceptr>(b), size), CUDA_SUCCESS);

  // Refused: a size off the granularity, a handle type other than POSIX
  // descriptors, importing a descriptor that is not open.
  CUmemGenericAllocationHandle refused = 0;
  EXPECT_EQ(cuMemCreate(&refused, granularity + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  CUmemAllocationProp other = prop;
  other.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  EXPECT_EQ(cuMemCreate(&refused, granularity, &other, 0), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cuMemImportFromShareableHandle(&refused, reinterpret_cast<void*>(static_cast<intptr_t>(100000)),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_ERROR_INVALID_HANDLE);
}

}  // namespace
}  // namespace kiln::backends::cuda::hostexec
