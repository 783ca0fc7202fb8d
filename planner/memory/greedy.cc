// Naive and greedy-by-size planning.
//
// Greedy by size (the algorithm of TFLite Micro's GreedyMemoryPlanner and
// the TFLite GPU delegate):
//   1. Sort buffers by size, largest first (ties: earlier begin, then id).
//   2. For each buffer, collect the already placed buffers whose lifetimes
//      overlap it, sorted by offset.
//   3. Walk the gaps between them from address 0 upwards.
//      First fit: take the lowest gap that holds the buffer.
//      Best fit: take the smallest gap that holds it (lowest on ties); if
//      none does, place it above the highest overlapping buffer.

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "memory/problem.h"

namespace kiln::planner::memory {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

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
  for (Algorithm a : {Algorithm::kNaive, Algorithm::kGreedyFirstFit, Algorithm::kGreedyBestFit,
                      Algorithm::kSearch, Algorithm::kAuto}) {
    if (name == algorithm_name(a)) return a;
  }
  fail("unknown planning algorithm '", name, "' (use naive, first-fit, best-fit, search or auto)");
}

Solution solve_naive(const Problem& problem) {
  Solution s;
  s.algorithm = "naive";
  s.offsets.resize(problem.buffers.size());
  uint64_t next = 0;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    s.offsets[i] = next;
    next = align_up(next + problem.buffers[i].size, problem.alignment);
  }
  s.arena_size = next;
  return s;
}

Solution solve_greedy(const Problem& problem, bool best_fit) {
  const size_t n = problem.buffers.size();
  const uint64_t align = problem.alignment;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Buffer& x = problem.buffers[static_cast<size_t>(a)];
    const Buffer& y = problem.buffers[static_cast<size_t>(b)];
    if (x.size != y.size) return x.size > y.size;
    return x.begin < y.begin;
  });
  Solution s;
  s.algorithm = best_fit ? "best-fit" : "first-fit";
  s.offsets.assign(n, 0);
  std::vector<int> placed;
  placed.reserve(n);
  std::vector<std::pair<uint64_t, uint64_t>> busy;  // [offset, end) of overlapping placed
  for (int id : order) {
    const Buffer& b = problem.buffers[static_cast<size_t>(id)];
    busy.clear();
    for (int other : placed) {
      const Buffer& o = problem.buffers[static_cast<size_t>(other)];
      if (o.begin < b.end && b.begin < o.end && o.size > 0) {
        busy.emplace_back(s.offsets[static_cast<size_t>(other)], s.offsets[static_cast<size_t>(other)] + o.size);
      }
    }
    std::sort(busy.begin(), busy.end());
    uint64_t candidate = 0;
    uint64_t best_offset = UINT64_MAX, best_gap = UINT64_MAX;
    for (const auto& [start, stop] : busy) {
      if (start >= candidate && start - candidate >= b.size) {
        const uint64_t gap = start - candidate;
        if (!best_fit) {
          best_offset = candidate;
          break;
        }
        if (gap < best_gap) {
          best_gap = gap;
          best_offset = candidate;
        }
      }
      candidate = std::max(candidate, align_up(stop, align));
    }
    s.offsets[static_cast<size_t>(id)] = best_offset != UINT64_MAX ? best_offset : candidate;
    placed.push_back(id);
  }
  for (size_t i = 0; i < n; ++i) {
    s.arena_size = std::max(s.arena_size, s.offsets[i] + problem.buffers[i].size);
  }
  s.arena_size = align_up(s.arena_size, align);
  return s;
}

LowerBound lower_bound(const Problem& problem) {
  // Sweep the begin/end events in time order; ends before begins at the
  // same moment (half-open lifetimes).
  struct Event {
    int64_t time;
    int delta;  // -1 end, +1 begin
    int id;
  };
  std::vector<Event> events;
  events.reserve(problem.buffers.size() * 2);
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const Buffer& b = problem.buffers[i];
    if (b.size == 0 || b.begin >= b.end) continue;
    events.push_back({b.begin, +1, static_cast<int>(i)});
    events.push_back({b.end, -1, static_cast<int>(i)});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.time != b.time ? a.time < b.time : a.delta < b.delta;
  });
  LowerBound lb;
  uint64_t live = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    const uint64_t size = align_up(problem.buffers[static_cast<size_t>(e.id)].size, problem.alignment);
    live = e.delta > 0 ? live + size : live - size;
    const bool last_at_time = i + 1 == events.size() || events[i + 1].time != e.time;
    if (last_at_time && live > lb.bytes) {
      lb.bytes = live;
      lb.moment = e.time;
    }
  }
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const Buffer& b = problem.buffers[i];
    if (b.size > 0 && b.begin <= lb.moment && lb.moment < b.end) lb.live.push_back(static_cast<int>(i));
  }
  return lb;
}

std::string check_solution(const Problem& problem, const Solution& solution) {
  const size_t n = problem.buffers.size();
  if (solution.offsets.size() != n) return str("plan has ", solution.offsets.size(), " offsets for ", n, " buffers");
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return problem.buffers[static_cast<size_t>(a)].begin < problem.buffers[static_cast<size_t>(b)].begin;
  });
  for (size_t i = 0; i < n; ++i) {
    if (solution.offsets[i] % problem.alignment != 0) return str("buffer ", i, " offset is not aligned");
    if (solution.offsets[i] + problem.buffers[i].size > solution.arena_size) {
      return str("buffer ", i, " ends past the arena");
    }
  }
  // Sweep in begin order keeping the buffers still alive.
  std::vector<int> active;
  for (int id : order) {
    const Buffer& b = problem.buffers[static_cast<size_t>(id)];
    if (b.size == 0) continue;
    std::erase_if(active, [&](int other) { return problem.buffers[static_cast<size_t>(other)].end <= b.begin; });
    for (int other : active) {
      const Buffer& o = problem.buffers[static_cast<size_t>(other)];
      const uint64_t a0 = solution.offsets[static_cast<size_t>(id)], a1 = a0 + b.size;
      const uint64_t b0 = solution.offsets[static_cast<size_t>(other)], b1 = b0 + o.size;
      if (o.end > b.begin && a0 < b1 && b0 < a1) return str("buffers ", other, " and ", id, " overlap");
    }
    active.push_back(id);
  }
  return "";
}

Solution solve(const Problem& problem, const SolveOptions& options) {
  switch (options.algorithm) {
    case Algorithm::kNaive: return solve_naive(problem);
    case Algorithm::kGreedyFirstFit: return solve_greedy(problem, false);
    case Algorithm::kGreedyBestFit: return solve_greedy(problem, true);
    case Algorithm::kSearch:
    case Algorithm::kAuto: {
      Solution first = solve_greedy(problem, false);
      Solution best = solve_greedy(problem, true);
      Solution& pick = best.arena_size < first.arena_size ? best : first;
      pick.optimal = pick.arena_size == align_up(lower_bound(problem).bytes, problem.alignment);
      return pick;
    }
  }
  fail("unknown algorithm");
}

}  // namespace kiln::planner::memory
