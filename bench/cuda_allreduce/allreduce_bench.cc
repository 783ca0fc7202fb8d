// The CUDA backend's all-reduce kernels (all_reduce.cuh: one-shot and
// two-shot, the launches the delegate records) across processes through the
// cuda-ipc communicator, timed beside a device-to-device copy of the same
// bytes and, where NCCL can be loaded, ncclAllReduce on one rank (its
// single-rank all-reduce: the floor of its launch path, not a peer
// exchange). Compiled once per CUDA flavour, like the backend: over the GPU
// build (kiln_cuda, kiln_comm_cuda_ipc_gpu) and over the host execution
// model (the GPU check's --dry-run); kiln-runner picks one with
// KILN_CUDA_EXECUTION=host, as for programs:
//
//   scripts/kiln-ranks -n 2 -- kiln-runner all-reduce-bench [--min-bytes B]
//       [--max-bytes B] [--iterations-bytes B] [--nccl libnccl.so.2]
//
// (--iterations-bytes: each size runs this many bytes' worth of calls,
// from 3 to 200 of them.)
//
// Every rank, for each size (4 KB to 64 MB by default, x4) and kernel:
//   1. writes its operand (small integers, different on every rank), runs
//      the kernel once and checks every element of its output exactly;
//   2. runs it `iterations` more times back to back on one stream and
//      times them with the host clock around the launches and a final
//      stream synchronisation (launch costs included, as in a recorded
//      graph they would mostly not be: the figure is an upper bound).
// Rank 0 then times the copy and NCCL alone while the others wait.
// Algorithm bandwidth = message bytes / time per call.
//
// Two processes on one GPU share it by time slices unless MPS runs
// (bench/cuda_collectives.sh starts it where it can): the kernels wait for
// each other across those slices, so the figures there measure the
// protocol and its sharing, not NVLink.

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_abi.h"
#include "kiln/comm/cuda_ipc_communicator.h"
#include "launch.h"

namespace kiln_bench::KILN_CUDA_FLAVOR {
namespace {

using namespace ::kiln::backends::cuda::KILN_CUDA_FLAVOR;  // NOLINT: the backend's flavour and its CUDA API
namespace cb = ::kiln::backends::cuda;
using ::kiln::Error;

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

float value(uint64_t i, uint32_t rank, uint32_t salt) {
  return static_cast<float>(static_cast<int32_t>((i * 2654435761u + rank * 40503u + salt * 977u) % 15) - 7);
}

#define BENCH_CUDA(call)                                                         \
  do {                                                                           \
    const cudaError_t e_ = (call);                                               \
    if (e_ != cudaSuccess) {                                                     \
      fprintf(stderr, "rank %u: %s: %s\n", rank, #call, cudaGetErrorString(e_)); \
      return false;                                                              \
    }                                                                            \
  } while (0)

// ncclAllReduce on one rank, loaded at run time (PyTorch's wheel ships
// libnccl.so.2; no NCCL is linked).
struct Nccl {
  using InitAll = int (*)(void** comms, int ndev, const int* devlist);
  using AllReduce = int (*)(const void* send, void* recv, size_t count, int dtype, int op, void* comm, cudaStream_t s);
  using Destroy = int (*)(void* comm);
  void* library = nullptr;
  InitAll init_all = nullptr;
  AllReduce all_reduce = nullptr;
  Destroy destroy = nullptr;
  void* comm = nullptr;
  std::string why_not;

  bool open(const char* path) {
#if KILN_CUDA_HOSTEXEC
    (void)path;
    why_not = "the host execution model has no NCCL";
    return false;
#else
    library = dlopen(path != nullptr && *path != '\0' ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      why_not = std::string("cannot load NCCL: ") + dlerror();
      return false;
    }
    init_all = reinterpret_cast<InitAll>(dlsym(library, "ncclCommInitAll"));
    all_reduce = reinterpret_cast<AllReduce>(dlsym(library, "ncclAllReduce"));
    destroy = reinterpret_cast<Destroy>(dlsym(library, "ncclCommDestroy"));
    int device = 0;
    cudaGetDevice(&device);
    if (init_all == nullptr || all_reduce == nullptr || destroy == nullptr || init_all(&comm, 1, &device) != 0) {
      why_not = "NCCL loaded, but ncclCommInitAll on one device failed";
      return false;
    }
    return true;
#endif
  }
  ~Nccl() {
    if (comm != nullptr) destroy(comm);
  }
};

struct Bench {
  uint32_t rank = 0, ranks = 1;
  std::unique_ptr<::kiln::comm::CudaIpcCommunicator> comm;
  ::kiln::SymmetricMemory memory;
  ::kiln::DevicePeers peers;
  cudaStream_t stream = nullptr;
  uint64_t max_bytes = 0;
  uint64_t output_offset = 0, signal_offset = 0;
  std::vector<float> host;

  uint8_t* base() const { return static_cast<uint8_t*>(memory.local.handle); }

  // A host barrier of every rank (a zero-element all-reduce).
  bool barrier() {
    ::kiln::AllReduceArgs args;
    args.memory = memory;
    args.output = memory.local.handle;
    return comm->all_reduce(args) == Error::kOk;
  }

  Launch launch_of(uint64_t bytes, bool two_shot) const {
    Launch l;
    l.kind = LaunchKind::kAllReduce;
    l.node = "bench";
    l.block = cb::kAllReduceThreads;
    l.grid[0] = cb::all_reduce_blocks(bytes);
    PeerReduceArgs& a = l.all_reduce;
    a = PeerReduceArgs();
    for (uint32_t r = 0; r < peers.count; ++r) a.peers[r] = static_cast<uint8_t*>(peers.bases[r]);
    a.output = reinterpret_cast<float*>(base() + output_offset);
    a.input_offset = 0;
    a.signal_offset = signal_offset;
    a.count = bytes / sizeof(float);
    a.timeout_ns = uint64_t{peers.timeout_ms} * 1000000;
    a.rank = rank;
    a.ranks = ranks;
    a.two_shot = two_shot ? 1 : 0;
    a.peer_exited = peers.peer_exited;
    return l;
  }

  // Writes this rank's operand, runs the kernel once, checks every element.
  bool check(uint64_t bytes, bool two_shot, uint32_t salt, uint64_t* out_wrong) {
    const uint64_t count = bytes / sizeof(float);
    for (uint64_t i = 0; i < count; ++i) host[i] = value(i, rank, salt);
    BENCH_CUDA(cudaMemcpyAsync(base(), host.data(), bytes, cudaMemcpyHostToDevice, stream));
    const Launch l = launch_of(bytes, two_shot);
    enqueue_kernel(l, stream);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaStreamSynchronize(stream));
    BENCH_CUDA(cudaMemcpyAsync(host.data(), base() + output_offset, bytes, cudaMemcpyDeviceToHost, stream));
    BENCH_CUDA(cudaStreamSynchronize(stream));
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < count; ++i) {
      float want = 0.f;
      for (uint32_t r = 0; r < ranks; ++r) want += value(i, r, salt);
      wrong += host[i] != want;
    }
    *out_wrong = wrong;
    return true;
  }

