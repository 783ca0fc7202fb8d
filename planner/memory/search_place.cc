// Placing a buffer, the bounds checked after it, and undoing it (step 5 of
// search.cc; the state is described in search_part.h).
//
// place() takes the buffer out of the unplaced sets, raises the floors of
// its unplaced neighbours to its end, places at their floors the buffers
// it left without unplaced neighbours (nothing can move them any more),
// and checks the bounds on the sections whose floors rose. Every change is
// logged (floor_log_, removed_) so that undo() restores the state exactly,
// the incremental hash included.

#include <algorithm>

#include "memory/search_part.h"

namespace kiln::planner::memory::search {

// Places u at offset, and with it every buffer left without unplaced
// neighbours (its floor is final and nothing else can move it, so it
// goes there now, in any order). False when a bound shows that nothing
// completes the plan. Sets split when a boundary inside cx lost its last
// crossing buffer.
bool PartSearch::place(Context& cx, int u, uint64_t offset, bool& split, int level) {
  const size_t i = static_cast<size_t>(u);
  const uint64_t top = offset + size_[i];
  const size_t isolated_begin = isolated_.size();
  remove(cx, u, offset, split);
  // Raise the floors of overlapping unplaced buffers, all to `top`.
  bool ok = true;
  int lo = first_[i], hi = last_[i];
  for (size_t k = overlap_begin_[i]; k < overlap_begin_[i + 1]; ++k) {
    const size_t v = static_cast<size_t>(overlap_[k]);
    if (offset_[v] == kUnplaced && floor_[v] < top) ok &= raise_floor(v, top, lo, hi);
  }
  for (size_t k = isolated_begin; k < isolated_.size(); ++k) {
    const int v = isolated_[k];
    if (offset_[static_cast<size_t>(v)] == kUnplaced) remove(cx, v, floor_[static_cast<size_t>(v)], split);
  }
  isolated_.resize(isolated_begin);
  return ok && sections_fit(lo, hi, top);
}

// The cell search's empty cell: the unplaced buffers of section s get
// floors of at least `height`. False when a bound shows that nothing
// completes the plan.
bool PartSearch::raise_section(size_t s, uint64_t height) {
  int lo = static_cast<int>(s), hi = lo + 1;
  const int* list = &unplaced_member_[member_begin_[s]];
  for (size_t k = 0; k < member_count_[s]; ++k) {
    const size_t v = static_cast<size_t>(list[k]);
    if (floor_[v] < height && !raise_floor(v, height, lo, hi)) return false;
  }
  return sections_fit(lo, hi, height);
}

// Raises v's floor to `height` (logged for undo) and widens [lo, hi) to
// its sections. False when v no longer fits under the capacity.
bool PartSearch::raise_floor(size_t v, uint64_t height, int& lo, int& hi) {
  floor_log_.push_back({static_cast<int>(v), floor_[v]});
  hash_ ^= floor_key(v, floor_[v]) ^ floor_key(v, height);
  floor_[v] = height;
  lo = std::min(lo, first_[v]);
  hi = std::max(hi, last_[v]);
  return height + size_[v] <= capacity_;
}

// Sections [lo, hi), whose buffers' floors rose to `height`. The unplaced
// buffers with floor >= t must fit in [t, capacity) for every t; the
// thresholds that can newly fail are those up to `height`, and only where
// height + total exceeds the capacity. Two are checked: the lowest floor
// (all of them) and `height`.
bool PartSearch::sections_fit(int lo, int hi, uint64_t height) const {
  for (int s = lo; s < hi; ++s) {
    const size_t si = static_cast<size_t>(s);
    if (height + total_[si] > capacity_ && !section_fits(si, height)) return false;
  }
  return true;
}

// The unplaced buffers of section s are stacked above their lowest
// floor, and those whose floor reached `top` above `top`.
bool PartSearch::section_fits(size_t s, uint64_t top) const {
  uint64_t lowest = UINT64_MAX, above_top = 0;
  const int* list = &unplaced_member_[member_begin_[s]];
  for (size_t k = 0; k < member_count_[s]; ++k) {
    const size_t v = static_cast<size_t>(list[k]);
    lowest = std::min(lowest, floor_[v]);
    if (floor_[v] >= top) above_top += size_[v];
  }
  return lowest + total_[s] <= capacity_ && top + above_top <= capacity_;
}

// Takes u out of the unplaced sets at `offset` (no floors change).
void PartSearch::remove(Context& cx, int u, uint64_t offset, bool& split) {
  const size_t i = static_cast<size_t>(u);
  offset_[i] = offset;
  hash_ ^= floor_key(i, floor_[i]);
  const size_t p = position_[i];
  const int moved = cx.unplaced.back();
  cx.unplaced[p] = moved;
  position_[static_cast<size_t>(moved)] = p;
  cx.unplaced.pop_back();
  removed_.push_back({u, p});
  for (size_t k = overlap_begin_[i]; k < overlap_begin_[i + 1]; ++k) {
    const size_t v = static_cast<size_t>(overlap_[k]);
    if (offset_[v] == kUnplaced && --degree_[v] == 0) isolated_.push_back(static_cast<int>(v));
  }
  for (int s = first_[i]; s < last_[i]; ++s) {
    const size_t si = static_cast<size_t>(s);
    total_[si] -= size_[i];
    // Swap u behind the section's unplaced members; its own position
    // stays recorded for restore().
    int* list = &unplaced_member_[member_begin_[si]];
    const size_t j = member_position_[entry(i, s)];
    const size_t last = --member_count_[si];
    const int other = list[last];
    list[j] = other;
    list[last] = u;
    member_position_[entry(static_cast<size_t>(other), s)] = j;
  }
  for (int s = first_[i]; s + 1 < last_[i]; ++s) {
    if (--cut_[static_cast<size_t>(s)] == 0 && s >= cx.first_section && s + 1 < cx.last_section) split = true;
  }
}

void PartSearch::restore(Context& cx, int u, size_t p) {
  const size_t i = static_cast<size_t>(u);
  for (size_t k = overlap_begin_[i]; k < overlap_begin_[i + 1]; ++k) {
    const size_t v = static_cast<size_t>(overlap_[k]);
    if (offset_[v] == kUnplaced) ++degree_[v];
  }
  for (int s = first_[i]; s + 1 < last_[i]; ++s) ++cut_[static_cast<size_t>(s)];
  for (int s = last_[i] - 1; s >= first_[i]; --s) {
    const size_t si = static_cast<size_t>(s);
    total_[si] += size_[i];
    int* list = &unplaced_member_[member_begin_[si]];
    const size_t j = member_position_[entry(i, s)];
    const size_t last = member_count_[si]++;
    const int other = list[j];
    list[j] = u;
    list[last] = other;
    member_position_[entry(static_cast<size_t>(other), s)] = last;
  }
  if (p == cx.unplaced.size()) {
    cx.unplaced.push_back(u);
  } else {
    const int moved = cx.unplaced[p];
    cx.unplaced.push_back(moved);
    position_[static_cast<size_t>(moved)] = cx.unplaced.size() - 1;
    cx.unplaced[p] = u;
  }
  position_[i] = p;
  offset_[i] = kUnplaced;
  hash_ ^= floor_key(i, floor_[i]);
}

// Undoes everything since `mark`: the placement and the buffers placed
// with it, newest first.
void PartSearch::undo(Context& cx, const Mark& mark) {
  while (floor_log_.size() > mark.floors) {
    const size_t v = static_cast<size_t>(floor_log_.back().buffer);
    hash_ ^= floor_key(v, floor_[v]) ^ floor_key(v, floor_log_.back().floor);
    floor_[v] = floor_log_.back().floor;
    floor_log_.pop_back();
  }
  while (removed_.size() > mark.removed) {
    const Removed r = removed_.back();
    removed_.pop_back();
    restore(cx, r.buffer, r.position);
  }
}

}  // namespace kiln::planner::memory::search
