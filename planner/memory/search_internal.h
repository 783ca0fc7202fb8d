// What the files of the memory search share (internal to memory/search*):
// the budget of one solve(), buffer orders, the skyline of a set of
// buffers, the size limits that decide how a part is searched, and the
// driver's phase functions. The algorithm's outline is in search.cc; each
// step is described where it is implemented.
//
// Everything here runs on the one search thread solve() starts; nothing is
// shared between threads.

#ifndef KILN_PLANNER_MEMORY_SEARCH_INTERNAL_H_
#define KILN_PLANNER_MEMORY_SEARCH_INTERNAL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "memory/instance.h"
#include "memory/problem.h"

namespace kiln::planner::memory::search {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kUnplaced = UINT64_MAX;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The lowest address the search's frames may reach on this thread (null:
// no limit); set by solve() (search.cc), read by every node of the search.
extern thread_local constinit const char* stack_floor;

// Static buffer orders (rank 0 first) for the search and the dives. Letters
// name the keys in order, all descending: T = largest section total the
// buffer lives in, W = lifetime width, A = area (size x width), Z = size.
constexpr const char* kPreorders[] = {"TWA", "WAT", "TAW", "AWT", "ZWT", "WZT"};
// The order dives try them in: the fastest and best on large traces first.
constexpr int kDiveOrder[] = {3, 0, 2, 4, 1, 5};
constexpr int kNumPreorders = sizeof(kPreorders) / sizeof(kPreorders[0]);

// rank[i] for the part-local buffers i, by the keys of one of kPreorders
// (ties by index). search_dive.cc.
std::vector<int> make_rank(const Instance& in, const std::vector<int>& buffers, const char* keys);

// A 64-bit mixing function (splitmix64's finaliser), for hashing.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// How the search branches (search_part.h). kCanonical places any candidate
// in (floor, rank) order; the cell strategies cover the lowest point of the
// skyline, choosing among the sections at the lowest level the one with the
// fewest candidates, the rightmost or the leftmost. Each is complete; which
// one finds a plan quickly depends on the instance, so the probes rotate
// them. The numbering is SolveOptions::branching's.
enum class Branching { kCellFewest, kCanonical, kCellRight, kCellLeft };
constexpr int kNumBranchings = 4;

// What one feasibility search at a capacity ended with. kGaveUp: it ran out
// of nodes, time or stack, and proves nothing.
enum class Outcome { kFound, kInfeasible, kGaveUp };

// Shared budget of one solve(): time, nodes, progress reports.
struct Budget {
  Clock::time_point start;
  Clock::time_point deadline;
  uint64_t node_limit = 0;  // total over the solve (0: none)
  uint64_t nodes = 0;
  uint64_t lower_bound_bytes = 0;
  uint64_t best_bytes = 0;
  const std::function<void(const Progress&)>* progress = nullptr;
  Clock::time_point last_report;

