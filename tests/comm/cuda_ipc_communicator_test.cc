// The cuda-ipc communicator under the host execution model of CUDA (its
// hostexec calls: CUDA virtual memory over memfd and mmap), across real
// processes started by scripts/kiln-ranks (through tests/comm/run_mpi.py,
// which judges how the job ended). One mode per run, the first argument:
//
//   correctness   every rank's copy of a mapped arena visible to every rank
//                 and zero when mapped; what one rank writes, every peer
//                 reads; all_reduce() exact for float32, int32, float16,
//                 in place and out of place, across chunk boundaries; two
//                 arenas at once; layout digests that differ refused on
//                 every rank (and the communicator still usable); 20 map /
//                 unmap rounds of changing sizes, each zeroed; device_peers
//   killed        rank 1 raises SIGKILL: every other rank's all_reduce()
//                 fails with kPeerFailed within 5 s, and the watchdog sets
//                 the peer-exit word the kernels read to 2
//   stuck         rank 1 sleeps past the collective timeout: every other
//                 rank gets kPeerFailed naming it
//   missing       the last rank never comes: every other rank's create()
//                 fails with kPeerFailed within the rendezvous timeout (1.5 s)
//                 plus 5 s
//   size          rank 1 names a larger world: create() fails on every rank
//   stale         the rendezvous is a socket file a dead job left behind:
//                 rank 0 removes it and every rank meets
//
// Every rank checks its own results and prints "FAIL ..." lines; a rank
// that passes prints "rank R: ok" (or "PeerFailed as expected").

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/comm/cuda_ipc_communicator.h"
#include "kiln/kernels/float16.h"

using kiln::AllReduceArgs;
using kiln::DevicePeers;
using kiln::DType;
using kiln::Error;
using kiln::SymmetricMemory;
using kiln::comm::CudaIpcCommunicator;
using kiln::comm::CudaIpcOptions;
namespace fb = kiln::fb;

namespace {

int g_failures = 0;
int g_rank = 0;

#define EXPECT(cond, ...)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      ++g_failures;                                                \
      fprintf(stderr, "FAIL rank %d line %d: ", g_rank, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                \
      fprintf(stderr, "\n");                                       \
    }                                                              \
  } while (0)

double seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

CudaIpcOptions host_options() {
  CudaIpcOptions options;
  options.driver = &kiln::comm::hostexec_cuda_ipc_driver();
  return options;
}

std::unique_ptr<CudaIpcCommunicator> create(const CudaIpcOptions& options) {
  std::unique_ptr<CudaIpcCommunicator> comm;
  const Error error = CudaIpcCommunicator::create(options, &comm);
  EXPECT(error == Error::kOk, "create() returned %s", kiln::error_name(error));
  if (comm) g_rank = static_cast<int>(comm->rank());
  return comm;
}

// Small integers: every sum is exact in every dtype, whatever the order.
int32_t value(uint64_t i, uint32_t rank, uint32_t salt) {
  return static_cast<int32_t>((i * 2654435761u + rank * 40503u + salt * 977u) % 15) - 7;
}

void store(DType dtype, uint8_t* base, uint64_t i, int32_t v) {
  switch (dtype) {
    case DType::FLOAT32: reinterpret_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::FLOAT16: reinterpret_cast<uint16_t*>(base)[i] = kiln::float_to_half(static_cast<float>(v)); break;
    default: reinterpret_cast<int32_t*>(base)[i] = v; break;
  }
}

double load(DType dtype, const uint8_t* base, uint64_t i) {
  switch (dtype) {
    case DType::FLOAT32: return reinterpret_cast<const float*>(base)[i];
    case DType::FLOAT16: return kiln::half_to_float(reinterpret_cast<const uint16_t*>(base)[i]);
    default: return reinterpret_cast<const int32_t*>(base)[i];
  }
}

// A zero-element all-reduce: a barrier of the whole group.
Error barrier(CudaIpcCommunicator& comm, const SymmetricMemory& memory) {
  AllReduceArgs args;
  args.memory = memory;
  args.output = memory.local.handle;
  args.count = 0;
  return comm.all_reduce(args);
}

