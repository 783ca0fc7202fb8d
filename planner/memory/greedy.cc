// Naive and greedy-by-size planning, the lower bound, and the plan checker.
//
// Greedy by size (the algorithm of TFLite Micro's GreedyMemoryPlanner and
// the TFLite GPU delegate):
//   1. Sort buffers by size, largest first (ties: earlier begin, then index).
//   2. For each buffer, look at the already placed buffers whose lifetimes
//      overlap it, and the gaps between them from address 0 upwards.
//      First fit: take the lowest gap that holds the buffer.
//      Best fit: take the smallest gap that holds it (lowest on ties); if
//      none does, place it above the highest overlapping buffer.
//
// Step 2 does not list the overlapping buffers (a 62,000-buffer trace has
// 180 million overlapping pairs). An OccupancyTree answers "what occupies
// [lo, hi) anywhere in sections [a, b)?" instead:
//
//   segment tree over sections; a placed buffer's section range splits into
//   O(log S) covering nodes.
//     cover[v]: the buffers whose range covers v's sections (one of the
//               covering nodes). They are all alive at once, so their byte
//               ranges are disjoint: a sorted vector.
//     inner[v]: the union of byte ranges of every buffer whose covering
//               nodes lie in v's subtree, merged into disjoint intervals.
//   A query walks the tree: inner[] of nodes inside [a, b), cover[] of the
//   nodes on the way down. Each sorted vector answers with one binary search.
//
// First fit then jumps: at candidate offset o, if some interval found above
// intersects [o, o + size), no offset below its end can fit either (the same
// interval would still intersect), so o moves to the largest such end.

#include <algorithm>
#include <numeric>
#include <set>

#include "core/error.h"
#include "memory/instance.h"
#include "memory/problem.h"

namespace kiln::planner::memory {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

constexpr uint64_t kNone = UINT64_MAX;

class OccupancyTree {
 public:
  explicit OccupancyTree(int sections) : sections_(std::max(sections, 1)) {
    size_t nodes = 1;
    while (nodes < static_cast<size_t>(sections_)) nodes <<= 1;
    cover_.resize(2 * nodes);
    inner_.resize(2 * nodes);
  }

  // Lowest offset >= from where [offset, offset + size) is free in [a, b).
  uint64_t first_fit(int a, int b, uint64_t size, uint64_t from) const {
    uint64_t o = from;
    for (;;) {
      const uint64_t end = conflict_end(1, 0, sections_, a, b, o, o + size);
      if (end == 0) return o;
      o = end;
    }
  }

  // Smallest free gap in [a, b) that holds `size` (lowest of equal gaps);
  // above everything when no gap does.
  uint64_t best_fit(int a, int b, uint64_t size) const {
    uint64_t best = kNone, best_gap = kNone;
    uint64_t from = 0;
    for (;;) {
      const uint64_t p = first_fit(a, b, size, from);
      const uint64_t next = next_start(1, 0, sections_, a, b, p);
      if (next == kNone) return best != kNone ? best : p;
      if (next - p < best_gap) {
        best_gap = next - p;
        best = p;
        if (best_gap == size) return best;  // nothing tighter exists
      }
      from = next;
    }
  }

  void insert(int a, int b, uint64_t offset, uint64_t size) {
    insert(1, 0, sections_, a, b, Interval{offset, offset + size});
  }

 private:
  struct Interval {
    uint64_t start, end;
  };

  // The end of an interval of `v` intersecting [lo, hi), or 0 if none. The
  // last interval starting below hi has the largest end of those that do.
  static uint64_t probe(const std::vector<Interval>& v, uint64_t lo, uint64_t hi) {
    auto it = std::lower_bound(v.begin(), v.end(), hi, [](const Interval& x, uint64_t h) { return x.start < h; });
    if (it == v.begin()) return 0;
    --it;
    return it->end > lo ? it->end : 0;
  }

  static uint64_t first_start_after(const std::vector<Interval>& v, uint64_t p) {
    auto it = std::upper_bound(v.begin(), v.end(), p, [](uint64_t q, const Interval& x) { return q < x.start; });
    return it == v.end() ? kNone : it->start;
  }

