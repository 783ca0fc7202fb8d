// PartSearch's set-up, its entry point and a node of the search (step 5
// of search.cc; the class and its state are described in search_part.h).
//
// A node: count it against the budgets; place at once the buffers nothing
// can move any more (forced placements, below); then, if no unplaced
// buffer crosses some boundary inside the context any more, search the
// groups on either side one after the other (decompose), else branch by
// the run's rule (expand or expand_cell).

#include <algorithm>
#include <numeric>
#include <tuple>

#include "memory/search_part.h"

namespace kiln::planner::memory::search {

// Overlapping pairs and (buffer, section) memberships of a part, counted
// without listing them, to decide whether a search fits in memory.
std::pair<uint64_t, uint64_t> search_size(const Instance& in, const Subset& part) {
  const size_t sections = static_cast<size_t>(part.last_section - part.first_section);
  std::vector<int64_t> alive(sections + 1, 0), born(sections, 0);
  uint64_t memberships = 0;
  for (int b : part.buffers) {
    const size_t i = static_cast<size_t>(b);
    alive[static_cast<size_t>(in.first[i] - part.first_section)] += 1;
    alive[static_cast<size_t>(in.last[i] - part.first_section)] -= 1;
    born[static_cast<size_t>(in.first[i] - part.first_section)] += 1;
    memberships += static_cast<uint64_t>(in.last[i] - in.first[i]);
  }
  // A pair is counted in the section where the later of the two is born.
  uint64_t pairs = 0;
  int64_t members = 0;
  for (size_t s = 0; s < sections; ++s) {
    members += alive[s];
    const int64_t k = born[s];
    pairs += static_cast<uint64_t>(k * (members - k) + k * (k - 1) / 2);
  }
  return {pairs, memberships};
}

PartSearch::PartSearch(const Instance& in, const Subset& part) : m_(part.buffers.size()), initial_floor_(part.floors) {
  if (initial_floor_.empty()) initial_floor_.assign(m_, 0);
  const int base = part.first_section;
  sections_ = part.last_section - part.first_section;
  size_.resize(m_);
  first_.resize(m_);
  last_.resize(m_);
  for (size_t i = 0; i < m_; ++i) {
    const size_t b = static_cast<size_t>(part.buffers[i]);
    size_[i] = in.size[b];
    first_[i] = in.first[b] - base;
    last_[i] = in.last[b] - base;
  }
  // Members of each section, and overlapping pairs (ranges intersect).
  std::vector<std::vector<int>> members(static_cast<size_t>(sections_));
  for (size_t i = 0; i < m_; ++i) {
    for (int s = first_[i]; s < last_[i]; ++s) members[static_cast<size_t>(s)].push_back(static_cast<int>(i));
  }
  member_begin_.push_back(0);
  for (const auto& list : members) {
    member_.insert(member_.end(), list.begin(), list.end());
    member_begin_.push_back(member_.size());
  }
  // Where each buffer sits in each of its sections' member lists.
  entry_begin_.push_back(0);
  for (size_t i = 0; i < m_; ++i)
    entry_begin_.push_back(entry_begin_.back() + static_cast<size_t>(last_[i] - first_[i]));
  member_position_total_.resize(entry_begin_.back());
  for (size_t s = 0; s < members.size(); ++s) {
    for (size_t k = 0; k < members[s].size(); ++k) {
      const size_t b = static_cast<size_t>(members[s][k]);
      member_position_total_[entry_begin_[b] + (s - static_cast<size_t>(first_[b]))] = k;
    }
  }
  std::vector<std::vector<int>> overlaps(m_);
  for (size_t s = 0; s < members.size(); ++s) {
    // A pair is listed in the first section both share, where the
    // later-born of the two starts.
    for (int i : members[s]) {
      if (first_[static_cast<size_t>(i)] != static_cast<int>(s)) continue;
      for (int j : members[s]) {
        if (j == i || (first_[static_cast<size_t>(j)] == static_cast<int>(s) && j < i)) continue;
        overlaps[static_cast<size_t>(i)].push_back(j);
        overlaps[static_cast<size_t>(j)].push_back(i);
      }
    }
  }
  overlap_begin_.push_back(0);
  for (const auto& list : overlaps) {
    overlap_.insert(overlap_.end(), list.begin(), list.end());
    overlap_begin_.push_back(overlap_.size());
  }
  // Twins: identical buffers (same sections, same size), grouped
  // together in twin_; each buffer knows its group's range.
  twin_.resize(m_);
  std::iota(twin_.begin(), twin_.end(), 0);
  auto twin_key = [&](int b) {
    const size_t i = static_cast<size_t>(b);
    return std::make_tuple(first_[i], last_[i], size_[i]);
  };
  std::stable_sort(twin_.begin(), twin_.end(), [&](int a, int b) { return twin_key(a) < twin_key(b); });
  twin_group_.resize(m_);
  for (size_t a = 0, b = 0; a < m_; a = b) {
    while (b < m_ && twin_key(twin_[b]) == twin_key(twin_[a])) ++b;
    for (size_t x = a; x < b; ++x) twin_group_[static_cast<size_t>(twin_[x])] = {a, b};
  }
  cell_count_.assign(static_cast<size_t>(sections_), 0);
  section_total_.assign(static_cast<size_t>(sections_), 0);
  cut_total_.assign(static_cast<size_t>(std::max(sections_, 1)), 0);
  for (size_t i = 0; i < m_; ++i) {
    for (int s = first_[i]; s < last_[i]; ++s) section_total_[static_cast<size_t>(s)] += size_[i];
    for (int s = first_[i]; s + 1 < last_[i]; ++s) ++cut_total_[static_cast<size_t>(s)];
  }
}

Outcome PartSearch::run(uint64_t capacity, const std::vector<int>& rank, Branching branching, uint64_t node_budget,
                        Budget& budget, std::vector<uint64_t>& out_offsets, uint64_t shuffle) {
  branching_ = branching;
  shuffle_seed_ = shuffle;
  capacity_ = capacity;
  rank_ = &rank;
  node_budget_ = node_budget;
  budget_ = &budget;
  offset_.assign(m_, kUnplaced);
  solution_.assign(m_, 0);
  floor_ = initial_floor_;
  degree_.resize(m_);
  for (size_t i = 0; i < m_; ++i) degree_[i] = static_cast<int>(overlap_begin_[i + 1] - overlap_begin_[i]);
  total_ = section_total_;
  cut_ = cut_total_;
  unplaced_member_ = member_;
  member_position_ = member_position_total_;
  member_count_.resize(static_cast<size_t>(sections_));
  for (size_t s = 0; s < static_cast<size_t>(sections_); ++s)
    member_count_[s] = member_begin_[s + 1] - member_begin_[s];
  position_.resize(m_);
  pool_.clear();
  floor_log_.clear();
  removed_.clear();
  isolated_.clear();
  gave_up_ = false;
  if (zobrist_.empty()) {
    for (size_t k = 0; k < 2 * m_; ++k) zobrist_.push_back(mix(k));
  }
  hash_ = mix(capacity);
  for (size_t i = 0; i < m_; ++i) {
    hash_ ^= floor_key(i, floor_[i]);
    if (floor_[i] + size_[i] > capacity) return Outcome::kInfeasible;
  }
  if (failures_.empty()) failures_.resize(kFailureSlots);
  if (++run_ == 0) {
    std::fill(failures_.begin(), failures_.end(), Failure{});
    run_ = 1;
  }
  solved_.clear();
  for (uint64_t t : total_) {
    if (t > capacity) return Outcome::kInfeasible;
  }
  Context root;
  root.unplaced.resize(m_);
  std::iota(root.unplaced.begin(), root.unplaced.end(), 0);
  root.buffers = root.unplaced;
  root.first_section = 0;
  root.last_section = sections_;
  std::iota(position_.begin(), position_.end(), 0);
  if (decompose(root, 0, -1, 0)) {
    out_offsets = solution_;
    return Outcome::kFound;
  }
  return gave_up_ ? Outcome::kGaveUp : Outcome::kInfeasible;
}
bool PartSearch::dfs(Context& cx, uint64_t last_offset, int last_rank, int level) {
  if (cx.unplaced.empty()) {
    save(cx);
    return true;
  }
  ++budget_->nodes;
  if (node_budget_ == 0 || ((budget_->nodes & 63) == 0 && budget_->exhausted()) ||
      static_cast<const char*>(__builtin_frame_address(0)) < stack_floor) {
    gave_up_ = true;
    return false;
  }
  --node_budget_;
  const Mark entry = mark();
  bool split = false;
  place_forced(cx, last_offset, last_rank, split);
  bool found;
  if (cx.unplaced.empty()) {
    save(cx);
    found = true;
  } else if (split) {
    found = decompose(cx, last_offset, last_rank, level);
  } else if (branching_ == Branching::kCanonical) {
    found = expand(cx, last_offset, last_rank, level);
  } else {
    found = expand_cell(cx, level);
  }
  undo(cx, entry);
  return found;
}

// Forced placements. A buffer the canonical order has passed (its floor is
// below the last offset) can only be placed on top of a neighbour placed
// later. If no unplaced neighbour reaches below its end, nothing will ever
// move it: it goes to its floor now instead of dooming the subtree. (The
// cell search has no such order.) Buffers left without unplaced neighbours
// go to their floors with it (remove() lists them).
void PartSearch::place_forced(Context& cx, uint64_t last_offset, int last_rank, bool& split) {
  const bool canonical = branching_ == Branching::kCanonical;
  for (size_t k = 0; canonical && k < cx.unplaced.size();) {
    const size_t y = static_cast<size_t>(cx.unplaced[k]);
    const uint64_t f = floor_[y];
    if (f > last_offset || (f == last_offset && (*rank_)[y] >= last_rank)) {
      ++k;
      continue;
    }
    bool free = true;
    for (size_t j = overlap_begin_[y]; j < overlap_begin_[y + 1] && free; ++j) {
      const size_t w = static_cast<size_t>(overlap_[j]);
      if (offset_[w] == kUnplaced && floor_[w] < f + size_[y]) free = false;
    }
    if (!free) {
      ++k;
      continue;
    }
    const size_t isolated_begin = isolated_.size();
    remove(cx, static_cast<int>(y), f, split);
    for (size_t j = isolated_begin; j < isolated_.size(); ++j) {
      const int v = isolated_[j];
      if (offset_[static_cast<size_t>(v)] == kUnplaced) remove(cx, v, floor_[static_cast<size_t>(v)], split);
    }
    isolated_.resize(isolated_begin);
    k = 0;  // the list changed
  }
}

// A restart takes the children of its first levels in a seeded random
// order (Fisher-Yates): searches at a tight capacity are heavy-tailed, and
// many short tries often beat one long one.
void PartSearch::shuffle(size_t pool_begin, int level) {
  const size_t pool_end = pool_.size();
  if (shuffle_seed_ == 0 || level >= kShuffleDepth || pool_end - pool_begin < 2) return;
  for (size_t k = pool_end - 1; k > pool_begin; --k) {
    const uint64_t r = mix(shuffle_seed_ * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(level) * 1000003 + k);
    std::swap(pool_[k], pool_[pool_begin + r % (k - pool_begin + 1)]);
  }
}

}  // namespace kiln::planner::memory::search
