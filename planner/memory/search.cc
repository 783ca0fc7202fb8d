// Memory planning by search: solve() for kAuto and kSearch.
//
// The algorithm, per arena (a Problem). Each step is written out in full
// where it is implemented; this is the map.
//   1. Normalise (instance.h): sizes in units, time as sections (the sets of
//      buffers alive together), parts (section ranges no buffer crosses).
//      LB = the largest section total; no plan is smaller. Parts are
//      independent: the arena is the largest part's, and each part keeps
//      its own best plan.
//   2. Greedy by size (search_solve.cc): the best of three greedy plans is
//      the starting point, so the result is never worse than greedy.
//   3. Skyline dives per part, one per buffer order, until the part meets
//      the target (the largest proven lower bound of any part).
//   4. Probes on the part that sets the arena (search_solve.cc): searches
//      for a plan within a capacity C, in rounds that rotate the buffer
//      order and the branching. A plan found lowers the arena to its own
//      size; a search that exhausts its tree proves C infeasible and raises
//      that part's lower bound; one that runs out of nodes says nothing.
//      It stops at the lower bound, or when time or nodes run out.
//   5. Feasibility at C (search_part.h): depth-first branch and bound that
//      branches on canonical placements (search_canonical.cc) or on the
//      cells of the skyline (search_cells.cc), with bounds and forced
//      placements (search_place.cc), decomposition into independent groups
//      (search_decompose.cc) and transposition tables (search_tables.cc).
//   6. Skyline dive (search_dive.cc): place the buffer with the lowest
//      floor, again and again, without backtracking.
//   7. Parts too large to be searched whole (search_replan.cc): the top of
//      their plan is re-planned above a frozen bottom; up to a second size
//      limit they are also searched whole, in turns (search_solve.cc).
//   8. Parts larger still, with many twins (search_bundle.cc): the twins
//      are bundled into single buffers and that smaller problem is planned
//      by 1-7 first.
//
// Who calls whom, and where it lives:
//
//   solve()                                search.cc: its own thread and stack
//    +- solve_search(), Solver::solve()    search_solve.cc: steps 2-4
//        +- plan_bundled()                 search_bundle.cc: step 8,
//        |   +- solve_search(bundled)        steps 1-7 on the bundles
//        +- skyline_dive()                 search_dive.cc: steps 3 and 6
//        +- replan_top()                   search_replan.cc: step 7
//        +- PartSearch::run()              search_part.cc: step 5
//            +- dfs(), a node  <--------+  search_part.cc
//                +- expand()  ----------+  search_canonical.cc
//                +- expand_cell()  -----+  search_cells.cc
//                +- decompose()  -------+  search_decompose.cc
//            place(), undo(), bounds       search_place.cc
//            transposition tables          search_tables.cc
//
// One search thread, started by solve() with a stack of its own: the search
// recurses once per level (a placement or an empty cell), tens of thousands
// of levels deep on large parts. Deterministic for a given problem and
// options, unless the wall-clock limit stops the dives or the search.

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <exception>

#include "memory/instance.h"
#include "memory/problem.h"
#include "memory/search_internal.h"

namespace kiln::planner::memory {
namespace search {

// The search recurses once per level, about 200 bytes each: on large parts
// more than a default 8 MiB stack holds. solve() runs on a thread with a
// 1 GiB stack (address space: pages are committed only as the recursion
// touches them), and a search whose frames would reach below stack_floor
// gives up its probe instead of overflowing.
thread_local constinit const char* stack_floor = nullptr;

}  // namespace search

namespace {

using search::Clock;

constexpr size_t kSolveStack = size_t{1} << 30;
constexpr size_t kStackMargin = size_t{8} << 20;

struct SolveJob {
  const Problem* problem;
  const SolveOptions* options;
  Clock::time_point start;
  Solution result;
  std::exception_ptr error;
};

void run_job(SolveJob& job, const char* floor) {
  search::stack_floor = floor;
  try {
    job.result = search::solve_search(*job.problem, make_instance(*job.problem), *job.options, job.start);
  } catch (...) {
    job.error = std::current_exception();
  }
  search::stack_floor = nullptr;
}

extern "C" void* solve_thread(void* arg) {
  run_job(*static_cast<SolveJob*>(arg),
          static_cast<const char*>(__builtin_frame_address(0)) - (kSolveStack - kStackMargin));
  return nullptr;
}

}  // namespace

Solution solve(const Problem& problem, const SolveOptions& options) {
  SolveJob job{&problem, &options, Clock::now(), {}, nullptr};
  switch (options.algorithm) {
    case Algorithm::kNaive: return solve_naive(problem);
    case Algorithm::kGreedyFirstFit: return solve_greedy(problem, false);
    case Algorithm::kGreedyBestFit: return solve_greedy(problem, true);
    case Algorithm::kSearch:
    case Algorithm::kAuto: break;
  }
  pthread_attr_t attr;
  pthread_t thread;
  bool started = pthread_attr_init(&attr) == 0;
  if (started) {
    started =
        pthread_attr_setstacksize(&attr, kSolveStack) == 0 && pthread_create(&thread, &attr, solve_thread, &job) == 0;
    pthread_attr_destroy(&attr);
  }
  if (started) {
    pthread_join(thread, nullptr);
  } else {
    // No thread to be had (address space or thread limits): search on this
    // one, within half of what its stack limit allows.
    rlimit limit{};
    size_t room = size_t{8} << 20;
    if (getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) room = limit.rlim_cur;
    room = std::min(room, kSolveStack);
    run_job(job, static_cast<const char*>(__builtin_frame_address(0)) - room / 2);
  }
  if (job.error) std::rethrow_exception(job.error);
  return std::move(job.result);
}

}  // namespace kiln::planner::memory
