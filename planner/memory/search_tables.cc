// The search's transposition tables (step 5 of search.cc). The state of a
// context is the set of its unplaced buffers with their floors, hashed
// incrementally (Zobrist keys per (buffer, floor), kept up to date by
// remove(), restore(), raise_floor() and undo()), combined with the
// context's section range.
//   - Failures: a fixed table of states proven to have no completion,
//     indexed by the hash's low bits; another state's failure replaces an
//     entry, and so does the same state's under a weaker bound. The
//     canonical search fails a state only under the bound (offset, rank)
//     it was searched with: a visit with a weaker bound (lower offset, or
//     equal offset and lower rank) may still succeed. The cell search has
//     no such order and passes (0, -1), which every visit meets. Entries
//     of earlier runs (another capacity, order or branching) are void.
//   - Solved groups: the plans of groups decompose() solved, reused when
//     the same group comes back in the same state (within one run).

#include "memory/search_part.h"

namespace kiln::planner::memory::search {

bool PartSearch::failed_before(uint64_t key, uint64_t last_offset, int last_rank) const {
  const Failure& slot = failures_[key & (failures_.size() - 1)];
  return slot.run == run_ && slot.key == key &&
         (slot.offset < last_offset || (slot.offset == last_offset && slot.rank <= last_rank));
}

void PartSearch::record_failure(uint64_t key, uint64_t last_offset, int last_rank) {
  Failure& f = failures_[key & (failures_.size() - 1)];
  if (f.run != run_ || f.key != key || last_offset < f.offset || (last_offset == f.offset && last_rank < f.rank)) {
    f = Failure{key, last_offset, last_rank, run_};
  }
}

bool PartSearch::reuse_group_plan(uint64_t key) {
  auto known = solved_.find(key);
  if (known == solved_.end()) return false;
  for (const auto& [b, offset] : known->second) solution_[static_cast<size_t>(b)] = offset;
  return true;
}

void PartSearch::store_group_plan(uint64_t key, const Context& group) {
  if (solved_.size() >= kMaxSolvedGroups) return;
  std::vector<std::pair<int, uint64_t>>& plan = solved_[key];
  for (int b : group.buffers) plan.emplace_back(b, solution_[static_cast<size_t>(b)]);
}

}  // namespace kiln::planner::memory::search
