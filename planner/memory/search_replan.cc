// Re-planning the top of a part's plan (step 7 of search.cc), for parts too
// large to be searched whole at once (over kMaxSearchPairs overlapping
// pairs or kMaxSearchMemberships memberships): the search keeps both as
// lists, and its nodes get slow.
//
//   offset
//   arena +-----------------------------------+
//         |  the top: the k buffers that end  |  taken out and planned again
//         |  highest                          |  above the frozen part
//         |    +------+     +---+        +----+
//         +----+      +-----+   +--------+    |  floors: the ends of the
//         |  frozen: every other buffer       |  frozen buffers each top
//         |  stays where it is                |  buffer overlaps
//       0 +-----------------------------------+
//
// The top is dived again with every buffer order and, when small enough,
// searched as in step 5 at the goal and three capacities up towards the
// arena, with at least a descent's worth of nodes each. k starts at 64 and
// doubles until the arena goes down or k covers the part; the next call
// starts over from the new plan.

#include <algorithm>
#include <numeric>

#include "memory/search_internal.h"
#include "memory/search_part.h"

namespace kiln::planner::memory::search {

bool Solver::replan_top(size_t p, int attempt, Clock::time_point until) {
  PartState& ps = parts_[p];
  const Instance::Part& part = in_.parts[p];
  const size_t m = part.buffers.size();
  std::vector<uint64_t> top(m);
  for (size_t i = 0; i < m; ++i) top[i] = ps.offsets[i] + in_.size[static_cast<size_t>(part.buffers[i])];
  std::vector<size_t> by_top(m);
  std::iota(by_top.begin(), by_top.end(), 0);
  std::stable_sort(by_top.begin(), by_top.end(), [&](size_t a, size_t b) { return top[a] > top[b]; });
  for (size_t k = 64; !replan_stops(until); k *= 2) {
    k = std::min(k, m);
    const uint64_t frozen_top = k < m ? top[by_top[k]] : 0;
    std::vector<size_t> local;
    const Subset sub = top_of_plan(p, top, frozen_top, local);
    if (sub.buffers.empty()) continue;  // more than k buffers share the top end
    const Replan result = replan_subset(p, attempt, until, local, sub);
    if (result != Replan::kUnchanged) return result == Replan::kImproved;
    if (k == m) break;
  }
  return false;
}

bool Solver::replan_stops(Clock::time_point until) { return budget_.exhausted() || Clock::now() >= until; }

// The buffers of part p that end above frozen_top (`top`: each buffer's
// end in the part's plan), with the ends of the frozen buffers below them
// as floors. out_local: their part-local indices.
Subset Solver::top_of_plan(size_t p, const std::vector<uint64_t>& top, uint64_t frozen_top,
                           std::vector<size_t>& out_local) const {
  const Instance::Part& part = in_.parts[p];
  const size_t m = part.buffers.size();
  Subset sub;
  sub.first_section = part.last_section;
  sub.last_section = part.first_section;
  for (size_t i = 0; i < m; ++i) {
    if (top[i] <= frozen_top) continue;
    const size_t b = static_cast<size_t>(part.buffers[i]);
    out_local.push_back(i);
    sub.buffers.push_back(static_cast<int>(b));
    sub.first_section = std::min(sub.first_section, in_.first[b]);
    sub.last_section = std::max(sub.last_section, in_.last[b]);
  }
  if (sub.buffers.empty()) return sub;
  FloorTree frozen(part.last_section - part.first_section);
  for (size_t i = 0; i < m; ++i) {
    if (top[i] > frozen_top) continue;
    const size_t b = static_cast<size_t>(part.buffers[i]);
    frozen.raise(in_.first[b] - part.first_section, in_.last[b] - part.first_section, top[i]);
  }
  for (int b : sub.buffers) {
    const size_t bi = static_cast<size_t>(b);
    sub.floors.push_back(frozen.max(in_.first[bi] - part.first_section, in_.last[bi] - part.first_section));
  }
  return sub;
}

// Dives on the top `sub` (part-local indices `local`) with every order,
// then, if it is small enough, searches it at four capacities.
Solver::Replan Solver::replan_subset(size_t p, int attempt, Clock::time_point until, const std::vector<size_t>& local,
                                     const Subset& sub) {
  PartState& ps = parts_[p];
  for (int h : kDiveOrder) {
    std::vector<uint64_t> dive = skyline_dive(in_, sub, make_rank(in_, sub.buffers, kPreorders[h]), budget_.deadline);
    if (!dive.empty() && accept_top(p, local, dive)) return Replan::kImproved;
    if (replan_stops(until)) return Replan::kStopped;
  }
  const auto [pairs, memberships] = search_size(in_, sub);
  if (pairs <= kMaxSearchPairs && memberships <= kMaxSearchMemberships) {
    PartSearch search(in_, sub);
    const std::vector<int> rank = make_rank(in_, sub.buffers, kPreorders[attempt % kNumPreorders]);
    // At least a descent's worth of nodes (a probe with fewer never
    // places the whole subset).
    const uint64_t nodes = std::max<uint64_t>(kFirstBudget << std::min(attempt, 20), 2 * sub.buffers.size());
    // The goal first, then halfway up to the arena, and halfway again,
    // four capacities in all (closer to the arena a probe gains little).
    const uint64_t goal = target();
    for (uint64_t c = goal; c < ps.arena && (ps.arena - c) * 16 > ps.arena - goal && !replan_stops(until);
         c += (ps.arena - c + 1) / 2) {
      std::vector<uint64_t> found;
      const Branching branching = branching_of(attempt);
      if (search.run(c, rank, branching, nodes, budget_, found) == Outcome::kFound && accept_top(p, local, found)) {
        return Replan::kImproved;
      }
    }
  }
  return Replan::kUnchanged;
}

// Part p's plan with the top (part-local indices `local`) at `offsets`,
// kept if it lowers the part's arena. True when it did.
bool Solver::accept_top(size_t p, const std::vector<size_t>& local, const std::vector<uint64_t>& offsets) {
  PartState& ps = parts_[p];
  std::vector<uint64_t> plan = ps.offsets;
  for (size_t j = 0; j < local.size(); ++j) plan[local[j]] = offsets[j];
  const uint64_t before = ps.arena;
  accept(p, std::move(plan));
  return ps.arena < before;
}

}  // namespace kiln::planner::memory::search
