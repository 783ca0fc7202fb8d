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

// The search's options: the algorithm and its budgets.
memory::SolveOptions parse_solve_options(const Args& args) {
  memory::SolveOptions options;
  options.algorithm = memory::parse_algorithm(args.get("--algo", "auto"));
  options.time_limit_s = args.get_double("--time-limit", 10.0);
  if (options.time_limit_s < 0) throw UsageError{"--time-limit must not be negative"};
  const long node_limit = args.get_int("--node-limit", 0);
  if (node_limit < 0) throw UsageError{"--node-limit must not be negative"};
  options.node_limit = static_cast<uint64_t>(node_limit);
  return options;
}

// What kiln memplan reports of one interval file.
struct Figures {
  memory::LowerBound lb;
  memory::Solution naive, plan;
  double seconds = 0.0;
  uint64_t first_fit = 0;
  std::optional<uint64_t> file_arena;  // the file's own plan, where it has a valid one
  std::string file_problem;            // what is wrong with the file's own plan
};

// Someone else's plan from the file, checked before it is quoted.
void check_file_plan(const memory::IntervalFile& file, Figures& f) {
  const memory::Problem& problem = file.problem;
  memory::Solution theirs;
  theirs.offsets = *file.offsets;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    theirs.arena_size = std::max(theirs.arena_size, theirs.offsets[i] + problem.buffers[i].size);
  }
  memory::Problem unaligned = problem;
  unaligned.alignment = 1;
  f.file_problem = memory::check_solution(unaligned, theirs);
  if (f.file_problem.empty()) f.file_arena = theirs.arena_size;
}

void print_json(const std::string& path, const memory::IntervalFile& file, const Figures& f) {
  const memory::Problem& problem = file.problem;
  JsonWriter j;
  j.begin_object();
  j.field("file", path);
  j.field("buffers", static_cast<uint64_t>(problem.buffers.size()));
  j.field("inclusive", file.inclusive);
  j.field("alignment", problem.alignment);
  j.field("lower_bound", f.lb.bytes);
  j.field("peak_moment", f.lb.moment);
  j.field("naive", f.naive.arena_size);
  j.field("first_fit", f.first_fit);
  if (f.plan.best_fit != 0) j.field("best_fit", f.plan.best_fit);
  j.field("arena", f.plan.arena_size);
  j.field("ratio", ratio(f.plan.arena_size, f.lb.bytes));
  j.field("algorithm", f.plan.algorithm);
  j.field("optimal", f.plan.optimal);
  j.field("seconds", f.seconds);
  j.field("nodes", f.plan.nodes);
  j.field("parts", f.plan.parts);
  if (file.offsets) {
    j.key("file_plan");
    if (f.file_arena) {
      j.value(*f.file_arena);
    } else {
      j.null();
    }
  }
  j.end_object();
  std::printf("%s\n", j.str().c_str());
}

void print_text(const std::string& path, const std::string& output, const memory::IntervalFile& file,
                const Figures& f) {
  const memory::Problem& problem = file.problem;
  const memory::LowerBound& lb = f.lb;
  std::printf("kiln memplan: %s (%s lifetimes)%s%s\n", path.c_str(), file.inclusive ? "inclusive" : "half-open",
              output.empty() ? "" : " -> ", output.c_str());
  std::printf("  buffers:     %s\n", group_digits(problem.buffers.size()).c_str());
  std::printf("  lower bound: %s bytes (at moment %lld, %zu buffers alive)\n", group_digits(lb.bytes).c_str(),
              static_cast<long long>(lb.moment), lb.live.size());
  std::printf("  naive:       %s bytes (%.4f x LB)\n", group_digits(f.naive.arena_size).c_str(),
              ratio(f.naive.arena_size, lb.bytes));
  std::printf("  first fit:   %s bytes (%.4f x LB)\n", group_digits(f.first_fit).c_str(), ratio(f.first_fit, lb.bytes));
  if (f.plan.best_fit != 0) {
    std::printf("  best fit:    %s bytes (%.4f x LB)\n", group_digits(f.plan.best_fit).c_str(),
                ratio(f.plan.best_fit, lb.bytes));
  }
  if (file.offsets) {
    if (f.file_arena) {
      std::printf("  file's plan: %s bytes (%.4f x LB)\n", group_digits(*f.file_arena).c_str(),
                  ratio(*f.file_arena, lb.bytes));
    } else {
      std::printf("  file's plan: invalid (%s)\n", f.file_problem.c_str());
    }
  }
  std::printf("  kiln:        %s bytes (%.4f x LB), %s%s, %.3f s", group_digits(f.plan.arena_size).c_str(),
              ratio(f.plan.arena_size, lb.bytes), f.plan.algorithm.c_str(), f.plan.optimal ? ", optimal" : "",
              f.seconds);
  if (f.plan.nodes != 0) std::printf(", %s nodes", group_digits(f.plan.nodes).c_str());
  std::printf("\n");
}

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
  memory::SolveOptions options = parse_solve_options(args);
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

  Figures f;
  f.lb = memory::lower_bound(problem);
  f.naive = memory::solve_naive(problem);
  SearchProgress progress(path);
  options.progress = progress.callback();
  const auto start = std::chrono::steady_clock::now();
  f.plan = memory::solve(problem, options);
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.finish();
  const std::string problem_found = memory::check_solution(problem, f.plan);
  if (!problem_found.empty()) fail("internal error: the plan of ", path, " is invalid: ", problem_found);
  // Greedy figures: solve() reports them for auto/search; compute otherwise.
  f.first_fit = f.plan.first_fit;
  if (f.first_fit == 0 && !problem.buffers.empty()) f.first_fit = memory::solve_greedy(problem, false).arena_size;
  if (file.offsets) check_file_plan(file, f);

  if (!output.empty()) write_file_atomic(output, memory::plan_csv(file, f.plan));
  if (args.has("--json")) {
    print_json(path, file, f);
  } else {
    print_text(path, output, file, f);
  }
  return 0;
}

}  // namespace kiln::planner::cli
