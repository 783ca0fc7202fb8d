// All-reduce latency of the mpi-shm communicator beside MPI_Allreduce, on
// the same buffers in the same run. Started by bench/allreduce/run.sh under
// mpirun; every rank takes part, rank 0 prints the table.
//
//   allreduce_bench [--min-bytes N] [--max-bytes N] [--rounds R]
//
// For each message size (powers of 4, float32 SUM) and each method, R
// rounds each time enough calls to take about 50 ms (at least 2); a round's
// figure is the slowest rank's mean per call, and the table gives the
// median round. Before timing, each method runs once on fresh inputs that
// differ by rank, and every rank checks every element of its result.
// Methods:
//   one-shot   MpiCommunicator, flags, output outside the window
//   two-shot   MpiCommunicator, flags, output elsewhere in the arena
//              (two_shot_min_bytes = 0)
//   in-place   MpiCommunicator, flags, output = input (two-shot)
//   barrier    MpiCommunicator, MpiSync::kBarrier, output outside the window
//   MPI        MPI_Allreduce(input in the window, the same output buffer)

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "kiln/comm/mpi_communicator.h"

using kiln::AllReduceArgs;
using kiln::Error;
using kiln::SymmetricMemory;
using kiln::comm::MpiCommunicator;
using kiln::comm::MpiOptions;
using kiln::comm::MpiSync;

