// The mpi-shm communicator under mpirun (tests/comm/run_mpi.py starts it
// with -n 2, 4, 8). One mode per run, the first argument:
//
//   correctness [barrier]  all-reduce results, exact, for every dtype and op,
//                          sizes from 1 element to 4 MB, odd counts, offsets,
//                          in place and out of place (one-shot and two-shot);
//                          1000 calls on one buffer
//                          rewritten between calls; layout digests and call
//                          arguments that differ between ranks
//   nodes K                every K ranks one node (the multi-node path):
//                          float32 and int32 results, exact, every op
//   killed                 rank 1 raises SIGKILL before a collective: the job
//                          must end with an error, never hang
//   stuck                  rank 1 sleeps past the timeout: every other rank
//                          gets kPeerFailed naming it
//   fault PATH             rank 1 is killed (SIGKILL) in the middle of an
//                          all-reduce on PATH: every other rank gets
//                          kPeerFailed, from rank 1's death, not the timeout
//                          (see run_fault)
//
// Every rank checks its own results and prints "FAIL ..." lines; the exit
// status is the number of failures (capped), so mpirun fails the job.

#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kiln/comm/mpi_communicator.h"
#include "kiln/kernels/float16.h"

using kiln::AllReduceArgs;
using kiln::DType;
using kiln::Error;
using kiln::SymmetricMemory;
using kiln::comm::MpiCommunicator;
using kiln::comm::MpiOptions;
using kiln::comm::MpiSync;
namespace fb = kiln::fb;

namespace {

int g_failures = 0;
uint32_t g_rank = 0;

#define EXPECT(cond, ...)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      ++g_failures;                                                \
      fprintf(stderr, "FAIL rank %u line %d: ", g_rank, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                \
      fprintf(stderr, "\n");                                       \
    }                                                              \
  } while (0)

double seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Small integers, so that every sum, product, maximum and minimum is exact
// in every dtype tested, whatever the order.
int32_t value(uint64_t i, uint32_t rank, uint32_t salt, fb::ReduceOp op) {
  const uint64_t h = i * 2654435761u + rank * 40503u + salt * 977u;
  if (op == fb::ReduceOp::PROD) return static_cast<int32_t>(h % 3) - 1;  // -1, 0, 1
  return static_cast<int32_t>(h % 15) - 7;                               // -7 .. 7
}