  // Seconds per call of `iterations` kernels back to back.
  bool time_kernel(uint64_t bytes, bool two_shot, uint32_t iterations, double* out_seconds) {
    const Launch l = launch_of(bytes, two_shot);
    enqueue_kernel(l, stream);  // warm-up
    BENCH_CUDA(cudaStreamSynchronize(stream));
    const double start = now_s();
    for (uint32_t k = 0; k < iterations; ++k) enqueue_kernel(l, stream);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaStreamSynchronize(stream));
    *out_seconds = (now_s() - start) / iterations;
    return true;
  }

  bool time_copy(uint64_t bytes, uint32_t iterations, double* out_seconds) {
    BENCH_CUDA(cudaMemcpyAsync(base() + output_offset, base(), bytes, cudaMemcpyDeviceToDevice, stream));
    BENCH_CUDA(cudaStreamSynchronize(stream));
    const double start = now_s();
    for (uint32_t k = 0; k < iterations; ++k) {
      BENCH_CUDA(cudaMemcpyAsync(base() + output_offset, base(), bytes, cudaMemcpyDeviceToDevice, stream));
    }
    BENCH_CUDA(cudaStreamSynchronize(stream));
    *out_seconds = (now_s() - start) / iterations;
    return true;
  }

  bool time_nccl(Nccl& nccl, uint64_t bytes, uint32_t iterations, double* out_seconds) {
    const size_t count = bytes / sizeof(float);
    constexpr int kFloat32 = 7, kSum = 0;
    if (nccl.all_reduce(base(), base() + output_offset, count, kFloat32, kSum, nccl.comm, stream) != 0) return false;
    BENCH_CUDA(cudaStreamSynchronize(stream));
    const double start = now_s();
    for (uint32_t k = 0; k < iterations; ++k) {
      if (nccl.all_reduce(base(), base() + output_offset, count, kFloat32, kSum, nccl.comm, stream) != 0) return false;
    }
    BENCH_CUDA(cudaStreamSynchronize(stream));
    *out_seconds = (now_s() - start) / iterations;
    return true;
  }
};

uint64_t round_up(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

std::string cell(bool ok, double seconds, uint64_t bytes) {
  if (!ok) return "-";
  char text[64];
  snprintf(text, sizeof(text), "%.1f us, %.1f GB/s", seconds * 1e6, static_cast<double>(bytes) / seconds / 1e9);
  return text;
}

std::string size_name(uint64_t bytes) {
  char text[32];
  if (bytes >= (1u << 20)) {
    snprintf(text, sizeof(text), "%llu MB", static_cast<unsigned long long>(bytes >> 20));
  } else {
    snprintf(text, sizeof(text), "%llu KB", static_cast<unsigned long long>(bytes >> 10));
  }
  return text;
}

}  // namespace

