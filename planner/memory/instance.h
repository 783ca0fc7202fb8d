// The planning algorithms' shared view of a Problem (internal to memory/).
//
// A Problem is normalised once:
//   - sizes become units: bytes rounded up to the alignment, then divided by
//     the greatest common divisor of all such sizes. Every offset a greedy or
//     canonical plan produces is a sum of sizes, so nothing is lost, and the
//     numbers get small;
//   - zero-size buffers drop out (they share no byte; offset 0);
//   - time is replaced by sections: the sets of buffers alive together just
//     before some buffer dies (the maximal cliques of the interval graph).
//     Every buffer spans a contiguous range of sections, two buffers overlap
//     in time exactly when their ranges intersect, and the most units alive
//     at once is the largest section total;
//   - parts: the section ranges that no buffer crosses. Parts share no
//     moment, so they are planned independently, each from offset 0.
//
//   time      0    1    2    3    4    5
//   A         [=========)                 A = [0, 2)
//   B              [==============)       B = [1, 4)
//   C                        [=========)  C = [3, 5)
//   sections       s0 {A,B}  s1 {B,C}     (recorded when A, then B dies)
//
// Single-threaded; an Instance is immutable once built.

#ifndef KILN_PLANNER_MEMORY_INSTANCE_H_
#define KILN_PLANNER_MEMORY_INSTANCE_H_

#include <cstdint>
#include <vector>

#include "memory/problem.h"

namespace kiln::planner::memory {

struct Instance {
  uint64_t unit = 1;  // bytes per unit: alignment x gcd
  // Buffers with a size, in Problem order.
  std::vector<int> original;     // index into Problem::buffers
  std::vector<uint64_t> size;    // units
  std::vector<uint64_t> bytes;   // the Problem's size (greedy orders by it)
  std::vector<int> first, last;  // section range [first, last)
  std::vector<int64_t> begin;    // first moment alive, in the Problem's time
  std::vector<int64_t> width;    // lifetime length in the Problem's time
  int num_sections = 0;
  std::vector<uint64_t> section_total;  // units alive in each section
  std::vector<int64_t> section_moment;  // a moment of the Problem's time inside it
  struct Part {
    int first_section = 0, last_section = 0;  // [first, last)
    std::vector<int> buffers;                 // instance buffer indices
    uint64_t lower_bound = 0;                 // largest section total, units
  };
  std::vector<Part> parts;

  size_t count() const { return size.size(); }
  uint64_t lower_bound() const;  // units
};

Instance make_instance(const Problem& problem);

// Offsets in units (one per instance buffer) -> a Solution for the Problem.
Solution to_solution(const Problem& problem, const Instance& instance, const std::vector<uint64_t>& unit_offsets,
                     const char* algorithm);

// Largest end (offset + size) in units.
uint64_t arena_units(const Instance& instance, const std::vector<uint64_t>& unit_offsets);

// Greedy by size on an instance: offsets in units.
std::vector<uint64_t> greedy_offsets(const Instance& instance, bool best_fit);
// First fit with the buffers taken in `order` (instance indices).
std::vector<uint64_t> first_fit_in_order(const Instance& instance, const std::vector<int>& order);

}  // namespace kiln::planner::memory

#endif  // KILN_PLANNER_MEMORY_INSTANCE_H_