int32_t expected_int(uint64_t i, uint32_t size, uint32_t salt, fb::ReduceOp op) {
  int32_t acc = value(i, 0, salt, op);
  for (uint32_t r = 1; r < size; ++r) {
    const int32_t v = value(i, r, salt, op);
    switch (op) {
      case fb::ReduceOp::PROD: acc *= v; break;
      case fb::ReduceOp::MAXIMUM: acc = v > acc ? v : acc; break;
      case fb::ReduceOp::MINIMUM: acc = v < acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  return acc;
}

// Writes element i of this rank's operand.
void put(uint8_t* base, DType dtype, uint64_t i, int32_t v) {
  switch (dtype) {
    case DType::FLOAT32: reinterpret_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::FLOAT16: reinterpret_cast<uint16_t*>(base)[i] = kiln::float_to_half(static_cast<float>(v)); break;
    case DType::BFLOAT16: reinterpret_cast<uint16_t*>(base)[i] = kiln::float_to_bfloat16(static_cast<float>(v)); break;
    default: reinterpret_cast<int32_t*>(base)[i] = v; break;
  }
}

double get(const uint8_t* base, DType dtype, uint64_t i) {
  switch (dtype) {
    case DType::FLOAT32: return reinterpret_cast<const float*>(base)[i];
    case DType::FLOAT16: return kiln::half_to_float(reinterpret_cast<const uint16_t*>(base)[i]);
    case DType::BFLOAT16: return kiln::bfloat16_to_float(reinterpret_cast<const uint16_t*>(base)[i]);
    default: return reinterpret_cast<const int32_t*>(base)[i];
  }
}

double expected(uint64_t i, uint32_t size, uint32_t salt, DType dtype, fb::ReduceOp op) {
  const int32_t e = expected_int(i, size, salt, op);
  if (op != fb::ReduceOp::AVERAGE) return e;
  if (dtype == DType::INT32) return e / static_cast<int32_t>(size);
  // The communicator divides the exact float sum once, then rounds to the dtype.
  const float average = static_cast<float>(e) / static_cast<float>(size);
  if (dtype == DType::FLOAT16) return kiln::half_to_float(kiln::float_to_half(average));
  if (dtype == DType::BFLOAT16) return kiln::bfloat16_to_float(kiln::float_to_bfloat16(average));
  return average;
}

const char* op_name(fb::ReduceOp op) { return fb::EnumNameReduceOp(op); }

enum class Where { kInPlace, kHostBuffer, kSameArena };
const char* where_name(Where w) {
  return w == Where::kInPlace ? "in place" : w == Where::kHostBuffer ? "to a host buffer" : "elsewhere in the arena";
}

// One all-reduce of `count` elements at `offset`, checked element by element.
void check_all_reduce(MpiCommunicator& comm, const SymmetricMemory& memory, std::vector<uint8_t>& host, uint64_t offset,
                      uint64_t count, DType dtype, fb::ReduceOp op, Where where, uint32_t salt) {
  uint8_t* arena = static_cast<uint8_t*>(memory.local.handle);
  const uint64_t bytes = count * kiln::dtype_size(dtype);
  uint8_t* input = arena + offset;
  uint8_t* output = input;
  if (where == Where::kHostBuffer) {
    if (host.size() < bytes + 64) host.resize(bytes + 64);
    output = host.data() + 4;  // aligned to 4 bytes only
    memset(output, 0x5a, bytes);
  } else if (where == Where::kSameArena) {
    output = arena + memory.local.size - bytes;  // the arena's end, past the input
  }
  for (uint64_t i = 0; i < count; ++i) put(input, dtype, i, value(i, comm.rank(), salt, op));

  AllReduceArgs args;
  args.memory = memory;
  args.input_offset = offset;
  args.output = output;
  args.count = count;
  args.dtype = dtype;
  args.op = op;
  const Error error = comm.all_reduce(args);
  EXPECT(error == Error::kOk, "all_reduce(%llu %s, %s, %s) returned %s", static_cast<unsigned long long>(count),
         kiln::dtype_name(dtype), op_name(op), where_name(where), kiln::error_name(error));
  if (error != Error::kOk) return;
  uint64_t wrong = 0, first = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (get(output, dtype, i) != expected(i, comm.size(), salt, dtype, op)) {
      if (wrong++ == 0) first = i;
    }
  }
  EXPECT(wrong == 0,
         "all_reduce(%llu %s at offset %llu, %s, %s): %llu wrong elements, the first [%llu] = %g, expected %g",
         static_cast<unsigned long long>(count), kiln::dtype_name(dtype), static_cast<unsigned long long>(offset),
         op_name(op), where_name(where), static_cast<unsigned long long>(wrong), static_cast<unsigned long long>(first),
         get(output, dtype, first), expected(first, comm.size(), salt, dtype, op));
}

int run_correctness(bool barrier) {
  MpiOptions options;
  options.sync = barrier ? MpiSync::kBarrier : MpiSync::kFlags;
  // Outputs elsewhere in the arena from 1 KB on go two-shot, so that both
  // algorithms see every kind of size below.
  options.two_shot_min_bytes = 1024;
  std::unique_ptr<MpiCommunicator> comm;
  Error error = MpiCommunicator::create(options, &comm);
  if (error != Error::kOk) {
    fprintf(stderr, "FAIL: MpiCommunicator::create returned %s\n", kiln::error_name(error));
    return 1;
  }
  g_rank = comm->rank();
  EXPECT(strcmp(comm->name(), "mpi-shm") == 0, "name %s", comm->name());
  EXPECT(comm->device_type() == kiln::DeviceType::CPU, "device type");

  // Layout digests that differ: every rank refuses, and the communicator
  // stays usable.
  SymmetricMemory memory;
  const uint64_t digest = 0x1234abcd5678ef00ull;
  error = comm->map_symmetric(4096, 64, digest + (comm->rank() == comm->size() - 1 ? 1 : 0), &memory);
  EXPECT(error == Error::kCommunicatorMismatch, "map_symmetric with rank %u's digest different returned %s",
         comm->size() - 1, kiln::error_name(error));
  error = comm->map_symmetric(4096 + (comm->rank() == 0 ? 64 : 0), 64, digest, &memory);
  EXPECT(error == Error::kCommunicatorMismatch, "map_symmetric with rank 0's size different returned %s",
         kiln::error_name(error));

  // 8 MB + 4 KB: 4 MB operands at two offsets, the same-arena outputs at the end.
  const uint64_t arena_bytes = (8u << 20) + 4096;
  error = comm->map_symmetric(arena_bytes, 4096, digest, &memory);
  EXPECT(error == Error::kOk, "map_symmetric returned %s", kiln::error_name(error));
  if (error != Error::kOk) return 1;
  EXPECT(reinterpret_cast<uintptr_t>(memory.local.handle) % 4096 == 0, "arena %p not aligned to 4096",
         memory.local.handle);
  EXPECT(memory.local.size == arena_bytes, "arena size %llu", static_cast<unsigned long long>(memory.local.size));
  // A second arena: slots are separate windows with separate flags.
  SymmetricMemory small;
  error = comm->map_symmetric(256, 0, digest ^ 1, &small);
  EXPECT(error == Error::kOk, "second map_symmetric returned %s", kiln::error_name(error));

  std::vector<uint8_t> host;
  const uint64_t counts[] = {1,   2,   3,   5,   7,    15,   16,   17,    63,     64,      65,
                             127, 255, 511, 513, 1000, 1023, 4097, 65537, 262147, 1u << 20};
  const Where wheres[] = {Where::kInPlace, Where::kHostBuffer, Where::kSameArena};
  uint32_t salt = 0;
  for (uint64_t count : counts) {
    for (Where where : wheres) {
      const uint64_t offset = (salt % 3) * 4;  // 0, 4 or 8 bytes in
      check_all_reduce(*comm, memory, host, offset, count, DType::FLOAT32, fb::ReduceOp::SUM, where, ++salt);
    }
  }
  const DType dtypes[] = {DType::FLOAT32, DType::FLOAT16, DType::BFLOAT16, DType::INT32};
  const fb::ReduceOp ops[] = {fb::ReduceOp::SUM, fb::ReduceOp::PROD, fb::ReduceOp::MAXIMUM, fb::ReduceOp::MINIMUM,
                              fb::ReduceOp::AVERAGE};
  for (DType dtype : dtypes) {
    for (fb::ReduceOp op : ops) {
      for (uint64_t count : {1ull, 37ull, 4099ull}) {
        check_all_reduce(*comm, memory, host, 1024, count, dtype, op, Where::kInPlace, ++salt);
        check_all_reduce(*comm, memory, host, 64, count, dtype, op, Where::kHostBuffer, ++salt);
      }
    }
  }
  check_all_reduce(*comm, small, host, 0, 64, DType::FLOAT32, fb::ReduceOp::SUM, Where::kInPlace, ++salt);
  check_all_reduce(*comm, memory, host, 0, 0, DType::FLOAT32, fb::ReduceOp::SUM, Where::kHostBuffer, ++salt);

  // 1000 calls on one buffer, rewritten right after each returns (the next
  // layer's producer): a peer still reading it would see the new values.
  for (uint32_t k = 0; k < 1000; ++k) {
    check_all_reduce(*comm, memory, host, 256, 1027, DType::FLOAT32, fb::ReduceOp::SUM,
                     k % 2 == 0 ? Where::kInPlace : Where::kHostBuffer, 100000 + k);
  }

  // Ranks that call with different arguments: all refuse, then go on.
  {
    AllReduceArgs args;
    args.memory = memory;
    args.output = host.data();
    args.count = comm->rank() == 0 ? 10 : 11;
    error = comm->all_reduce(args);
    EXPECT(error == Error::kCommunicatorMismatch, "all_reduce with different counts returned %s",
           kiln::error_name(error));
    args.count = 10;
    args.output = static_cast<uint8_t*>(memory.local.handle) + (comm->rank() == 0 ? 0 : 4096);
    error = comm->all_reduce(args);  // in place on rank 0 only
    EXPECT(error == Error::kCommunicatorMismatch, "all_reduce in place on one rank only returned %s",
           kiln::error_name(error));
    args.count = 1000;  // 4000 bytes: two-shot through outputs at different offsets
    args.output = static_cast<uint8_t*>(memory.local.handle) + (comm->rank() == 0 ? 8192 : 16384);
    error = comm->all_reduce(args);
    EXPECT(error == Error::kCommunicatorMismatch, "all_reduce with outputs at different offsets returned %s",
           kiln::error_name(error));
    EXPECT(!comm->failed(), "a mismatch left the communicator failed");
    check_all_reduce(*comm, memory, host, 0, 100, DType::FLOAT32, fb::ReduceOp::SUM, Where::kInPlace, ++salt);
  }

  // Arguments checked before any rank waits.
  {
    AllReduceArgs args;
    args.memory = memory;
    args.output = host.data();
    args.count = 1;
    args.input_offset = arena_bytes;
    EXPECT(comm->all_reduce(args) == Error::kInvalidArgument, "an offset past the arena was accepted");
    args.input_offset = 2;
    EXPECT(comm->all_reduce(args) == Error::kInvalidArgument, "a misaligned offset was accepted");
    args.input_offset = 0;
    args.dtype = DType::FLOAT64;
    EXPECT(comm->all_reduce(args) == Error::kNotSupported, "float64 was accepted");
    args.dtype = DType::FLOAT32;
    args.memory.slot = 99;
    EXPECT(comm->all_reduce(args) == Error::kInvalidArgument, "an unmapped slot was accepted");
  }

  comm->unmap_symmetric(small);
  comm->unmap_symmetric(memory);
  // Mapping again after unmapping reuses the slot.
  error = comm->map_symmetric(1 << 16, 64, digest, &memory);
  EXPECT(error == Error::kOk, "map_symmetric after unmap returned %s", kiln::error_name(error));
  check_all_reduce(*comm, memory, host, 0, 16384, DType::FLOAT32, fb::ReduceOp::SUM, Where::kInPlace, ++salt);
  // Left mapped: the destructor unmaps it.
  const bool failed = comm->failed();
  comm.reset();
  EXPECT(!failed, "the communicator failed");
  if (g_rank == 0 && g_failures == 0)
    printf("mpi_communicator_test: correctness passed (%s)\n", barrier ? "barrier" : "flags");
  return g_failures > 100 ? 100 : g_failures;
}

// One call to get the ranks going, then `victim` leaves in the way `mode`
// says before the second; the others report what the second returned.
int run_failure(bool killed) {
  std::unique_ptr<MpiCommunicator> comm;
  MpiOptions options;
  Error error = MpiCommunicator::create(options, &comm);
  if (error != Error::kOk) return 1;
  g_rank = comm->rank();
  SymmetricMemory memory;
  error = comm->map_symmetric(1 << 16, 64, 42, &memory);
  if (error != Error::kOk) return 1;
  std::vector<uint8_t> host;
  check_all_reduce(*comm, memory, host, 0, 1000, DType::FLOAT32, fb::ReduceOp::SUM, Where::kInPlace, 1);
  const uint32_t victim = 1;
  // The survivors' own communicator: they report, then wait for each other
  // before leaving, since the first rank to leave without MPI_Finalize makes
  // mpirun end the job.
  MPI_Comm survivors;
  MPI_Comm_split(MPI_COMM_WORLD, comm->rank() == victim ? 1 : 0, 0, &survivors);
  if (comm->rank() == victim) {
    if (killed) raise(SIGKILL);
    sleep(6);  // past the timeout run_mpi.py sets (KILN_COLLECTIVE_TIMEOUT_MS=1500)
  }
  const double start = seconds();
  AllReduceArgs args;
  args.memory = memory;
  args.output = memory.local.handle;
  args.count = 1000;
  error = comm->all_reduce(args);
  const double waited = seconds() - start;
  if (comm->rank() == victim) {
    // Woke up after the others gave up: nobody will come.
    fprintf(stderr, "rank %u (the stuck one) woke up: all_reduce returned %s\n", g_rank, kiln::error_name(error));
    comm.reset();
    return 0;
  }
  fprintf(stderr, "rank %u: all_reduce returned %s after %.2f s\n", g_rank, kiln::error_name(error), waited);
  EXPECT(error == Error::kPeerFailed, "expected PeerFailed, got %s", kiln::error_name(error));
  EXPECT(comm->failed(), "the communicator is not marked failed");
  EXPECT(comm->all_reduce(args) == Error::kPeerFailed, "a failed communicator ran another all-reduce");
  if (!killed) EXPECT(waited >= 1.4, "gave up after %.2f s, before the 1.5 s timeout", waited);
  comm.reset();  // without MPI_Finalize: the victim would never join it
  if (g_failures == 0) fprintf(stderr, "rank %u: PeerFailed as expected\n", g_rank);
  MPI_Barrier(survivors);
  return g_failures == 0 ? 0 : 1;
}

// Kills this process at its first write to [begin, end) (whole pages): the
// pages are made read-only and the SIGSEGV that follows raises SIGKILL. A
// rank so set up dies at an exact point of a collective, with no race.
void kill_at_first_write(void* begin, void* end) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(begin) + page - 1) & ~(page - 1);
  const uintptr_t e = reinterpret_cast<uintptr_t>(end) & ~(page - 1);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = [](int) { raise(SIGKILL); };
  sigaction(SIGSEGV, &action, nullptr);
  if (e <= b || mprotect(reinterpret_cast<void*>(b), e - b, PROT_READ) != 0) {
    fprintf(stderr, "FAIL: rank %u: cannot protect the pages to kill at\n", g_rank);
    exit(1);
  }
}

