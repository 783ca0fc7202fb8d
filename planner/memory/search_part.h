// PartSearch: does a set of buffers fit within a capacity C? (step 5 of
// search.cc). Depth-first branch and bound over the buffers' offsets, one
// object per part (or per re-planned top of a part), run many times at
// different capacities, buffer orders and branchings.
//
// The state of a node: some buffers placed; every unplaced buffer has a
// floor, the highest end of the placed buffers it overlaps in time (no
// plan pushed down puts it lower), and every section the units of its
// unplaced buffers.
//
//   offset
//     C  +- capacity -------------------------------+
//        |                                          |
//        |             +-----+                      |
//        |             |  x  |  unplaced x rests at its floor,
//        |   +---------+--+--+------+               |  the end of b
//        |   |     a      |    b    |               |
//     0  +---+------------+---------+---------------+
//          s0    s1    s2    s3    s4    s5   sections (time) ->
//
// A node (dfs, search_part.cc) first places the buffers nothing can move
// any more, then either splits into independent groups (decompose,
// search_decompose.cc) or branches: on canonical placements (expand,
// search_canonical.cc) or on the lowest cell of the skyline (expand_cell,
// search_cells.cc). Placing a buffer raises its neighbours' floors and
// checks the bounds; undoing it restores everything from logs
// (search_place.cc). States proven infeasible, and plans of groups already
// solved, are remembered (search_tables.cc).
//
// Part-local buffer i is Subset::buffers[i]; sections are numbered from
// the subset's first. Not thread-safe; the Budget passed to run() must
// outlive the call.

#ifndef KILN_PLANNER_MEMORY_SEARCH_PART_H_
#define KILN_PLANNER_MEMORY_SEARCH_PART_H_

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memory/instance.h"
#include "memory/search_internal.h"

namespace kiln::planner::memory::search {

class PartSearch {
 public:
  PartSearch(const Instance& in, const Subset& part);

  // Looks for offsets within `capacity` (units) with the given buffer order
  // and branching. kFound fills out_offsets.
  // A nonzero `shuffle` seeds the order of the children near the root.
  Outcome run(uint64_t capacity, const std::vector<int>& rank, Branching branching, uint64_t node_budget,
              Budget& budget, std::vector<uint64_t>& out_offsets, uint64_t shuffle = 0);

 private:
  // A set of buffers searched together: the part, or a group that became
  // independent of the rest when no unplaced buffer crossed its edges.
  struct Context {
    std::vector<int> unplaced;  // position_[b] indexes this
    std::vector<int> buffers;   // all of them, placed or not
    int first_section = 0, last_section = 0;
    // hash_ ^ base: the hash of this context's unplaced buffers and floors.
    uint64_t base = 0;
    uint64_t room = 0;  // capacity - largest section total, when created
  };
  struct FloorChange {
    int buffer;
    uint64_t floor;
  };
  struct Removed {
    int buffer;
    size_t position;  // in its context's unplaced list
  };
  // How far the logs went before a placement, to undo it.
  struct Mark {
    size_t floors, removed;
  };
  // A node proven to have no completion: its state's hash and the
  // weakest canonical bound (offset, rank) it was searched under.
  struct Failure {
    uint64_t key = 0;
    uint64_t offset = 0;
    int rank = 0;
    uint32_t run = 0;  // entries of earlier runs (other capacity or order) are void
  };

  // search_part.cc: a node.
  // True when a plan of cx's unplaced buffers was found (saved in
  // solution_); false when there is none or the budget or the stack ran out
  // (gave_up_). Leaves the state as it found it either way.
  bool dfs(Context& cx, uint64_t last_offset, int last_rank, int level);
  void place_forced(Context& cx, uint64_t last_offset, int last_rank, bool& split);
  void shuffle(size_t pool_begin, int level);

  // search_canonical.cc and search_cells.cc: the children of a node.
  bool expand(Context& cx, uint64_t last_offset, int last_rank, int level);
  bool expand_cell(Context& cx, int level);
  int choose_cell(const Context& cx, uint64_t lowest);

  // search_decompose.cc.
  bool decompose(Context& cx, uint64_t last_offset, int last_rank, int level);

  // search_place.cc: placing, bounds, undoing.
  bool place(Context& cx, int u, uint64_t offset, bool& split, int level);
  bool raise_section(size_t s, uint64_t height);
  bool raise_floor(size_t v, uint64_t height, int& lo, int& hi);
  bool sections_fit(int lo, int hi, uint64_t height) const;
  bool section_fits(size_t s, uint64_t top) const;
  void remove(Context& cx, int u, uint64_t offset, bool& split);
  void restore(Context& cx, int u, size_t p);
  void undo(Context& cx, const Mark& mark);
  Mark mark() const { return {floor_log_.size(), removed_.size()}; }