  uint64_t conflict_end(size_t node, int nl, int nr, int a, int b, uint64_t lo, uint64_t hi) const {
    if (b <= nl || nr <= a) return 0;
    if (a <= nl && nr <= b) return probe(inner_[node], lo, hi);
    const int mid = (nl + nr) / 2;
    return std::max({probe(cover_[node], lo, hi), conflict_end(2 * node, nl, mid, a, b, lo, hi),
                     conflict_end(2 * node + 1, mid, nr, a, b, lo, hi)});
  }

  uint64_t next_start(size_t node, int nl, int nr, int a, int b, uint64_t p) const {
    if (b <= nl || nr <= a) return kNone;
    if (a <= nl && nr <= b) return first_start_after(inner_[node], p);
    const int mid = (nl + nr) / 2;
    return std::min({first_start_after(cover_[node], p), next_start(2 * node, nl, mid, a, b, p),
                     next_start(2 * node + 1, mid, nr, a, b, p)});
  }

  static void merge_into(std::vector<Interval>& v, Interval iv) {
    // Intervals touching or overlapping iv fold into it.
    auto lo = std::lower_bound(v.begin(), v.end(), iv.start, [](const Interval& x, uint64_t s) { return x.end < s; });
    auto hi = lo;
    while (hi != v.end() && hi->start <= iv.end) {
      iv.start = std::min(iv.start, hi->start);
      iv.end = std::max(iv.end, hi->end);
      ++hi;
    }
    if (lo == hi) {
      v.insert(lo, iv);
    } else {
      *lo = iv;
      v.erase(lo + 1, hi);
    }
  }

  void insert(size_t node, int nl, int nr, int a, int b, Interval iv) {
    if (b <= nl || nr <= a) return;
    merge_into(inner_[node], iv);
    if (a <= nl && nr <= b) {
      auto& c = cover_[node];
      c.insert(
          std::lower_bound(c.begin(), c.end(), iv.start, [](const Interval& x, uint64_t s) { return x.start < s; }),
          iv);
      return;
    }
    const int mid = (nl + nr) / 2;
    insert(2 * node, nl, mid, a, b, iv);
    insert(2 * node + 1, mid, nr, a, b, iv);
  }

  int sections_;
  std::vector<std::vector<Interval>> cover_;
  std::vector<std::vector<Interval>> inner_;
};

}  // namespace

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kNaive: return "naive";
    case Algorithm::kGreedyFirstFit: return "first-fit";
    case Algorithm::kGreedyBestFit: return "best-fit";
    case Algorithm::kSearch: return "search";
    case Algorithm::kAuto: return "auto";
  }
  return "?";
}

Algorithm parse_algorithm(const std::string& name) {
  for (Algorithm a : {Algorithm::kNaive, Algorithm::kGreedyFirstFit, Algorithm::kGreedyBestFit, Algorithm::kSearch,
                      Algorithm::kAuto}) {
    if (name == algorithm_name(a)) return a;
  }
  fail("unknown planning algorithm '", name, "' (use naive, first-fit, best-fit, search or auto)");
}

Solution solve_naive(const Problem& problem) {
  Solution s;
  s.algorithm = "naive";
  s.offsets.resize(problem.buffers.size());
  const uint64_t align = std::max<uint64_t>(1, problem.alignment);
  uint64_t next = 0;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    s.offsets[i] = next;
    next = align_up(next + problem.buffers[i].size, align);
  }
  s.arena_size = next;
  return s;
}

std::vector<uint64_t> first_fit_in_order(const Instance& in, const std::vector<int>& order) {
  std::vector<uint64_t> offsets(in.count(), 0);
  OccupancyTree tree(in.num_sections);
  for (int id : order) {
    const size_t i = static_cast<size_t>(id);
    offsets[i] = tree.first_fit(in.first[i], in.last[i], in.size[i], 0);
    tree.insert(in.first[i], in.last[i], offsets[i], in.size[i]);
  }
  return offsets;
}

