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
//
// Before that, on the lowered method (before symmetric placement and
// in-place reuse), fuse_all_reduce_addends folds a bias or residual Add
// that follows a device all-reduce into the all-reduce's write, Megatron's
// pattern (z = AllReduce(x) + b, then + r): the collective takes the Add's
// operand as an addend (CollectiveCall.inputs[1], [2]) and writes the Add's
// output; the Add's launch and one pass over the tensor go. Conditions:
//   - the all-reduce is one the device kernels take (the conditions above:
//     a device whose backend runs collectives, float32, 2 to max_ranks
//     ranks); at most two addends;
//   - the Add is a kernel on the same device with no fused activation;
//     nothing else reads the all-reduce's output (nor a view of it), and it
//     is no method output;
//   - the addend is float32, broadcasts into the output along its leading
//     axes (its shape, leading 1s dropped, is the output's trailing axes:
//     a bias [H] or [S, H], a residual of the whole shape), so element i of
//     the output adds element i mod numel(addend); and it is written before
//     the all-reduce (a constant, an input, or an earlier result).
// Each rank adds its own addends, in the order the Adds ran, after the sum
// in rank order: the bits the unfused program computes.

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
  // The Add nodes fused into its write (fuse_all_reduce_addends).
  std::vector<std::string> fused_adds;
};

const char* all_reduce_algorithm_name(fb::AllReduceAlgorithm algorithm);

// The two-shot threshold of `ranks` under --allreduce auto.
uint64_t two_shot_min_bytes(uint32_t ranks);

std::vector<AllReduceChoice> choose_all_reduce(LMethod& method, AllReduceMode mode);

// Returns how many Adds it fused (see above).
int fuse_all_reduce_addends(LMethod& method);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_ALL_REDUCE_H_