// Every rank writes its values at `offset`, all_reduce sums them (into the
// input, or into `out` elsewhere in the arena), every element checked.
void check_sum(CudaIpcCommunicator& comm, const SymmetricMemory& memory, uint64_t offset, uint64_t count, DType dtype,
               bool in_place, uint32_t salt) {
  uint8_t* arena = static_cast<uint8_t*>(memory.local.handle);
  const uint64_t element = kiln::dtype_size(dtype);
  for (uint64_t i = 0; i < count; ++i) store(dtype, arena + offset, i, value(i, comm.rank(), salt));
  std::vector<uint8_t> host(count * element + 1);
  AllReduceArgs args;
  args.memory = memory;
  args.input_offset = offset;
  args.output = in_place ? arena + offset : host.data();
  args.count = count;
  args.dtype = dtype;
  const Error error = comm.all_reduce(args);
  EXPECT(error == Error::kOk, "all_reduce of %llu %s returned %s", static_cast<unsigned long long>(count),
         kiln::dtype_name(dtype), kiln::error_name(error));
  const uint8_t* out = static_cast<const uint8_t*>(args.output);
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < count; ++i) {
    int32_t want = 0;
    for (uint32_t r = 0; r < comm.size(); ++r) want += value(i, r, salt);
    if (load(dtype, out, i) != static_cast<double>(want)) ++wrong;
  }
  EXPECT(wrong == 0, "all_reduce of %llu %s (%s): %llu elements wrong", static_cast<unsigned long long>(count),
         kiln::dtype_name(dtype), in_place ? "in place" : "out of place", static_cast<unsigned long long>(wrong));
}

// Every rank's copy visible here and zero from the first byte to the last.
void check_mapped_zero(CudaIpcCommunicator& comm, const SymmetricMemory& memory, uint64_t size) {
  DevicePeers peers;
  const Error error = comm.device_peers(memory, &peers);
  EXPECT(error == Error::kOk && peers.count == comm.size() && peers.bases[comm.rank()] == memory.local.handle &&
             peers.peer_exited != nullptr && *peers.peer_exited == 0 && peers.timeout_ms > 0,
         "device_peers: %s, %u peers", kiln::error_name(error), peers.count);
  if (error != Error::kOk) return;
  for (uint32_t r = 0; r < peers.count; ++r) {
    const uint8_t* base = static_cast<const uint8_t*>(peers.bases[r]);
    uint64_t nonzero = 0;
    for (uint64_t i = 0; i < size; ++i) nonzero += base[i] != 0;
    EXPECT(nonzero == 0, "rank %u's copy has %llu non-zero bytes of %llu after mapping", r,
           static_cast<unsigned long long>(nonzero), static_cast<unsigned long long>(size));
  }
}

// What each rank writes at the start of its own copy, every peer reads.
void check_visible(CudaIpcCommunicator& comm, const SymmetricMemory& memory, uint32_t salt) {
  uint32_t* own = static_cast<uint32_t*>(memory.local.handle);
  for (uint32_t i = 0; i < 64; ++i) own[i] = 1000u * comm.rank() + i + salt;
  EXPECT(barrier(comm, memory) == Error::kOk, "barrier failed");
  DevicePeers peers;
  if (comm.device_peers(memory, &peers) != Error::kOk) return;
  for (uint32_t r = 0; r < peers.count; ++r) {
    const uint32_t* theirs = static_cast<const uint32_t*>(peers.bases[r]);
    uint32_t wrong = 0;
    for (uint32_t i = 0; i < 64; ++i) wrong += theirs[i] != 1000u * r + i + salt;
    EXPECT(wrong == 0, "rank %u's writes: %u of 64 words differ here", r, wrong);
  }
  EXPECT(barrier(comm, memory) == Error::kOk, "barrier failed");
}

