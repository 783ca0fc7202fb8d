// Decomposition (step 5 of search.cc): when no unplaced buffer crosses a
// section boundary any more, the groups of buffers on either side share no
// moment, so each is searched on its own, one after the other:
//
//   sections   s0   s1   s2 | s3   s4 | s5          | : a boundary no
//   unplaced   [====]  [==] | [=======] | [==]        unplaced buffer
//              group 1      | group 2   | group 3     crosses any more
//
// Each group is complete on its own, from offset 0 (no canonical order
// between groups), and one infeasible group makes the node infeasible. A
// group met before in the same state reuses its plan (search_tables.cc).

#include <algorithm>

#include "memory/search_part.h"

namespace kiln::planner::memory::search {

bool PartSearch::decompose(Context& cx, uint64_t last_offset, int last_rank, int level) {
  std::vector<Context> groups;
  int start = cx.first_section;
  for (int s = cx.first_section; s < cx.last_section; ++s) {
    if (s + 1 == cx.last_section || cut_[static_cast<size_t>(s)] == 0) {
      Context g;
      g.first_section = start;
      g.last_section = s + 1;
      groups.push_back(std::move(g));
      start = s + 1;
    }
  }
  if (groups.size() == 1) return dfs(cx, last_offset, last_rank, level);
  for (int b : cx.unplaced) {
    const int s = first_[static_cast<size_t>(b)];
    auto it =
        std::upper_bound(groups.begin(), groups.end(), s, [](int x, const Context& g) { return x < g.first_section; });
    (it - 1)->unplaced.push_back(b);
  }
  size_t nonempty = 0;
  for (const Context& g : groups) nonempty += g.unplaced.empty() ? 0 : 1;
  if (nonempty <= 1) return dfs(cx, last_offset, last_rank, level);
  // Tightest group first: the one most likely to fail ends the search
  // of this node soonest.
  for (Context& g : groups) {
    uint64_t most = 0;
    for (int s = g.first_section; s < g.last_section; ++s) most = std::max(most, total_[static_cast<size_t>(s)]);
    g.room = capacity_ - most;
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Context& a, const Context& b) { return a.room < b.room; });
  bool found = true;
  for (Context& g : groups) {
    if (g.unplaced.empty()) continue;
    g.buffers = g.unplaced;
    uint64_t own = 0;
    for (size_t k = 0; k < g.unplaced.size(); ++k) {
      const size_t b = static_cast<size_t>(g.unplaced[k]);
      position_[b] = k;
      own ^= floor_key(b, floor_[b]);
    }
    g.base = hash_ ^ own;
    // A group met before in the same state: reuse its plan.
    const uint64_t key = context_key(g);
    if (reuse_group_plan(key)) continue;
    found = dfs(g, 0, -1, level);
    if (!found) break;
    store_group_plan(key, g);
  }
  for (size_t k = 0; k < cx.unplaced.size(); ++k) position_[static_cast<size_t>(cx.unplaced[k])] = k;
  if (found) save(cx);
  return found;
}

}  // namespace kiln::planner::memory::search