// Rank `memory`'s own sequence counter, in its control block right after
// the arena (the layout pictured in mpi_communicator.h); nullptr when the
// block is not where the picture says (its magic word and rank).
const std::atomic<uint64_t>* own_sequence(const SymmetricMemory& memory, uint32_t rank) {
  const uintptr_t end = reinterpret_cast<uintptr_t>(memory.local.handle) + memory.local.size;
  const uint8_t* control = reinterpret_cast<const uint8_t*>((end + 63) & ~uintptr_t{63});
  uint64_t magic;
  uint32_t owner;
  memcpy(&magic, control + 64, sizeof magic);
  memcpy(&owner, control + 64 + 12, sizeof owner);
  if (magic != 0x6b696c6e2d73686dull || owner != rank) return nullptr;  // "kiln-shm"
  return reinterpret_cast<const std::atomic<uint64_t>*>(control);
}

// Rank 1 dies (SIGKILL) in the middle of an all-reduce of 4 MB on 4 ranks,
// at a point set by `path`; every other rank must get kPeerFailed within
// 5 s (the timeout is 60 s, so it is the death that is noticed) and its
// communicator be marked failed. Call e publishes 3e+1 on arrival, 3e+2
// once two-shot has reduced its slice, 3e+3 on departure.
//   one-shot  out of place to a host buffer: rank 1 dies at its first write
//             of the result, after every rank arrived; the others read its
//             input where it lies and wait for it to depart
//   two-shot  in place: rank 1 dies at its first write of its reduced slice
//             (slice 1); the others reduce theirs and wait for its slice
//   copy      in place: rank 1 dies at its first copy of a peer's slice
//             (slice 0), after publishing its own; the others copy its
//             slice and wait for it to depart
//   barrier   barrier mode (MPI_Win_sync and a node barrier at each step),
//             one-shot: rank 1 arrives first and dies inside the node
//             barrier, which can then never complete (a thread of its own
//             watches its sequence counter and raises SIGKILL once it
//             arrived; the others call 300 ms late, so it waits there)
// Three calls on the same buffer come first; the fourth is the one.
int run_fault(const std::string& path) {
  const bool barrier = path == "barrier";
  if (!barrier && path != "one-shot" && path != "two-shot" && path != "copy") {
    fprintf(stderr, "fault: unknown path %s (one-shot, two-shot, copy, barrier)\n", path.c_str());
    return 2;
  }
  MpiOptions options;
  options.sync = barrier ? MpiSync::kBarrier : MpiSync::kFlags;
  options.timeout_ms = 60000;
  std::unique_ptr<MpiCommunicator> comm;
  if (MpiCommunicator::create(options, &comm) != Error::kOk) return 1;
  g_rank = comm->rank();
  if (comm->size() != 4) {
    fprintf(stderr, "FAIL: fault runs on 4 ranks, not %u\n", comm->size());
    return 1;
  }
  const uint32_t victim = 1;
  MPI_Comm survivors;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank == victim ? 1 : 0, 0, &survivors);
  const uint64_t count = 1u << 20;  // float32, 4 MB; two-shot slices of 1 MB
  const uint64_t slice_bytes = count * 4 / 4;
  SymmetricMemory memory;
  if (comm->map_symmetric(count * 4, 4096, 7, &memory) != Error::kOk) return 1;
  const bool in_place = path == "two-shot" || path == "copy";
  const Where where = in_place ? Where::kInPlace : Where::kHostBuffer;
  std::vector<uint8_t> host;
  for (uint32_t call = 0; call < 3; ++call) {
    check_all_reduce(*comm, memory, host, 0, count, DType::FLOAT32, fb::ReduceOp::SUM, where, call);
  }
  if (g_failures != 0) return 1;

  uint8_t* arena = static_cast<uint8_t*>(memory.local.handle);
  for (uint64_t i = 0; i < count; ++i) put(arena, DType::FLOAT32, i, value(i, g_rank, 3, fb::ReduceOp::SUM));
  // One-shot's output: pages of their own, so that they can be protected.
  void* output =
      in_place ? arena : mmap(nullptr, count * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  std::thread killer;
  if (g_rank == victim && barrier) {
    const std::atomic<uint64_t>* sequence = own_sequence(memory, g_rank);
    if (sequence == nullptr) {
      fprintf(stderr, "FAIL: rank %u: the control block is not after the arena\n", g_rank);
      return 1;
    }
    std::atomic<bool> watching{false};
    killer = std::thread([sequence, &watching] {
      watching = true;
      while (sequence->load(std::memory_order_acquire) < 3 * 3 + 1) {
      }
      raise(SIGKILL);
    });
    while (!watching.load()) sched_yield();
  } else if (g_rank == victim && path == "one-shot") {
    kill_at_first_write(output, static_cast<uint8_t*>(output) + count * 4);
  } else if (g_rank == victim && path == "two-shot") {
    kill_at_first_write(arena + slice_bytes, arena + 2 * slice_bytes);
  } else if (g_rank == victim) {
    kill_at_first_write(arena, arena + slice_bytes);
  } else if (barrier) {
    usleep(300 * 1000);
  }
  AllReduceArgs args;
  args.memory = memory;
  args.output = output;
  args.count = count;
  const double start = seconds();
  const Error error = comm->all_reduce(args);
  const double waited = seconds() - start;
  if (g_rank == victim) {
    fprintf(stderr, "FAIL: rank %u was to die in the all-reduce, which returned %s first\n", g_rank,
            kiln::error_name(error));
    if (killer.joinable()) killer.join();
    return 1;
  }
  fprintf(stderr, "rank %u: all_reduce (%s) returned %s after %.2f s\n", g_rank, path.c_str(), kiln::error_name(error),
          waited);
  EXPECT(error == Error::kPeerFailed, "expected PeerFailed, got %s", kiln::error_name(error));
  EXPECT(waited < 5.0, "PeerFailed after %.2f s: not from the death (the timeout is 60 s)", waited);
  EXPECT(comm->failed(), "the communicator is not marked failed");
  comm.reset();  // without MPI_Finalize: the victim would never join it
  if (g_failures == 0) fprintf(stderr, "rank %u: PeerFailed as expected\n", g_rank);
  MPI_Barrier(survivors);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

// Every `per_node` ranks one node (MpiOptions::ranks_per_node): each node
// reduces through its own windows, the leaders between nodes, then each
// node's leader broadcasts. The same exact results as on one node, float32
// and int32, every op, in place and out of place; 16-bit floats refused.
int run_nodes(uint32_t per_node) {
  MpiOptions options;
  options.ranks_per_node = per_node;
  options.two_shot_min_bytes = 1024;
  std::unique_ptr<MpiCommunicator> comm;
  if (MpiCommunicator::create(options, &comm) != Error::kOk) {
    fprintf(stderr, "FAIL: MpiCommunicator::create with %u ranks per node failed\n", per_node);
    return 1;
  }
  g_rank = comm->rank();
  EXPECT(comm->nodes() * per_node == comm->size(), "%u nodes of %u ranks for %u ranks", comm->nodes(), per_node,
         comm->size());
  SymmetricMemory memory;
  const uint64_t arena_bytes = (1u << 20) + 4096;
  if (comm->map_symmetric(arena_bytes, 4096, 99, &memory) != Error::kOk) return 1;
  std::vector<uint8_t> host;
  uint32_t salt = 0;
  const Where wheres[] = {Where::kInPlace, Where::kHostBuffer, Where::kSameArena};
  for (DType dtype : {DType::FLOAT32, DType::INT32}) {
    for (fb::ReduceOp op :
         {fb::ReduceOp::SUM, fb::ReduceOp::PROD, fb::ReduceOp::MAXIMUM, fb::ReduceOp::MINIMUM, fb::ReduceOp::AVERAGE}) {
      for (uint64_t count : {1ull, 17ull, 1000ull, 65537ull}) {
        for (Where where : wheres) check_all_reduce(*comm, memory, host, 64, count, dtype, op, where, ++salt);
      }
    }
  }
  for (uint32_t k = 0; k < 200; ++k) {
    check_all_reduce(*comm, memory, host, 256, 1027, DType::FLOAT32, fb::ReduceOp::SUM,
                     k % 2 == 0 ? Where::kInPlace : Where::kHostBuffer, 100000 + k);
  }
  AllReduceArgs args;
  args.memory = memory;
  args.output = memory.local.handle;
  args.count = 16;
  args.dtype = DType::FLOAT16;
  const Error half = comm->all_reduce(args);
  EXPECT(half == Error::kNotSupported, "float16 across nodes returned %s", kiln::error_name(half));
  if (g_failures == 0 && g_rank == 0) {
    fprintf(stderr, "nodes: %u ranks as %u nodes of %u: every all-reduce exact\n", comm->size(), comm->nodes(),
            per_node);
  }
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "nodes" && argc > 2) return run_nodes(static_cast<uint32_t>(atoi(argv[2])));
  if (mode == "correctness") return run_correctness(argc > 2 && std::string(argv[2]) == "barrier");
  if (mode == "killed") return run_failure(true);
  if (mode == "stuck") return run_failure(false);
  if (mode == "fault" && argc > 2) return run_fault(argv[2]);
  fprintf(stderr, "usage: %s correctness [barrier] | nodes K | killed | stuck | fault one-shot|two-shot|copy|barrier\n",
          argv[0]);
  return 2;
}