  // search_tables.cc: the transposition tables.
  bool failed_before(uint64_t key, uint64_t last_offset, int last_rank) const;
  void record_failure(uint64_t key, uint64_t last_offset, int last_rank);
  bool reuse_group_plan(uint64_t key);
  void store_group_plan(uint64_t key, const Context& group);

  void save(const Context& cx) {
    for (int b : cx.buffers) {
      if (offset_[static_cast<size_t>(b)] != kUnplaced)
        solution_[static_cast<size_t>(b)] = offset_[static_cast<size_t>(b)];
    }
  }

  uint64_t context_key(const Context& cx) const {
    return hash_ ^ cx.base ^
           mix(static_cast<uint64_t>(cx.first_section) << 32 | static_cast<uint32_t>(cx.last_section));
  }
  uint64_t floor_key(size_t b, uint64_t floor) const {
    uint64_t x = (floor + zobrist_[2 * b + 1]) * 0x9e3779b97f4a7c15ULL;
    x ^= x >> 29;
    return x * (zobrist_[2 * b] | 1);
  }

  size_t entry(size_t buffer, int section) const {
    return entry_begin_[buffer] + static_cast<size_t>(section - first_[buffer]);
  }

  static constexpr size_t kFailureSlots = size_t{1} << 18;
  static constexpr size_t kMaxSolvedGroups = 100000;

  // Levels whose children a restart shuffles: deep enough to change the
  // early decisions, shallow enough to keep the heuristic's order below.
  static constexpr int kShuffleDepth = 2;

  size_t m_;
  std::vector<uint64_t> initial_floor_;
  int sections_ = 0;
  std::vector<uint64_t> size_;
  std::vector<int> first_, last_;
  std::vector<size_t> overlap_begin_;
  std::vector<int> overlap_;
  std::vector<size_t> member_begin_;
  std::vector<int> member_;          // per section, its buffers
  std::vector<size_t> entry_begin_;  // per buffer, into member_position_
  std::vector<size_t> member_position_total_;
  std::vector<uint64_t> section_total_;
  std::vector<int> cut_total_;                         // buffers crossing boundary s | s+1
  std::vector<int> twin_;                              // buffers, identical ones next to each other
  std::vector<std::pair<size_t, size_t>> twin_group_;  // per buffer: its twins' range in twin_ (itself included)
  // Scratch of expand_cell, used up before it recurses: the buffers at the
  // lowest level, and per section a count (all 0 between uses).
  std::vector<int> at_lowest_;
  std::vector<int> cell_count_;

  uint64_t capacity_ = 0;
  Branching branching_ = Branching::kCanonical;
  uint64_t shuffle_seed_ = 0;
  const std::vector<int>* rank_ = nullptr;
  uint64_t node_budget_ = 0;
  Budget* budget_ = nullptr;
  bool gave_up_ = false;
  std::vector<uint64_t> offset_;
  std::vector<uint64_t> solution_;
  std::vector<uint64_t> floor_;  // per buffer: highest end of placed overlapping buffers
  std::vector<int> degree_;      // per buffer: unplaced overlapping buffers
  std::vector<uint64_t> total_;  // per section: unplaced units
  std::vector<int> cut_;         // per boundary: unplaced buffers crossing it
  std::vector<size_t> position_;
  std::vector<int> pool_;
  std::vector<FloorChange> floor_log_;
  std::vector<Removed> removed_;
  std::vector<int> isolated_;
  std::vector<int> unplaced_member_;     // member_ reordered: unplaced first in each section
  std::vector<size_t> member_count_;     // per section: unplaced members
  std::vector<size_t> member_position_;  // per (buffer, section): index in unplaced_member_
  // Transposition tables: the state of a context is the set of its
  // unplaced buffers with their floors, hashed incrementally (Zobrist).
  // A 64-bit collision could wrongly prune; at 2^-64 per lookup that is
  // accepted.
  std::vector<uint64_t> zobrist_;
  uint64_t hash_ = 0;
  std::vector<Failure> failures_;
  uint32_t run_ = 0;
  std::unordered_map<uint64_t, std::vector<std::pair<int, uint64_t>>> solved_;  // group plans
};

}  // namespace kiln::planner::memory::search

#endif  // KILN_PLANNER_MEMORY_SEARCH_PART_H_
