// solve_search(): the phases of the search on one instance (steps 2-4 of
// search.cc, and the turns of step 7), run in this order:
//   plan_greedy       the best greedy plan, the starting point;
//   start_parts       each part's plan, arena and lower bound from it;
//   plan_bundled      step 8, for parts too large to search (search_bundle.cc);
//   dive_parts        step 3: skyline dives on the parts above the target;
//   probe_arena_part  step 4: probes on the part that sets the arena, until
//                     it meets the target or time or nodes run out;
//   assemble          the parts' plans as one Solution.

#include <algorithm>
#include <memory>
#include <numeric>
#include <tuple>

#include "memory/search_internal.h"
#include "memory/search_part.h"

namespace kiln::planner::memory::search {

Solution solve_search(const Problem& problem, const Instance& in, const SolveOptions& options,
                      Clock::time_point start) {
  Solver solver(problem, in, options, start);
  return solver.solve();
}

Solver::Solver(const Problem& problem, const Instance& in, const SolveOptions& options, Clock::time_point start)
    : problem_(problem), in_(in), options_(options), start_(start) {}

Solver::~Solver() = default;

Solution Solver::solve() {
  plan_greedy();
  start_parts();
  plan_bundled();
  dive_parts();
  probe_arena_part();
  return assemble();
}

// Step 2. Greedy plans: first fit; best fit (its gap walk is slow on very
// large traces); and first fit with ties in size broken by longer lifetime
// first, which often packs long-lived buffers better. The best is the
// starting point, so the result is never worse than greedy.
void Solver::plan_greedy() {
  greedy_ = greedy_offsets(in_, false);
  ff_arena_ = arena_units(in_, greedy_);
  if (in_.count() <= kMaxBestFit) {
    std::vector<uint64_t> best_fit = greedy_offsets(in_, true);
    bf_arena_ = arena_units(in_, best_fit);
    if (bf_arena_ < ff_arena_) {
      greedy_ = std::move(best_fit);
      greedy_name_ = "best-fit";
    }
  }
  std::vector<int> order(in_.count());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const size_t x = static_cast<size_t>(a), y = static_cast<size_t>(b);
    if (in_.bytes[x] != in_.bytes[y]) return in_.bytes[x] > in_.bytes[y];
    return in_.width[x] > in_.width[y];
  });
  std::vector<uint64_t> long_first = first_fit_in_order(in_, order);
  if (arena_units(in_, long_first) < arena_units(in_, greedy_)) {
    greedy_ = std::move(long_first);
    greedy_name_ = "first-fit";
  }
}

// The budget, and each part's plan (greedy's), arena, lower bound and size.
void Solver::start_parts() {
  budget_.start = start_;
  budget_.last_report = start_;
  budget_.deadline = start_ + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(std::max(0.0, options_.time_limit_s)));
  budget_.node_limit = options_.node_limit;
  budget_.lower_bound_bytes = in_.lower_bound() * in_.unit;
  budget_.progress = &options_.progress;

  num_parts_ = in_.parts.size();
  parts_.resize(num_parts_);
  for (size_t p = 0; p < num_parts_; ++p) {
    const Instance::Part& part = in_.parts[p];
    parts_[p].lower = part.lower_bound;
    std::tie(parts_[p].pairs, parts_[p].memberships) = search_size(in_, whole(part));
    for (int b : part.buffers) {
      const uint64_t o = greedy_[static_cast<size_t>(b)];
      parts_[p].offsets.push_back(o);
      parts_[p].arena = std::max(parts_[p].arena, o + in_.size[static_cast<size_t>(b)]);
    }
  }
  budget_.best_bytes = arena() * in_.unit;
}

// Step 3: skyline dives, on the parts above the target, one per buffer
// order while the part stays above it. The first dive of each part runs
// whatever the time limit.
void Solver::dive_parts() {
  for (size_t p = 0; p < num_parts_; ++p) {
    for (int k = 0; k < kNumPreorders && parts_[p].arena > target(); ++k) {
      if (k > 0 && budget_.exhausted()) break;
      const int h = kDiveOrder[k];
      const std::vector<int> rank = make_rank(in_, in_.parts[p].buffers, kPreorders[h]);
      std::vector<uint64_t> dive =
          skyline_dive(in_, whole(in_.parts[p]), rank, k == 0 ? Clock::time_point::max() : budget_.deadline);
      if (!dive.empty()) accept(p, std::move(dive));
    }
  }
}

