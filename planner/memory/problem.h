// The memory planning problem in its bare form: buffers with a lifetime and
// a size, to be given offsets in one arena so that no two buffers alive at
// the same time share a byte. Method planning reduces each arena to this
// (aliases merged into their base first); `kiln memplan` reads it from CSV.
//
//   time ->        0    1    2    3    4
//   offset  0  +---------+              +
//              |    A    |    C         |
//          64  +----+----+---------+    |
//                   |   B          |
//         192       +--------------+
//   A = [0, 2) 64 B, B = [1, 4) 128 B, C = [2, 5) 64 B: C may reuse A's bytes.

#ifndef KILN_PLANNER_MEMORY_PROBLEM_H_
#define KILN_PLANNER_MEMORY_PROBLEM_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::planner::memory {

struct Buffer {
  int64_t begin = 0;  // first moment alive
  int64_t end = 0;    // first moment no longer alive (half-open)
  uint64_t size = 0;
};

struct Problem {
  std::vector<Buffer> buffers;
  // Every offset is a multiple of this (a power of two).
  uint64_t alignment = 1;
};

struct Solution {
  std::vector<uint64_t> offsets;  // one per buffer
  uint64_t arena_size = 0;        // max(offset + size), rounded to alignment
  std::string algorithm;          // which algorithm produced it
  bool optimal = false;           // proven optimal (equal to the lower bound, or the search proved it)
  // What solve() did to get it (kAuto / kSearch; zero for the others).
  uint64_t lower_bound = 0;  // bytes, see lower_bound()
  uint64_t first_fit = 0;    // arena of greedy first fit, bytes
  uint64_t best_fit = 0;     // arena of greedy best fit, bytes
  uint64_t nodes = 0;        // search nodes visited
  int parts = 0;             // independent pieces (no buffer alive across a cut)
  double seconds = 0;        // wall time of solve()
};

enum class Algorithm { kNaive, kGreedyFirstFit, kGreedyBestFit, kSearch, kAuto };

// "naive", "first-fit", "best-fit", "search", "auto"
const char* algorithm_name(Algorithm algorithm);
// Throws PlanError listing the names for an unknown one.
Algorithm parse_algorithm(const std::string& name);

struct Progress {
  uint64_t best = 0;         // arena of the best plan so far, bytes
  uint64_t lower_bound = 0;  // bytes
  double elapsed_s = 0;
  uint64_t nodes = 0;
};

struct SolveOptions {
  Algorithm algorithm = Algorithm::kAuto;
  // Wall-clock budget of the search (kAuto, kSearch). The search stops
  // early when it meets the lower bound or proves its plan optimal; only a
  // search cut short by this limit can depend on the machine's speed.
  double time_limit_s = 10.0;
  // Budget in search nodes as well (0: none). Unlike time, reproducible.
  uint64_t node_limit = 0;
  // Called about twice a second during long searches; may be empty.
  std::function<void(const Progress&)> progress;
  // The search's branching rule, for tests and experiments: -1 takes them
  // all in turn (the default); 0-3 only that one (memory/search.cc).
  int branching = -1;
};

struct LowerBound {
  uint64_t bytes = 0;     // most bytes alive at one moment (sizes aligned)
  int64_t moment = -1;    // a moment where that happens (the earliest)
  std::vector<int> live;  // the buffers alive then, ascending
};

LowerBound lower_bound(const Problem& problem);

// Plans `problem`. kAuto and kSearch never return a plan worse than greedy
// first fit: they start from the better greedy plan and search below it
// (memory/search.cc). Deterministic: the same problem and options give the
// same plan, unless the time limit cuts a search short.
Solution solve(const Problem& problem, const SolveOptions& options);

// Each algorithm on its own (solve() picks among them).
Solution solve_naive(const Problem& problem);
Solution solve_greedy(const Problem& problem, bool best_fit);

// Checks a solution: offsets aligned, no overlap in time and space. Returns
// an empty string when valid, else a message naming two buffers.
std::string check_solution(const Problem& problem, const Solution& solution);

}  // namespace kiln::planner::memory

#endif  // KILN_PLANNER_MEMORY_PROBLEM_H_
