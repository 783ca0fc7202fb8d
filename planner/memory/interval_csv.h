// Bare interval sets as CSV, the exchange format of memory planning
// benchmarks: a header row, then one buffer per row `id,begin,end,size`
// with an optional fifth column `offset` (a plan someone else made).
//
// Lifetimes are half-open [begin, end) unless the header says otherwise:
// column names containing "incl", "last" or "first" (as in
// `id,start_incl,end_incl,size` or `id,first_used,last_used,size`) mark
// inclusive [first, last] lifetimes, which are read as [first, last + 1).
// Plans are written as `id,offset`.

#ifndef KILN_PLANNER_MEMORY_INTERVAL_CSV_H_
#define KILN_PLANNER_MEMORY_INTERVAL_CSV_H_

#include <optional>
#include <string>
#include <vector>

#include "memory/problem.h"

namespace kiln::planner::memory {

struct IntervalFile {
  Problem problem;               // alignment 1
  std::vector<std::string> ids;  // the id column, per buffer
  bool inclusive = false;        // how the file's lifetimes were read
  // The fifth column, when the file has one.
  std::optional<std::vector<uint64_t>> offsets;
};

enum class LifetimeConvention { kDetect, kHalfOpen, kInclusive };

// Throws PlanError naming the file and line of a malformed row.
IntervalFile parse_interval_csv(const std::string& text, const std::string& name,
                                LifetimeConvention lifetimes = LifetimeConvention::kDetect);
IntervalFile read_interval_csv(const std::string& path, LifetimeConvention lifetimes = LifetimeConvention::kDetect);

// "id,offset\n" then one row per buffer.
std::string plan_csv(const IntervalFile& file, const Solution& solution);

}  // namespace kiln::planner::memory

#endif  // KILN_PLANNER_MEMORY_INTERVAL_CSV_H_