// Step 4: rounds of probes on the part that sets the arena, until it meets
// the target (the largest proven lower bound of any part) or the budget
// runs out. A part too large to be searched whole gets its top re-planned
// instead (step 7), or in turns with the whole search (take_turn).
void Solver::probe_arena_part() {
  while (!budget_.exhausted()) {
    size_t p = 0;
    for (size_t q = 1; q < num_parts_; ++q) {
      if (parts_[q].arena > parts_[p].arena) p = q;
    }
    const uint64_t goal = target();
    if (num_parts_ == 0 || parts_[p].arena <= goal) break;
    PartState& ps = parts_[p];
    if (!ps.sized) size_part(ps);
    const Turn turn = take_turn(p);
    if (turn == Turn::kStop) break;
    if (turn == Turn::kNext) continue;
    probe_round(p, goal);
  }
}

// On a part's first turn: whether it is too large to be searched whole
// (its top is re-planned, step 7), and if so whether it is searched whole
// later, in turns.
void Solver::size_part(PartState& ps) {
  ps.sized = true;
  if (ps.pairs > kMaxSearchPairs || ps.memberships > kMaxSearchMemberships) {
    ps.too_large = true;
    ps.search_later = ps.pairs <= kMaxLateSearchPairs && ps.memberships <= kMaxSearchMemberships;
    ps.replanning = true;
    ps.phase_until = window(2);
  }
}

// Large parts. Too large to be searched whole: re-plan the top while that
// improves the plan. Searched whole later: turns of re-planning the top
// while it improves the plan or for half of the time left, then the whole
// search (kProbe) for a quarter of the time left, and again.
Solver::Turn Solver::take_turn(size_t p) {
  PartState& ps = parts_[p];
  if (ps.too_large && !ps.search_later) {
    if (replan_top(p, ps.replan_rounds++, budget_.deadline)) return Turn::kNext;
    return Turn::kStop;
  }
  if (!ps.search_later) return Turn::kProbe;
  if (ps.replanning) {
    if (replan_top(p, ps.replan_rounds++, ps.phase_until)) {
      ps.phase_until = window(2);
      return Turn::kNext;
    }
    if (budget_.exhausted()) return Turn::kStop;
    ps.replanning = false;
    ps.phase_until = window(4);
  } else if (Clock::now() >= ps.phase_until) {
    ps.replanning = true;
    ps.phase_until = window(2);
    return Turn::kNext;
  }
  return Turn::kProbe;
}

// One round of probes on part p. Round k of a kind uses buffer order k and
// branching k (cycling). Parts of usual size alternate two kinds of round:
//   - even rounds ("full"): the goal with the round's node budget; if that
//     search runs out of nodes, bisection between the highest capacity
//     that failed and the arena, with a quarter of it. The budgets double
//     after every branching had one;
//   - odd rounds (restarts): the goal alone, with a small fixed budget and
//     the children of the first two levels in a seeded random order
//     (searches at a tight capacity are heavy-tailed: many short tries
//     often beat one long one).
// Parts searched whole in turns (step 7) have rounds of their own.
void Solver::probe_round(size_t p, uint64_t goal) {
  PartState& ps = parts_[p];
  if (!ps.search) {
    ps.search = std::make_unique<PartSearch>(in_, whole(in_.parts[p]));
    for (int h = 0; h < kNumPreorders; ++h) ps.ranks.push_back(make_rank(in_, in_.parts[p].buffers, kPreorders[h]));
  }
  const int round = ps.rounds++;
  const uint64_t descent = 2 * in_.parts[p].buffers.size();
  if (ps.search_later) {
    probe_large_round(p, goal, round);
    return;
  }
  if (round % 2 == 1) {
    probe(p, goal, std::max(kRestartBudget, descent), round / 2, static_cast<uint64_t>(round));
    return;
  }
  probe_full_round(p, goal, round / 2);
}

void Solver::probe_full_round(size_t p, uint64_t goal, int full) {
  PartState& ps = parts_[p];
  const uint64_t descent = 2 * in_.parts[p].buffers.size();
  const uint64_t nodes = std::max(kFirstBudget, descent) << std::min(full / kNumBranchings, 30);
  const Outcome r = probe(p, goal, nodes, full);
  if (r != Outcome::kGaveUp) return;
  uint64_t failed = goal;
  while (ps.arena > failed + 1 && !budget_.exhausted()) {
    const uint64_t c = failed + (ps.arena - failed) / 2;
    if (probe(p, c, std::max(kFirstBudget, nodes / 4), full) != Outcome::kFound) failed = c;
  }
}

