// kiln memplan: plans a bare interval set (CSV), apart from any model. This
// is how the memory planner is benchmarked against published solvers and
// other runtimes' plans.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "core/error.h"
#include "core/file_util.h"
#include "memory/interval_csv.h"
#include "memory/problem.h"
#include "report/json.h"

namespace kiln::planner::cli {
namespace {

constexpr const char* kHelp =
    "usage: kiln memplan INTERVALS.csv [options]\n"
    "\n"
    "Plans a bare interval set: one buffer per row 'id,begin,end,size' after a\n"
    "header row, lifetimes half-open [begin, end). Headers naming columns like\n"
    "'start_incl' or 'first_used,last_used' mean inclusive lifetimes. A fifth\n"
    "column 'offset' is someone else's plan: it is checked and reported too.\n"
    "Prints buffers, lower bound (LB), arena, ratio and solve time.\n"
    "\n"
    "options:\n"
    "  --algo NAME         auto (default), search, best-fit, first-fit, naive\n"
    "  --time-limit SEC    time budget of the search (default 10)\n"
    "  --node-limit N      search budget in nodes, reproducible on any machine (default: none)\n"
    "  --alignment BYTES   every offset a multiple of this (default 1)\n"
    "  --inclusive         read lifetimes as inclusive [first, last] whatever the header says\n"
    "  --half-open         read lifetimes as half-open [begin, end) whatever the header says\n"
    "  -o, --output FILE   write the plan as 'id,offset' rows\n"
    "  --json              print the figures as one JSON object instead\n";

double ratio(uint64_t a, uint64_t lb) { return lb ? static_cast<double>(a) / static_cast<double>(lb) : 1.0; }

}  // namespace

int cmd_memplan(const Argv& argv) {
  // clang-format off
  const Args args(argv, {{"--algo", true}, {"--time-limit", true}, {"--node-limit", true}, {"--alignment", true},
                         {"--inclusive", false}, {"--half-open", false}, {"-o", true}, {"--output", true},
                         {"--json", false}, {"--help", false}});
  // clang-format on
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (args.positional().size() != 1) throw UsageError{"expects one interval file"};
  if (args.has("--inclusive") && args.has("--half-open"))
    throw UsageError{"--inclusive and --half-open exclude each other"};
  const std::string path = args.positional()[0];
  const std::string output = args.has("-o") ? args.get("-o") : args.get("--output");
  memory::SolveOptions options;
  options.algorithm = memory::parse_algorithm(args.get("--algo", "auto"));
  options.time_limit_s = args.get_double("--time-limit", 10.0);
  if (options.time_limit_s < 0) throw UsageError{"--time-limit must not be negative"};
  const long node_limit = args.get_int("--node-limit", 0);
  if (node_limit < 0) throw UsageError{"--node-limit must not be negative"};
  options.node_limit = static_cast<uint64_t>(node_limit);
  const long alignment = args.get_int("--alignment", 1);
  if (alignment < 1 || alignment > 4096 || (alignment & (alignment - 1)) != 0) {
    throw UsageError{"--alignment must be a power of two from 1 to 4096"};
  }

  memory::IntervalFile file =
      memory::read_interval_csv(path, args.has("--inclusive")   ? memory::LifetimeConvention::kInclusive
                                      : args.has("--half-open") ? memory::LifetimeConvention::kHalfOpen
                                                                : memory::LifetimeConvention::kDetect);
  file.problem.alignment = static_cast<uint64_t>(alignment);
  const memory::Problem& problem = file.problem;

  const memory::LowerBound lb = memory::lower_bound(problem);
  const memory::Solution naive = memory::solve_naive(problem);
  SearchProgress progress(path);
  options.progress = progress.callback();
  const auto start = std::chrono::steady_clock::now();
  memory::Solution plan = memory::solve(problem, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.finish();
  const std::string problem_found = memory::check_solution(problem, plan);
  if (!problem_found.empty()) fail("internal error: the plan of ", path, " is invalid: ", problem_found);
  // Greedy figures: solve() reports them for auto/search; compute otherwise.
  uint64_t first_fit = plan.first_fit;
  if (first_fit == 0 && !problem.buffers.empty()) first_fit = memory::solve_greedy(problem, false).arena_size;

  // Someone else's plan from the file, checked before it is quoted.
  std::optional<uint64_t> file_arena;
  std::string file_problem;
  if (file.offsets) {
    memory::Solution theirs;
    theirs.offsets = *file.offsets;
    for (size_t i = 0; i < problem.buffers.size(); ++i) {
      theirs.arena_size = std::max(theirs.arena_size, theirs.offsets[i] + problem.buffers[i].size);
    }
    memory::Problem unaligned = problem;
    unaligned.alignment = 1;
    file_problem = memory::check_solution(unaligned, theirs);
    if (file_problem.empty()) file_arena = theirs.arena_size;
  }

  if (!output.empty()) write_file_atomic(output, memory::plan_csv(file, plan));

  if (args.has("--json")) {
    JsonWriter j;
    j.begin_object();
    j.field("file", path);
    j.field("buffers", static_cast<uint64_t>(problem.buffers.size()));
    j.field("inclusive", file.inclusive);
    j.field("alignment", problem.alignment);
    j.field("lower_bound", lb.bytes);
    j.field("peak_moment", lb.moment);
    j.field("naive", naive.arena_size);
    j.field("first_fit", first_fit);
    if (plan.best_fit != 0) j.field("best_fit", plan.best_fit);
    j.field("arena", plan.arena_size);
    j.field("ratio", ratio(plan.arena_size, lb.bytes));
    j.field("algorithm", plan.algorithm);
    j.field("optimal", plan.optimal);
    j.field("seconds", seconds);
    j.field("nodes", plan.nodes);
    j.field("parts", plan.parts);
    if (file.offsets) {
      j.key("file_plan");
      if (file_arena) {
        j.value(*file_arena);
      } else {
        j.null();
      }
    }
    j.end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  std::printf("kiln memplan: %s (%s lifetimes)%s%s\n", path.c_str(), file.inclusive ? "inclusive" : "half-open",
              output.empty() ? "" : " -> ", output.c_str());
  std::printf("  buffers:     %s\n", group_digits(problem.buffers.size()).c_str());
  std::printf("  lower bound: %s bytes (at moment %lld, %zu buffers alive)\n", group_digits(lb.bytes).c_str(),
              static_cast<long long>(lb.moment), lb.live.size());
  std::printf("  naive:       %s bytes (%.4f x LB)\n", group_digits(naive.arena_size).c_str(),
              ratio(naive.arena_size, lb.bytes));
  std::printf("  first fit:   %s bytes (%.4f x LB)\n", group_digits(first_fit).c_str(), ratio(first_fit, lb.bytes));
  if (plan.best_fit != 0) {
    std::printf("  best fit:    %s bytes (%.4f x LB)\n", group_digits(plan.best_fit).c_str(),
                ratio(plan.best_fit, lb.bytes));
  }
  if (file.offsets) {
    if (file_arena) {
      std::printf("  file's plan: %s bytes (%.4f x LB)\n", group_digits(*file_arena).c_str(),
                  ratio(*file_arena, lb.bytes));
    } else {
      std::printf("  file's plan: invalid (%s)\n", file_problem.c_str());
    }
  }
  std::printf("  kiln:        %s bytes (%.4f x LB), %s%s, %.3f s", group_digits(plan.arena_size).c_str(),
              ratio(plan.arena_size, lb.bytes), plan.algorithm.c_str(), plan.optimal ? ", optimal" : "", seconds);
  if (plan.nodes != 0) std::printf(", %s nodes", group_digits(plan.nodes).c_str());
  std::printf("\n");
  return 0;
}

}  // namespace kiln::planner::cli
