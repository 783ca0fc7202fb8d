// Buffer orders and the skyline dive (steps 3 and 6 of search.cc).
//
// Skyline dive: repeatedly place the unplaced buffer with the lowest floor
// (the highest end of the placed buffers it overlaps in time; ties by
// rank), without backtracking. It is the first descent of the canonical
// search (search_canonical.cc), run on its own: fast enough for the largest
// parts, and one dive per buffer order often meets the bound at once.
// Floors come from the skyline (a FloorTree over sections); a heap keyed by
// possibly stale floors holds the candidates (a popped entry whose floor
// rose goes back in line).

#include <algorithm>
#include <numeric>
#include <queue>

#include "memory/search_internal.h"

namespace kiln::planner::memory::search {

std::vector<int> make_rank(const Instance& in, const std::vector<int>& buffers, const char* keys) {
  const size_t m = buffers.size();
  std::vector<uint64_t> total(m, 0);
  for (size_t i = 0; i < m; ++i) {
    const size_t b = static_cast<size_t>(buffers[i]);
    for (int s = in.first[b]; s < in.last[b]; ++s)
      total[i] = std::max(total[i], in.section_total[static_cast<size_t>(s)]);
  }
  std::vector<int> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    const size_t a = static_cast<size_t>(buffers[static_cast<size_t>(x)]);
    const size_t b = static_cast<size_t>(buffers[static_cast<size_t>(y)]);
    for (const char* k = keys; *k != 0; ++k) {
      switch (*k) {
        case 'T':
          if (total[static_cast<size_t>(x)] != total[static_cast<size_t>(y)]) {
            return total[static_cast<size_t>(x)] > total[static_cast<size_t>(y)];
          }
          break;
        case 'W':
          if (in.width[a] != in.width[b]) return in.width[a] > in.width[b];
          break;
        case 'A': {
          const __int128 aa = static_cast<__int128>(in.size[a]) * in.width[a];
          const __int128 ab = static_cast<__int128>(in.size[b]) * in.width[b];
          if (aa != ab) return aa > ab;
          break;
        }
        case 'Z':
          if (in.size[a] != in.size[b]) return in.size[a] > in.size[b];
          break;
        default: break;
      }
    }
    return x < y;
  });
  std::vector<int> rank(m);
  for (size_t r = 0; r < m; ++r) rank[static_cast<size_t>(order[r])] = static_cast<int>(r);
  return rank;
}

std::vector<uint64_t> skyline_dive(const Instance& in, const Subset& part, const std::vector<int>& rank,
                                   Clock::time_point deadline) {
  const size_t m = part.buffers.size();
  const int base = part.first_section;
  FloorTree floors(part.last_section - part.first_section);
  auto floor_of = [&](size_t local, size_t b) {
    const uint64_t f = floors.max(in.first[b] - base, in.last[b] - base);
    return part.floors.empty() ? f : std::max(f, part.floors[local]);
  };
  struct Entry {
    uint64_t floor;
    int rank;
    int local;
    bool operator>(const Entry& o) const { return floor != o.floor ? floor > o.floor : rank > o.rank; }
  };
  std::vector<Entry> storage;
  storage.reserve(m);
  for (size_t i = 0; i < m; ++i) {
    storage.push_back({part.floors.empty() ? 0 : part.floors[i], rank[i], static_cast<int>(i)});
  }
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap(std::greater<Entry>(), std::move(storage));
  std::vector<uint64_t> offsets(m, 0);
  for (uint64_t pops = 1; !heap.empty(); ++pops) {
    if ((pops & 0xffff) == 0 && Clock::now() >= deadline) return {};
    Entry e = heap.top();
    heap.pop();
    const size_t b = static_cast<size_t>(part.buffers[static_cast<size_t>(e.local)]);
    const uint64_t floor = floor_of(static_cast<size_t>(e.local), b);
    // Stale: its floor rose since it was pushed. Unless it still comes
    // first with its true floor, it goes back in line.
    if (floor != e.floor && !heap.empty() && Entry{floor, e.rank, e.local} > heap.top()) {
      e.floor = floor;
      heap.push(e);
      continue;
    }
    offsets[static_cast<size_t>(e.local)] = floor;
    floors.raise(in.first[b] - base, in.last[b] - base, floor + in.size[b]);
  }
  return offsets;
}

}  // namespace kiln::planner::memory::search