namespace {

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void check(Error error, const char* what) {
  if (error == Error::kOk) return;
  fprintf(stderr, "allreduce_bench: %s: %s\n", what, kiln::error_name(error));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// Seconds per call of `call`: median over rounds of the slowest rank's mean.
template <typename Call>
double time_calls(Call&& call, int rounds) {
  // Calibrate: one call (also the warm-up), then enough for ~50 ms a round.
  MPI_Barrier(MPI_COMM_WORLD);
  double start = now();
  call();
  double once = now() - start;
  MPI_Allreduce(MPI_IN_PLACE, &once, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const int iterations = std::max(2, std::min(20000, static_cast<int>(0.05 / std::max(once, 1e-7))));
  std::vector<double> figures;
  for (int r = 0; r < rounds; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    start = now();
    for (int i = 0; i < iterations; ++i) call();
    double mean = (now() - start) / iterations;
    MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    figures.push_back(mean);
  }
  std::sort(figures.begin(), figures.end());
  return figures[figures.size() / 2];
}

// Every element of `got`: the sum over the ranks of what fill() wrote
// (rank + 1 + i % 7), exact in float32 at these sizes.
void expect_sums(const float* got, uint64_t count, uint32_t rank, uint32_t ranks, const char* method) {
  for (uint64_t i = 0; i < count; ++i) {
    const float want = static_cast<float>(ranks * (ranks + 1) / 2 + ranks * (i % 7));
    if (got[i] != want) {
      fprintf(stderr, "allreduce_bench: rank %u: %s: element %llu of %llu is %g, expected %g\n", rank, method,
              static_cast<unsigned long long>(i), static_cast<unsigned long long>(count), got[i], want);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
}

const char* human(uint64_t bytes, char* text, size_t size) {
  if (bytes >= (1u << 20)) {
    snprintf(text, size, "%llu MB", static_cast<unsigned long long>(bytes >> 20));
  } else {
    snprintf(text, size, "%llu KB", static_cast<unsigned long long>(bytes >> 10));
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t min_bytes = 4096, max_bytes = 64u << 20;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--min-bytes") == 0) min_bytes = strtoull(argv[i + 1], nullptr, 10);
    if (strcmp(argv[i], "--max-bytes") == 0) max_bytes = strtoull(argv[i + 1], nullptr, 10);
    if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
  }

  std::unique_ptr<MpiCommunicator> flags, two_shot, barrier;
  MpiOptions options;
  options.two_shot_min_bytes = UINT64_MAX;
  check(MpiCommunicator::create(options, &flags), "create (flags)");
  options.two_shot_min_bytes = 0;
  check(MpiCommunicator::create(options, &two_shot), "create (two-shot)");
  options.two_shot_min_bytes = UINT64_MAX;
  options.sync = MpiSync::kBarrier;
  check(MpiCommunicator::create(options, &barrier), "create (barrier)");
  SymmetricMemory flags_memory, two_shot_memory, barrier_memory;
  check(flags->map_symmetric(max_bytes, 4096, 1, &flags_memory), "map_symmetric (flags)");
  check(two_shot->map_symmetric(2 * max_bytes, 4096, 1, &two_shot_memory), "map_symmetric (two-shot)");
  check(barrier->map_symmetric(max_bytes, 4096, 1, &barrier_memory), "map_symmetric (barrier)");
  std::vector<float> output(max_bytes / sizeof(float));
  const uint32_t rank = flags->rank(), ranks = flags->size();
  // Every rank its own data: rank + 1 + i % 7 at element i.
  auto fill = [&](uint64_t count) {
    for (SymmetricMemory* m : {&flags_memory, &two_shot_memory, &barrier_memory}) {
      float* data = static_cast<float*>(m->local.handle);
      for (uint64_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank + 1 + i % 7);
    }
  };

  if (rank == 0) {
    printf("mpi-shm all-reduce, float32 SUM, %u ranks: microseconds per call (median of %d rounds, slowest rank)\n\n",
           ranks, rounds);
    printf(
        "| ranks | message | one-shot | two-shot | in place (two-shot) | barrier mode (one-shot) | MPI_Allreduce | "
        "MPI / one-shot | MPI / two-shot | barrier / one-shot |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  for (uint64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const uint64_t count = bytes / sizeof(float);
    AllReduceArgs args;
    args.memory = flags_memory;
    args.count = count;
    args.output = output.data();
    AllReduceArgs through_output = args;
    through_output.memory = two_shot_memory;
    through_output.output = static_cast<uint8_t*>(two_shot_memory.local.handle) + max_bytes;
    AllReduceArgs in_place = args;
    in_place.output = flags_memory.local.handle;
    AllReduceArgs barrier_args = args;
    barrier_args.memory = barrier_memory;
    auto mpi_call = [&] {
      MPI_Allreduce(flags_memory.local.handle, output.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    };

    // Correct first: each method once on fresh inputs, every element
    // checked on every rank. (The in-place runs then grow the inputs
    // towards infinity, which costs nothing extra.)
    fill(count);
    check(flags->all_reduce(args), "all_reduce");
    expect_sums(output.data(), count, rank, ranks, "one-shot");
    check(two_shot->all_reduce(through_output), "all_reduce (two-shot)");
    expect_sums(static_cast<const float*>(through_output.output), count, rank, ranks, "two-shot");
    check(barrier->all_reduce(barrier_args), "all_reduce (barrier)");
    expect_sums(output.data(), count, rank, ranks, "barrier mode");
    mpi_call();
    expect_sums(output.data(), count, rank, ranks, "MPI_Allreduce");
    check(flags->all_reduce(in_place), "all_reduce in place");
    expect_sums(static_cast<const float*>(in_place.output), count, rank, ranks, "in place");
    fill(count);

    const double one_shot = time_calls([&] { check(flags->all_reduce(args), "all_reduce"); }, rounds);
    const double two_shot_time =
        time_calls([&] { check(two_shot->all_reduce(through_output), "all_reduce (two-shot)"); }, rounds);
    const double barrier_mode =
        time_calls([&] { check(barrier->all_reduce(barrier_args), "all_reduce (barrier)"); }, rounds);
    const double mpi = time_calls(mpi_call, rounds);
    const double in_place_time = time_calls([&] { check(flags->all_reduce(in_place), "all_reduce in place"); }, rounds);
    if (rank == 0) {
      char text[32];
      printf("| %u | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f |\n", ranks,
             human(bytes, text, sizeof(text)), one_shot * 1e6, two_shot_time * 1e6, in_place_time * 1e6,
             barrier_mode * 1e6, mpi * 1e6, mpi / one_shot, mpi / two_shot_time, barrier_mode / one_shot);
      fflush(stdout);
    }
  }
  barrier.reset();
  two_shot.reset();
  flags.reset();
  return 0;
}