// argv: the options above (argv[0] is not one).
int run_all_reduce_bench(int argc, char** argv) {
  uint64_t min_bytes = 4096, max_bytes = uint64_t{64} << 20, budget = uint64_t{1} << 30;
  const char* nccl_path = getenv("KILN_NCCL_LIBRARY");
  for (int i = 0; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--max-bytes") max_bytes = strtoull(argv[i + 1], nullptr, 10);
    if (a == "--min-bytes") min_bytes = strtoull(argv[i + 1], nullptr, 10);
    if (a == "--iterations-bytes") budget = strtoull(argv[i + 1], nullptr, 10);
    if (a == "--nccl") nccl_path = argv[i + 1];
  }
  Bench b;
  ::kiln::comm::CudaIpcOptions options;
#if KILN_CUDA_HOSTEXEC
  options.driver = &::kiln::comm::hostexec_cuda_ipc_driver();
#else
  options.driver = &::kiln::comm::gpu_cuda_ipc_driver();
#endif
  if (::kiln::comm::CudaIpcCommunicator::create(options, &b.comm) != Error::kOk) return 1;
  b.rank = b.comm->rank();
  b.ranks = b.comm->size();
  const uint32_t rank = b.rank;
  b.max_bytes = max_bytes;
  b.output_offset = round_up(max_bytes, 4096);
  b.signal_offset = 2 * b.output_offset;
  const uint64_t arena = b.signal_offset + cb::all_reduce_signal_bytes(cb::kAllReduceMaxBlocks);
  if (b.comm->map_symmetric(arena, 256, arena, &b.memory) != Error::kOk ||
      b.comm->device_peers(b.memory, &b.peers) != Error::kOk) {
    return 1;
  }
  if (cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking) != cudaSuccess) return 1;
  b.host.resize(max_bytes / sizeof(float));
  Nccl nccl;
  const bool have_nccl = rank == 0 && nccl.open(nccl_path);
  if (rank == 0) {
    printf("all-reduce of float32 across %u processes through cuda-ipc (%s), device %d; every output checked\n",
           b.ranks, options.driver->name, b.comm->device());
    if (!have_nccl) printf("ncclAllReduce left out: %s\n", nccl.why_not.c_str());
    printf("\n| size | one-shot | two-shot | device-to-device copy | ncclAllReduce, 1 rank |\n|---|---|---|---|---|\n");
  }
  int failures = 0;
  uint32_t salt = 0;
  for (uint64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const uint32_t iterations = static_cast<uint32_t>(budget / bytes < 3     ? 3
                                                      : budget / bytes > 200 ? 200
                                                                             : budget / bytes);
    double seconds[2] = {0, 0};
    bool timed[2] = {false, false};
    for (int two_shot = 0; two_shot < 2; ++two_shot) {
      uint64_t wrong = 0;
      if (!b.check(bytes, two_shot != 0, ++salt, &wrong)) return 1;
      if (wrong != 0) {
        ++failures;
        printf("FAIL rank %u: %s %s: %llu of %llu elements wrong\n", rank, size_name(bytes).c_str(),
               two_shot ? "two-shot" : "one-shot", static_cast<unsigned long long>(wrong),
               static_cast<unsigned long long>(bytes / 4));
      }
      timed[two_shot] = b.time_kernel(bytes, two_shot != 0, iterations, &seconds[two_shot]);
      if (!timed[two_shot]) return 1;
    }
    // The copy and NCCL on rank 0 alone.
    if (!b.barrier()) return 1;
    double copy = 0, reduce = 0;
    bool copied = false, reduced = false;
    if (rank == 0) {
      copied = b.time_copy(bytes, iterations, &copy);
      reduced = have_nccl && b.time_nccl(nccl, bytes, iterations, &reduce);
    }
    if (!b.barrier()) return 1;
    if (rank == 0) {
      printf("| %s | %s | %s | %s | %s |\n", size_name(bytes).c_str(), cell(timed[0], seconds[0], bytes).c_str(),
             cell(timed[1], seconds[1], bytes).c_str(), cell(copied, copy, bytes).c_str(),
             cell(reduced, reduce, bytes).c_str());
      fflush(stdout);
    }
  }
  if (failures == 0) printf("rank %u: every output of every kernel right\n", rank);
  cudaStreamDestroy(b.stream);
  b.comm->unmap_symmetric(b.memory);
  return failures == 0 ? 0 : 1;
}

}  // namespace kiln_bench::KILN_CUDA_FLAVOR