int run_correctness() {
  std::unique_ptr<CudaIpcCommunicator> comm = create(host_options());
  if (!comm) return 1;
  // One arena of 3 MiB + a bit (all_reduce stages 1 MiB chunks), one small.
  const uint64_t big = (3u << 20) + 4096 + 64;
  SymmetricMemory a, b;
  EXPECT(comm->map_symmetric(big, 256, 7, &a) == Error::kOk, "map of %llu bytes", static_cast<unsigned long long>(big));
  EXPECT(comm->map_symmetric(100, 64, 8, &b) == Error::kOk && b.slot != a.slot, "second arena");
  if (g_failures > 0) return 1;
  check_mapped_zero(*comm, a, big);
  check_mapped_zero(*comm, b, 100);
  EXPECT(barrier(*comm, a) == Error::kOk, "barrier failed");
  check_visible(*comm, a, 1);
  check_visible(*comm, b, 2);
  uint32_t salt = 10;
  for (DType dtype : {DType::FLOAT32, DType::INT32, DType::FLOAT16}) {
    for (uint64_t count : {1ull, 17ull, 1000ull, 300000ull, 700001ull}) {
      if (count * kiln::dtype_size(dtype) * 2 + 128 > big) continue;
      check_sum(*comm, a, 64, count, dtype, true, ++salt);
      check_sum(*comm, a, 128, count, dtype, false, ++salt);
    }
  }
  check_sum(*comm, b, 0, 25, DType::FLOAT32, true, ++salt);

  // A rank that plans the arena differently: refused on every rank, naming
  // it; the communicator goes on.
  SymmetricMemory c;
  const Error mismatch = comm->map_symmetric(4096, 64, comm->rank() == 1 ? 99 : 98, &c);
  EXPECT(mismatch == Error::kCommunicatorMismatch, "a differing layout digest mapped: %s", kiln::error_name(mismatch));
  const Error sizes = comm->map_symmetric(comm->rank() == 0 ? 4096 : 8192, 64, 98, &c);
  EXPECT(sizes == Error::kCommunicatorMismatch, "a differing size mapped: %s", kiln::error_name(sizes));
  comm->unmap_symmetric(b);
  // Map and unmap, sizes changing: each mapping zero, each usable.
  for (uint32_t round = 0; round < 20; ++round) {
    const uint64_t size = 4096 * (1 + round % 5) + 8 * round;
    SymmetricMemory m;
    const Error mapped = comm->map_symmetric(size, 64, 1000 + round, &m);
    EXPECT(mapped == Error::kOk, "round %u: map returned %s", round, kiln::error_name(mapped));
    if (mapped != Error::kOk) break;
    check_mapped_zero(*comm, m, size);
    EXPECT(barrier(*comm, m) == Error::kOk, "barrier failed");
    memset(m.local.handle, 0xab, size);  // the next round's map must be zero again
    check_sum(*comm, m, 0, size / 8, DType::FLOAT32, round % 2 == 0, ++salt);
    comm->unmap_symmetric(m);
  }
  check_sum(*comm, a, 64, 5000, DType::FLOAT32, true, ++salt);
  comm->unmap_symmetric(a);
  if (g_failures == 0) fprintf(stderr, "rank %d: ok (%u ranks)\n", g_rank, comm->size());
  return g_failures == 0 ? 0 : 1;
}

// Rank 1 leaves as `killed` says before the second all-reduce; the others
// report what it returned.
int run_failure(bool killed) {
  std::unique_ptr<CudaIpcCommunicator> comm = create(host_options());
  if (!comm) return 1;
  SymmetricMemory memory;
  if (comm->map_symmetric(1 << 16, 64, 42, &memory) != Error::kOk) return 1;
  DevicePeers peers;
  EXPECT(comm->device_peers(memory, &peers) == Error::kOk, "device_peers failed");
  check_sum(*comm, memory, 0, 1000, DType::FLOAT32, true, 1);
  if (comm->rank() == 1) {
    if (killed) raise(SIGKILL);
    sleep(6);  // past the timeout run_mpi.py sets (KILN_COLLECTIVE_TIMEOUT_MS=1500)
  }
  const double start = seconds();
  AllReduceArgs args;
  args.memory = memory;
  args.output = memory.local.handle;
  args.count = 1000;
  const Error error = comm->all_reduce(args);
  const double waited = seconds() - start;
  if (comm->rank() == 1) {
    fprintf(stderr, "rank 1 (the stuck one) woke up: all_reduce returned %s\n", kiln::error_name(error));
    return 0;
  }
  fprintf(stderr, "rank %d: all_reduce returned %s after %.2f s\n", g_rank, kiln::error_name(error), waited);
  EXPECT(error == Error::kPeerFailed, "expected PeerFailed, got %s", kiln::error_name(error));
  EXPECT(comm->failed(), "the communicator is not marked failed");
  EXPECT(comm->all_reduce(args) == Error::kPeerFailed, "a failed communicator ran another all-reduce");
  if (killed) {
    EXPECT(waited < 5.0, "a killed peer took %.2f s to notice", waited);
    // The watchdog tells the kernels too.
    const double watch = seconds();
    while (*peers.peer_exited == 0 && seconds() - watch < 5.0) usleep(1000);
    EXPECT(*peers.peer_exited == 2, "the peer-exit word is %u, not 2 (rank 1 + 1)", *peers.peer_exited);
  } else {
    EXPECT(waited >= 1.4, "gave up after %.2f s, before the 1.5 s timeout", waited);
  }
  if (g_failures == 0) fprintf(stderr, "rank %d: PeerFailed as expected\n", g_rank);
  return g_failures == 0 ? 0 : 1;
}