// Large parts (step 7): a probe is one or two descents, seconds each on
// such parts, so bisection with a quarter of the nodes would be spent near
// the arena, and rounds only differ in order and branching. Each probes the
// goal, then climbs a ladder: halfway between the highest capacity that
// failed and the arena (the plan found tends to lie just below the
// capacity), repeated while it finds plans. A failure moves the next
// round's rung up, to within 1/64 of the arena, then back to the goal.
void Solver::probe_large_round(size_t p, uint64_t goal, int round) {
  PartState& ps = parts_[p];
  const uint64_t descent = 2 * in_.parts[p].buffers.size();
  const uint64_t nodes = descent << std::min(round / kNumLargeCombos, 30);
  if (probe(p, goal, nodes, round) != Outcome::kGaveUp) return;
  if (ps.failed < goal || ps.failed + 1 >= ps.arena || (ps.arena - ps.failed) * 64 < ps.arena - goal) {
    ps.failed = goal;
  }
  while (ps.arena > ps.failed + 1 && !budget_.exhausted()) {
    const uint64_t c = ps.failed + (ps.arena - ps.failed) / 2;
    if (probe(p, c, nodes, round) != Outcome::kFound) {
      ps.failed = c;
      break;
    }
  }
}

// A search of part p at `capacity` with buffer order and branching k. A
// plan found lowers the arena to its own size; a search that exhausts its
// tree proves the capacity infeasible and raises the part's lower bound;
// one that runs out of nodes says nothing.
Outcome Solver::probe(size_t p, uint64_t capacity, uint64_t nodes, int k, uint64_t shuffle) {
  PartState& ps = parts_[p];
  std::vector<uint64_t> found;
  const Branching branching = branching_of(k);
  switch (ps.search->run(capacity, ps.ranks[static_cast<size_t>(k % kNumPreorders)], branching, nodes, budget_, found,
                         shuffle)) {
    case Outcome::kFound: accept(p, std::move(found)); return Outcome::kFound;
    case Outcome::kInfeasible: ps.lower = std::max(ps.lower, capacity + 1); return Outcome::kInfeasible;
    case Outcome::kGaveUp: break;
  }
  return Outcome::kGaveUp;
}

Branching Solver::branching_of(int k) const {
  const int only = options_.branching;
  return static_cast<Branching>(only >= 0 && only < kNumBranchings ? only : k % kNumBranchings);
}

// A share of the time left, from now.
Clock::time_point Solver::window(int share) const { return Clock::now() + (budget_.deadline - Clock::now()) / share; }

uint64_t Solver::arena() const {
  uint64_t a = 0;
  for (const PartState& ps : parts_) a = std::max(a, ps.arena);
  return a;
}

uint64_t Solver::target() const {
  uint64_t t = 0;
  for (const PartState& ps : parts_) t = std::max(t, ps.lower);
  return t;
}

// Keeps `local` (part p's offsets, part-local order) when it lowers the
// part's arena.
void Solver::accept(size_t p, std::vector<uint64_t> local) {
  uint64_t top = 0;
  for (size_t i = 0; i < local.size(); ++i) {
    top = std::max(top, local[i] + in_.size[static_cast<size_t>(in_.parts[p].buffers[i])]);
  }
  if (top < parts_[p].arena) {
    parts_[p].arena = top;
    parts_[p].offsets = std::move(local);
    parts_[p].searched = true;
    budget_.best_bytes = arena() * in_.unit;
  }
}

Solution Solver::assemble() const {
  std::vector<uint64_t> result(in_.count(), 0);
  bool searched = false;
  const uint64_t final_arena = arena();
  for (size_t p = 0; p < num_parts_; ++p) {
    for (size_t i = 0; i < in_.parts[p].buffers.size(); ++i) {
      result[static_cast<size_t>(in_.parts[p].buffers[i])] = parts_[p].offsets[i];
    }
    if (parts_[p].searched && parts_[p].arena == final_arena) searched = true;
  }
  Solution s = to_solution(problem_, in_, result, searched ? "search" : greedy_name_);
  s.optimal = final_arena <= target();
  s.lower_bound = in_.lower_bound() * in_.unit;
  s.first_fit = ff_arena_ * in_.unit;
  s.best_fit = bf_arena_ * in_.unit;
  s.nodes = budget_.nodes;
  s.parts = static_cast<int>(num_parts_);
  s.seconds = seconds_since(start_);
  return s;
}

}  // namespace kiln::planner::memory::search
