// How each all-reduce on a device runs (CollectiveCall.algorithm), chosen
// once when the program is planned and recorded in it:
//
//   - a collective on the host, of a one-rank group, of a dtype other than
//     float32, or over more ranks than the device's kernels address: the
//     communicator's own all_reduce (COMMUNICATOR);
//   - otherwise the device backend's all-reduce kernels over its peers'
//     symmetric arenas (BackendPlanner::device_all_reduce):
//       one-shot  every rank reads all N operands and sums them in rank
//                 order: (N - 1) messages read per rank, one step;
//       two-shot  reduce-scatter (rank r sums slice r of every operand,
//                 over its own operand), then all-gather (every rank reads
//                 the other N - 1 reduced slices): about 2 (N - 1) / N
//                 messages read per rank, two steps.
//     With --allreduce auto, two-shot from 512 KiB / N bytes on (256 KiB
//     for 2 ranks: where two-shot overtook one-shot between host processes
//     in bench/allreduce, bench/RESULTS.md; a GPU run is what tunes it),
//     one-shot below. Two-shot writes the reduced slice over the rank's
//     own operand, so it needs an operand that dies at the call (or an
//     in-place call); one-shot cannot run in place (it would write the sum
//     over an operand its peers still read). Where the forced choice cannot
//     run, the other runs, and the reason says so.
//   - the kernels' signal words: after the planned tensors of each
//     symmetric arena that such a call uses, sized for the largest grid of
//     its calls (every call of the arena counts on the same words, the same
//     way on every rank).
//
// Run after memory planning (arena sizes are final), before emitting.

#ifndef KILN_PLANNER_PASSES_ALL_REDUCE_H_
#define KILN_PLANNER_PASSES_ALL_REDUCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lower/program.h"

namespace kiln::planner {

enum class AllReduceMode { kAuto, kOneShot, kTwoShot };

// "auto", "one-shot", "two-shot"; false for anything else.
bool parse_all_reduce_mode(const std::string& text, AllReduceMode* out_mode);

// One collective's choice, for the report.
struct AllReduceChoice {
  std::string name;    // the instruction's
  std::string device;  // "cuda:0"
  uint64_t bytes = 0;
  uint32_t ranks = 1;
  fb::AllReduceAlgorithm algorithm = fb::AllReduceAlgorithm::COMMUNICATOR;
  uint32_t blocks = 0;
  std::string why;
};

const char* all_reduce_algorithm_name(fb::AllReduceAlgorithm algorithm);

// The two-shot threshold of `ranks` under --allreduce auto.
uint64_t two_shot_min_bytes(uint32_t ranks);

std::vector<AllReduceChoice> choose_all_reduce(LMethod& method, AllReduceMode mode);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_ALL_REDUCE_H_
