// The cell search's children (step 5 of search.cc, kCellFewest, kCellRight,
// kCellLeft): the bottom-left rule of exact strip packing, adapted.
//
// L, the lowest level of any section (the lowest floor among its unplaced
// buffers), never goes down: every unplaced buffer ends up at or above it.
// One section at level L is chosen; the point (section, L) is either
// covered by one of its buffers whose floor is L (one child per buffer, in
// rank order), or left empty: then the section's buffers all start at
// `next` or above, where `next` is the lowest height one of them can start
// at: its floor when above L, else the lowest end of an unplaced neighbour
// outside the section (a buffer that is not at its floor rests on another
// one).
//
//   cover the cell with b:           or leave it empty up to `next`:
//
//                                     ###  - - - - - - -   next
//   ###  +-----+                      ###      empty
//   ###  |  b  |                      ###
//   #####+-----+-------------  L      ########-----------  L
//        ^ the cell (section, L)      (### placed buffers)
//
// Every plan pushed down is reached exactly once, so no canonical order is
// needed and a failed state fails whatever path led to it. Symmetry: of
// identical buffers (same sections, same size), only the lowest-ranked
// unplaced one is tried (any plan can swap them). Which section at level L:
// the one with the fewest candidates, the rightmost or the leftmost (three
// branchings; which is best depends on the instance). The cell search
// shares with the canonical one the bounds, the placement of buffers left
// without unplaced neighbours, decomposition and the transposition tables.

#include <algorithm>

#include "memory/search_part.h"

namespace kiln::planner::memory::search {

bool PartSearch::expand_cell(Context& cx, int level) {
  // No canonical order: a failed state is recorded and looked up with the
  // weakest bound, (0, -1), which every later visit meets.
  const uint64_t key = context_key(cx);
  if (failed_before(key, 0, -1)) return false;
  // The sections at the lowest level are those of the buffers whose
  // floor is that level.
  uint64_t lowest = UINT64_MAX, most = 0;
  for (int u : cx.unplaced) lowest = std::min(lowest, floor_[static_cast<size_t>(u)]);
  for (int s = cx.first_section; s < cx.last_section; ++s) most = std::max(most, total_[static_cast<size_t>(s)]);
  if (lowest == UINT64_MAX || lowest + most > capacity_) return false;
  const int at = choose_cell(cx, lowest);
  const size_t cell = static_cast<size_t>(at);
  const std::vector<int>& rank = *rank_;
  const size_t pool_begin = pool_.size();
  const int* list = &unplaced_member_[member_begin_[cell]];
  uint64_t next = UINT64_MAX;
  for (size_t k = 0; k < member_count_[cell]; ++k) {
    const size_t v = static_cast<size_t>(list[k]);
    if (floor_[v] != lowest) {
      next = std::min(next, floor_[v]);
      continue;
    }
    for (size_t j = overlap_begin_[v]; j < overlap_begin_[v + 1]; ++j) {
      const size_t w = static_cast<size_t>(overlap_[j]);
      if (offset_[w] != kUnplaced || (first_[w] <= at && at < last_[w])) continue;
      next = std::min(next, floor_[w] + size_[w]);
    }
    if (lowest + size_[v] > capacity_) continue;
    bool symmetric = false;
    for (size_t j = twin_group_[v].first; j < twin_group_[v].second && !symmetric; ++j) {
      const size_t w = static_cast<size_t>(twin_[j]);
      symmetric = offset_[w] == kUnplaced && rank[w] < rank[v];
    }
    if (!symmetric) pool_.push_back(static_cast<int>(v));
  }
  std::sort(pool_.begin() + static_cast<std::ptrdiff_t>(pool_begin), pool_.end(),
            [&](int a, int b) { return rank[static_cast<size_t>(a)] < rank[static_cast<size_t>(b)]; });
  shuffle(pool_begin, level);
  const size_t pool_end = pool_.size();
  bool found = false;
  for (size_t k = pool_begin; k < pool_end && !found && !gave_up_; ++k) {
    const Mark mark = this->mark();
    bool split = false;
    if (place(cx, pool_[k], lowest, split, level)) {
      found = split ? decompose(cx, 0, -1, level + 1) : dfs(cx, 0, -1, level + 1);
    }
    undo(cx, mark);
  }
  pool_.resize(pool_begin);
  if (!found && !gave_up_ && next != UINT64_MAX && next + total_[cell] <= capacity_) {
    const Mark mark = this->mark();
    if (raise_section(cell, next)) found = dfs(cx, 0, -1, level + 1);
    undo(cx, mark);
  }
  if (!found && !gave_up_) record_failure(key, 0, -1);
  return found;
}

// The section whose point at level `lowest` the children cover, by the
// run's rule.
int PartSearch::choose_cell(const Context& cx, uint64_t lowest) {
  at_lowest_.clear();
  for (int u : cx.unplaced) {
    if (floor_[static_cast<size_t>(u)] == lowest) at_lowest_.push_back(u);
  }
  int at = branching_ == Branching::kCellRight ? -1 : INT32_MAX;
  for (int u : at_lowest_) {
    const size_t i = static_cast<size_t>(u);
    switch (branching_) {
      case Branching::kCellRight: at = std::max(at, last_[i] - 1); break;
      case Branching::kCellLeft: at = std::min(at, first_[i]); break;
      default:
        for (int t = first_[i]; t < last_[i]; ++t) ++cell_count_[static_cast<size_t>(t)];
        break;
    }
  }
  if (branching_ == Branching::kCellFewest) {
    // The one with the fewest buffers at that level (the leftmost of
    // those); the counts are cleared on the way.
    int fewest = INT32_MAX;
    for (int u : at_lowest_) {
      const size_t i = static_cast<size_t>(u);
      for (int t = first_[i]; t < last_[i]; ++t) {
        const int count = cell_count_[static_cast<size_t>(t)];
        if (count != 0 && (count < fewest || (count == fewest && t < at))) {
          fewest = count;
          at = t;
        }
      }
    }
    for (int u : at_lowest_) {
      const size_t i = static_cast<size_t>(u);
      for (int t = first_[i]; t < last_[i]; ++t) cell_count_[static_cast<size_t>(t)] = 0;
    }
  }
  return at;
}

}  // namespace kiln::planner::memory::search