std::vector<uint64_t> greedy_offsets(const Instance& in, bool best_fit) {
  const size_t n = in.count();
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Instance buffers keep Problem order: the index breaks the last tie.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const size_t x = static_cast<size_t>(a), y = static_cast<size_t>(b);
    if (in.bytes[x] != in.bytes[y]) return in.bytes[x] > in.bytes[y];
    return in.begin[x] < in.begin[y];
  });
  std::vector<uint64_t> offsets(n, 0);
  OccupancyTree tree(in.num_sections);
  for (int id : order) {
    const size_t i = static_cast<size_t>(id);
    const uint64_t o = best_fit ? tree.best_fit(in.first[i], in.last[i], in.size[i])
                                : tree.first_fit(in.first[i], in.last[i], in.size[i], 0);
    offsets[i] = o;
    tree.insert(in.first[i], in.last[i], o, in.size[i]);
  }
  return offsets;
}

Solution solve_greedy(const Problem& problem, bool best_fit) {
  const Instance in = make_instance(problem);
  return to_solution(problem, in, greedy_offsets(in, best_fit), best_fit ? "best-fit" : "first-fit");
}

LowerBound lower_bound(const Problem& problem) {
  const Instance in = make_instance(problem);
  LowerBound lb;
  int peak = -1;
  for (int s = 0; s < in.num_sections; ++s) {
    const uint64_t total = in.section_total[static_cast<size_t>(s)];
    if (peak < 0 || total > in.section_total[static_cast<size_t>(peak)]) peak = s;
  }
  if (peak < 0) return lb;
  lb.bytes = in.section_total[static_cast<size_t>(peak)] * in.unit;
  lb.moment = in.section_moment[static_cast<size_t>(peak)];
  for (size_t i = 0; i < in.count(); ++i) {
    if (in.first[i] <= peak && peak < in.last[i]) lb.live.push_back(in.original[i]);
  }
  std::sort(lb.live.begin(), lb.live.end());
  return lb;
}

std::string check_solution(const Problem& problem, const Solution& solution) {
  const size_t n = problem.buffers.size();
  if (solution.offsets.size() != n) return str("plan has ", solution.offsets.size(), " offsets for ", n, " buffers");
  const uint64_t align = std::max<uint64_t>(1, problem.alignment);
  for (size_t i = 0; i < n; ++i) {
    if (solution.offsets[i] % align != 0) return str("buffer ", i, " offset ", solution.offsets[i], " is not aligned");
    if (solution.offsets[i] + problem.buffers[i].size > solution.arena_size ||
        solution.offsets[i] + problem.buffers[i].size < solution.offsets[i]) {
      return str("buffer ", i, " ends past the arena");
    }
  }
  // Sweep time keeping the byte ranges alive in an ordered set. While the
  // plan is valid they are disjoint, so a newcomer can only collide with
  // its neighbours in address order.
  struct Event {
    int64_t time;
    int kind;  // 0 death, 1 birth
    int buffer;
  };
  std::vector<Event> events;
  for (size_t i = 0; i < n; ++i) {
    const Buffer& b = problem.buffers[i];
    if (b.size == 0) continue;
    events.push_back({b.begin, 1, static_cast<int>(i)});
    events.push_back({b.end > b.begin ? b.end : b.begin + 1, 0, static_cast<int>(i)});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.buffer < b.buffer;
  });
  std::set<std::pair<uint64_t, int>> alive;  // (offset, buffer)
  for (const Event& e : events) {
    const size_t b = static_cast<size_t>(e.buffer);
    const auto key = std::make_pair(solution.offsets[b], e.buffer);
    if (e.kind == 0) {
      alive.erase(key);
      continue;
    }
    auto it = alive.lower_bound(key);
    if (it != alive.end() && it->first < solution.offsets[b] + problem.buffers[b].size) {
      return str("buffers ", std::min(e.buffer, it->second), " and ", std::max(e.buffer, it->second), " overlap");
    }
    if (it != alive.begin()) {
      auto prev = std::prev(it);
      if (prev->first + problem.buffers[static_cast<size_t>(prev->second)].size > solution.offsets[b]) {
        return str("buffers ", std::min(e.buffer, prev->second), " and ", std::max(e.buffer, prev->second), " overlap");
      }
    }
    alive.insert(key);
  }
  return "";
}

}  // namespace kiln::planner::memory
