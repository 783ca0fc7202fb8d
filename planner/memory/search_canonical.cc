// The canonical search's children (step 5 of search.cc, kCanonical): the
// scheme of MiniMalloc (ASPLOS 2023), extended.
//   - Canonical form: a buffer is only placed at its floor (the highest end
//     of the placed buffers it overlaps in time), in nondecreasing
//     (offset, rank) order, rank being the buffer order. Any plan can be
//     pushed down and sorted into that form.
//   - Dominance: with y the unplaced buffer whose floor + size is lowest,
//     nothing is placed at or above that height (y would fit below it).
//   - Bounds: every later offset is >= the next one f, so f + the unplaced
//     units of any section <= C, which filters candidates before they are
//     tried; after a placement, the sections whose floors rose are checked
//     (sections_fit, search_place.cc).
//   - Forced placements: a buffer the canonical order has passed, with no
//     unplaced neighbour below its end, goes to its floor at once
//     (place_forced, search_part.cc).
//   - Decomposition and transposition tables are shared with the cell
//     search (search_decompose.cc, search_tables.cc); a failed state here
//     fails only under the canonical bound it was searched with.
// Children are tried in (floor, rank) order, so the search's first descent
// is the skyline dive (search_dive.cc).

#include <algorithm>

#include "memory/search_part.h"

namespace kiln::planner::memory::search {

// The children of a node: each candidate placed at its floor.
bool PartSearch::expand(Context& cx, uint64_t last_offset, int last_rank, int level) {
  const uint64_t key = context_key(cx);
  if (failed_before(key, last_offset, last_rank)) return false;
  const std::vector<int>& rank = *rank_;
  uint64_t min_height = UINT64_MAX;
  for (int u : cx.unplaced) {
    min_height = std::min(min_height, floor_[static_cast<size_t>(u)] + size_[static_cast<size_t>(u)]);
  }
  // Every later placement is at or above the next offset f, so each
  // section's unplaced units must fit above it: f + total <= capacity
  // (for the sections of the buffer placed at f too: what remains there
  // goes above its end).
  uint64_t most = 0;
  for (int s = cx.first_section; s < cx.last_section; ++s) most = std::max(most, total_[static_cast<size_t>(s)]);
  const uint64_t highest = capacity_ - most;
  const size_t pool_begin = pool_.size();
  for (int u : cx.unplaced) {
    const size_t i = static_cast<size_t>(u);
    const uint64_t f = floor_[i];
    if (f >= min_height || f + size_[i] > capacity_) continue;
    if (f < last_offset || (f == last_offset && rank[i] < last_rank)) continue;
    if (f > highest) continue;
    pool_.push_back(u);
  }
  std::sort(pool_.begin() + static_cast<std::ptrdiff_t>(pool_begin), pool_.end(), [&](int a, int b) {
    const uint64_t fa = floor_[static_cast<size_t>(a)], fb = floor_[static_cast<size_t>(b)];
    return fa != fb ? fa < fb : rank[static_cast<size_t>(a)] < rank[static_cast<size_t>(b)];
  });
  const size_t pool_end = pool_.size();
  shuffle(pool_begin, level);
  bool found = false;
  for (size_t k = pool_begin; k < pool_end && !found && !gave_up_; ++k) {
    const int u = pool_[k];
    const uint64_t offset = floor_[static_cast<size_t>(u)];
    const Mark mark = this->mark();
    bool split = false;
    if (place(cx, u, offset, split, level)) {
      found = split ? decompose(cx, offset, rank[static_cast<size_t>(u)], level + 1)
                    : dfs(cx, offset, rank[static_cast<size_t>(u)], level + 1);
    }
    undo(cx, mark);
  }
  pool_.resize(pool_begin);
  if (!found && !gave_up_) record_failure(key, last_offset, last_rank);
  return found;
}

}  // namespace kiln::planner::memory::search