  // Reports progress at most twice a second, as a side effect.
  bool exhausted() {
    const Clock::time_point now = Clock::now();
    if (progress != nullptr && *progress && now - last_report > std::chrono::milliseconds(500)) {
      last_report = now;
      (*progress)(Progress{best_bytes, lower_bound_bytes, std::chrono::duration<double>(now - start).count(), nodes});
    }
    return now >= deadline || (node_limit != 0 && nodes >= node_limit);
  }
};

// The skyline of a set of buffers: per section, the highest end of the
// buffers placed there. A segment tree over sections: raise a range to at
// least v, read a range max. Iterative: a raise tags the O(log n) nodes
// covering the range and lifts the maxima on the two leaf-to-root paths at
// its ends; a read takes the maxima of the covering nodes and the tags on
// those two paths.
class FloorTree {
 public:
  explicit FloorTree(int n) {
    while (leaves_ < static_cast<size_t>(std::max(n, 1))) leaves_ <<= 1;
    max_.assign(2 * leaves_, 0);
    tag_.assign(2 * leaves_, 0);
  }
  uint64_t max(int a, int b) const {
    uint64_t result = 0;
    size_t l = static_cast<size_t>(a) + leaves_, r = static_cast<size_t>(b) + leaves_;
    for (size_t p = l >> 1; p > 0; p >>= 1) result = std::max(result, tag_[p]);
    for (size_t p = (r - 1) >> 1; p > 0; p >>= 1) result = std::max(result, tag_[p]);
    for (; l < r; l >>= 1, r >>= 1) {
      if (l & 1) result = std::max(result, max_[l++]);
      if (r & 1) result = std::max(result, max_[--r]);
    }
    return result;
  }
  void raise(int a, int b, uint64_t v) {
    size_t l = static_cast<size_t>(a) + leaves_, r = static_cast<size_t>(b) + leaves_;
    for (size_t p = l >> 1; p > 0; p >>= 1) max_[p] = std::max(max_[p], v);
    for (size_t p = (r - 1) >> 1; p > 0; p >>= 1) max_[p] = std::max(max_[p], v);
    for (; l < r; l >>= 1, r >>= 1) {
      if (l & 1) {
        max_[l] = std::max(max_[l], v);
        tag_[l] = std::max(tag_[l], v);
        ++l;
      }
      if (r & 1) {
        --r;
        max_[r] = std::max(max_[r], v);
        tag_[r] = std::max(tag_[r], v);
      }
    }
  }

 private:
  size_t leaves_ = 1;
  std::vector<uint64_t> max_;  // max over the subtree, tags included
  std::vector<uint64_t> tag_;  // a raise of the whole subtree
};

// A set of buffers planned together: a part, or the top of a part's plan
// above buffers frozen below it, whose ends become per-buffer floors.
// Sections are numbered from first_section.
struct Subset {
  std::vector<int> buffers;  // instance indices
  int first_section = 0, last_section = 0;
  std::vector<uint64_t> floors;  // per buffer; empty: all 0
};

inline Subset whole(const Instance::Part& part) {
  Subset s;
  s.buffers = part.buffers;
  s.first_section = part.first_section;
  s.last_section = part.last_section;
  return s;
}

// Step 6 (search_dive.cc): offsets (units) of the subset's buffers, in its
// order. Empty when `deadline` passes first.
std::vector<uint64_t> skyline_dive(const Instance& in, const Subset& part, const std::vector<int>& rank,
                                   Clock::time_point deadline);

// Overlapping pairs and (buffer, section) memberships of a subset, counted
// without listing them, to decide whether a search fits in memory
// (search_part.cc).
std::pair<uint64_t, uint64_t> search_size(const Instance& in, const Subset& part);

// Best fit walks every gap below its choice: skipped by solve() above this
// many buffers (still available on its own).
constexpr size_t kMaxBestFit = 20'000;

// Parts larger than this (overlapping pairs, memberships) have the top of
// their plan re-planned (step 7) instead of being searched whole: the
// search keeps both as lists, and its nodes get slow. Up to the second
// pair limit (about 0.5 GB of lists) the part is also searched whole, in
// turns with re-planning its top, which alone cannot move the bottom of
// the plan. Larger parts have their twins bundled first (step 8).
constexpr uint64_t kMaxSearchPairs = 4'000'000;
constexpr uint64_t kMaxLateSearchPairs = 16'000'000;
constexpr uint64_t kMaxSearchMemberships = 20'000'000;
// Buffer orders x branchings, before large parts' probe budgets double.
constexpr int kNumLargeCombos = std::lcm(kNumPreorders, kNumBranchings);

// Twins bundled into single buffers (step 8, search_bundle.cc).
struct Bundles {
  Problem problem;             // sizes in the instance's units, time in sections
  std::vector<int> group;      // per instance buffer: its buffer in `problem`
  std::vector<uint64_t> skip;  // per instance buffer: units below it in its group
};

// Bundles twins in the parts marked in `part_bundled`: only as many groups
// as it takes to bring each part within kMaxLateSearchPairs by an estimate,
// those that remove the most pairs first, or every group (`every_group`).
Bundles bundle_twins(const Instance& in, const std::vector<bool>& part_bundled, bool every_group);

class PartSearch;

// One solve_search() call: the instance, the budget and each part's best
// plan, and the phases that improve them (steps 2-4, 7 and 8). The phases
// are spread over search_solve.cc, search_replan.cc and search_bundle.cc.
// Keeps references to the problem, the instance and the options: they
// must outlive it.
class Solver {
 public:
  Solver(const Problem& problem, const Instance& in, const SolveOptions& options, Clock::time_point start);
  ~Solver();
  Solution solve();