int rank_from_environment() {
  int rank = 0, size = 1, local = 0;
  (void)kiln::comm::cuda_ipc_ranks_from_environment(&rank, &size, &local);
  g_rank = rank;
  return rank;
}

// The last rank never comes, or rank 1 names another world size: create()
// fails on every rank that tries, in bounded time.
int run_refused(bool missing) {
  int rank = 0, size = 1, local = 0;
  (void)kiln::comm::cuda_ipc_ranks_from_environment(&rank, &size, &local);
  g_rank = rank;
  if (missing && rank == size - 1) return 0;
  CudaIpcOptions options = host_options();
  options.rendezvous_timeout_ms = 1500;
  options.timeout_ms = 1500;
  if (!missing && rank == 1) {
    options.rank = rank;
    options.size = size + 1;
  }
  std::unique_ptr<CudaIpcCommunicator> comm;
  const double start = seconds();
  const Error error = CudaIpcCommunicator::create(options, &comm);
  const double waited = seconds() - start;
  fprintf(stderr, "rank %d: create() returned %s after %.2f s\n", rank, kiln::error_name(error), waited);
  EXPECT(error == Error::kPeerFailed, "expected PeerFailed, got %s", kiln::error_name(error));
  EXPECT(waited < 6.5, "took %.2f s to give up", waited);
  if (g_failures == 0) fprintf(stderr, "rank %d: PeerFailed as expected\n", rank);
  return g_failures == 0 ? 0 : 1;
}

// A socket file nobody listens on at the rendezvous path: rank 0 removes
// it, and the ranks meet.
int run_stale() {
  const int rank = rank_from_environment();
  const char* name = getenv("KILN_RENDEZVOUS");
  const std::string path =
      std::string("/tmp/") + (name != nullptr && name[0] == '@' ? name + 1 : "kiln-stale") + ".sock";
  if (rank == 0) {
    sockaddr_un address;
    memset(&address, 0, sizeof(address));
    address.sun_family = AF_UNIX;
    snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    EXPECT(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0, "cannot make %s", path.c_str());
    close(fd);  // the file stays, with nobody behind it
    EXPECT(access(path.c_str(), F_OK) == 0, "%s is not there", path.c_str());
  }
  CudaIpcOptions options = host_options();
  options.rendezvous = path;
  std::unique_ptr<CudaIpcCommunicator> comm = create(options);
  if (!comm) return 1;
  SymmetricMemory memory;
  EXPECT(comm->map_symmetric(8192, 64, 5, &memory) == Error::kOk, "map failed");
  check_sum(*comm, memory, 0, 100, DType::FLOAT32, true, 3);
  EXPECT(access(path.c_str(), F_OK) != 0, "the rendezvous socket %s is left behind", path.c_str());
  if (g_failures == 0) fprintf(stderr, "rank %d: ok (met past a stale socket)\n", g_rank);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "correctness") return run_correctness();
  if (mode == "killed") return run_failure(true);
  if (mode == "stuck") return run_failure(false);
  if (mode == "missing") return run_refused(true);
  if (mode == "size") return run_refused(false);
  if (mode == "stale") return run_stale();
  fprintf(stderr, "usage: %s correctness | killed | stuck | missing | size | stale\n", argv[0]);
  return 2;
}