 private:
  // Per part: its plan (part-local order), arena, proven lower bound, and
  // whether the search improved it.
  struct PartState {
    std::vector<uint64_t> offsets;
    uint64_t arena = 0;
    uint64_t lower = 0;
    bool searched = false;
    bool too_large = false;     // its top is re-planned (step 7)
    bool search_later = false;  // and it is searched whole in turns
    bool sized = false;
    uint64_t pairs = 0, memberships = 0;  // search_size() of the part
    int rounds = 0;
    uint64_t failed = 0;            // step 7's ladder: the highest capacity that failed
    bool replanning = false;        // step 7's phase
    Clock::time_point phase_until;  // and its end
    int replan_rounds = 0;
    std::unique_ptr<PartSearch> search;
    std::vector<std::vector<int>> ranks;
  };
  // What the main loop does after a part's turn: the next turn, stop, or
  // a round of probes on the part.
  enum class Turn { kNext, kStop, kProbe };
  // What re-planning one top of a plan ended with.
  enum class Replan { kImproved, kStopped, kUnchanged };

  // Node budgets of probes: enough for a few descents of the part at least.
  static constexpr uint64_t kFirstBudget = 1000;
  static constexpr uint64_t kRestartBudget = 1000;

  // Phases, in the order solve() runs them (search_solve.cc unless noted).
  void plan_greedy();
  void start_parts();
  void plan_bundled();  // search_bundle.cc
  void dive_parts();
  void probe_arena_part();
  Solution assemble() const;

  // The main loop's pieces.
  void size_part(PartState& ps);
  Turn take_turn(size_t p);
  void probe_round(size_t p, uint64_t goal);
  void probe_large_round(size_t p, uint64_t goal, int round);
  void probe_full_round(size_t p, uint64_t goal, int round);

  // Step 7 (search_replan.cc): re-plans the top of part p's plan until
  // `until`. True when the part's arena went down.
  bool replan_top(size_t p, int attempt, Clock::time_point until);
  bool replan_stops(Clock::time_point until);
  Subset top_of_plan(size_t p, const std::vector<uint64_t>& top, uint64_t frozen_top,
                     std::vector<size_t>& out_local) const;
  Replan replan_subset(size_t p, int attempt, Clock::time_point until, const std::vector<size_t>& local,
                       const Subset& sub);
  bool accept_top(size_t p, const std::vector<size_t>& local, const std::vector<uint64_t>& offsets);

  uint64_t arena() const;
  uint64_t target() const;
  void accept(size_t p, std::vector<uint64_t> local);
  Branching branching_of(int k) const;
  Outcome probe(size_t p, uint64_t capacity, uint64_t nodes, int k, uint64_t shuffle = 0);
  Clock::time_point window(int share) const;

  const Problem& problem_;
  const Instance& in_;
  const SolveOptions& options_;
  const Clock::time_point start_;
  std::vector<uint64_t> greedy_;
  uint64_t ff_arena_ = 0, bf_arena_ = 0;
  const char* greedy_name_ = "first-fit";
  Budget budget_;
  size_t num_parts_ = 0;
  std::vector<PartState> parts_;
};

// kAuto and kSearch on `in`, the instance of `problem`; runs on the thread
// solve() starts, and on the bundled problem of step 8.
Solution solve_search(const Problem& problem, const Instance& in, const SolveOptions& options, Clock::time_point start);

}  // namespace kiln::planner::memory::search

#endif  // KILN_PLANNER_MEMORY_SEARCH_INTERNAL_H_
