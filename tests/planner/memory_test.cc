// The memory planner: every algorithm gives valid plans no smaller than the
// lower bound; greedy first fit matches the textbook quadratic algorithm;
// the search finds known optima and is deterministic; the lower bound names
// its peak; interval CSVs parse in both lifetime conventions; and the
// independent verifier catches planted overlaps and out-of-arena offsets.

#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "core/error.h"
#include "memory/interval_csv.h"
#include "memory/problem.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"
#include "verify/verifier.h"

namespace kiln::testing {
namespace {

using planner::memory::Algorithm;
using planner::memory::Buffer;
using planner::memory::Problem;
using planner::memory::Solution;
using planner::memory::SolveOptions;

Problem make_problem(std::vector<Buffer> buffers, uint64_t alignment = 1) {
  Problem p;
  p.buffers = std::move(buffers);
  p.alignment = alignment;
  return p;
}

Solution solve(const Problem& p, Algorithm algorithm, double time_limit_s = 5.0) {
  SolveOptions options;
  options.algorithm = algorithm;
  options.time_limit_s = time_limit_s;
  return planner::memory::solve(p, options);
}

constexpr Algorithm kAll[] = {Algorithm::kNaive, Algorithm::kGreedyFirstFit, Algorithm::kGreedyBestFit,
                              Algorithm::kSearch, Algorithm::kAuto};

// Random interval sets: `n` buffers over `horizon` moments, sizes up to
// `max_size`.
Problem random_problem(std::mt19937& rng, int n, int horizon, uint64_t max_size, uint64_t alignment) {
  std::uniform_int_distribution<int> start(0, horizon - 1);
  std::uniform_int_distribution<int> length(1, std::max(1, horizon / 3));
  std::uniform_int_distribution<uint64_t> size(1, max_size);
  Problem p;
  p.alignment = alignment;
  for (int i = 0; i < n; ++i) {
    const int b = start(rng);
    p.buffers.push_back({b, b + length(rng), size(rng)});
  }
  return p;
}

// Greedy by size, first fit, as TFLite Micro writes it: for each buffer
// (largest first, ties by earlier begin, then index), list the placed
// buffers alive at the same time, sort them by offset, and take the lowest
// gap that holds it.
uint64_t textbook_first_fit(const Problem& p, std::vector<uint64_t>& offsets) {
  const uint64_t align = p.alignment;
  auto up = [&](uint64_t v) { return (v + align - 1) / align * align; };
  std::vector<int> order(p.buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Buffer& x = p.buffers[static_cast<size_t>(a)];
    const Buffer& y = p.buffers[static_cast<size_t>(b)];
    if (x.size != y.size) return x.size > y.size;
    return x.begin < y.begin;
  });
  offsets.assign(p.buffers.size(), 0);
  std::vector<int> placed;
  uint64_t arena = 0;
  for (int id : order) {
    const Buffer& b = p.buffers[static_cast<size_t>(id)];
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (int o : placed) {
      const Buffer& q = p.buffers[static_cast<size_t>(o)];
      if (q.begin < b.end && b.begin < q.end)
        busy.emplace_back(offsets[static_cast<size_t>(o)], offsets[static_cast<size_t>(o)] + q.size);
    }
    std::sort(busy.begin(), busy.end());
    uint64_t candidate = 0;
    for (const auto& [start, stop] : busy) {
      if (start >= candidate && start - candidate >= b.size) break;
      candidate = std::max(candidate, up(stop));
    }
    offsets[static_cast<size_t>(id)] = candidate;
    placed.push_back(id);
    arena = std::max(arena, up(candidate + b.size));
  }
  return arena;
}

TEST(MemoryPlanTest, EveryAlgorithmGivesValidPlansOnKnownCases) {
  // A chain of overlapping buffers: A [0,2) 2, B [1,3) 1, C [2,5) 2,
  // D [3,6) 1; three bytes suffice, no reuse needs six.
  const Problem chain = make_problem({{0, 2, 2}, {1, 3, 1}, {2, 5, 2}, {3, 6, 1}});
  for (Algorithm a : kAll) {
    const Solution s = solve(chain, a);
    EXPECT_EQ(planner::memory::check_solution(chain, s), "") << planner::memory::algorithm_name(a);
    EXPECT_GE(s.arena_size, planner::memory::lower_bound(chain).bytes);
  }
  EXPECT_EQ(planner::memory::lower_bound(chain).bytes, 3u);
  EXPECT_EQ(solve(chain, Algorithm::kNaive).arena_size, 6u);
  EXPECT_EQ(solve(chain, Algorithm::kAuto).arena_size, 3u);
  EXPECT_TRUE(solve(chain, Algorithm::kAuto).optimal);
}

TEST(MemoryPlanTest, SearchBeatsGreedyWhereGreedyIsKnownToLose) {
  // The inclusive `simple` case of the TVM USMP tests: largest-first packs
  // 220,192 bytes; the lower bound 216,096 is reachable.
  const Problem p = make_problem({{0, 24, 131072},
                                  {4, 6, 65568},
                                  {4, 10, 8192},
                                  {8, 31, 15360},
                                  {10, 12, 65568},
                                  {10, 16, 4096},
                                  {16, 18, 65552},
                                  {16, 22, 2048},
                                  {22, 24, 32784},
                                  {22, 28, 1024}},
                                 16);
  const Solution greedy = solve(p, Algorithm::kGreedyFirstFit);
  const Solution best = solve(p, Algorithm::kAuto);
  EXPECT_EQ(planner::memory::check_solution(p, best), "");
  EXPECT_EQ(planner::memory::lower_bound(p).bytes, 216096u);
  EXPECT_EQ(best.arena_size, 216096u);
  EXPECT_GT(greedy.arena_size, best.arena_size);
  EXPECT_TRUE(best.optimal);
}

TEST(MemoryPlanTest, PerfectPackingsAreFound) {
  // A 12-unit-tall strip cut into pieces; the search must rebuild it.
  // Time 0-6 columns: {0:[0,3) 5, 1:[0,2) 7, 2:[2,6) 4, 3:[3,6) 5, 4:[2,4) 3,
  // 5:[4,6) 3} -> peak 12 at every moment.
  const Problem p = make_problem({{0, 3, 5}, {0, 2, 7}, {2, 6, 4}, {3, 6, 5}, {2, 3, 3}, {3, 4, 3}, {4, 6, 3}}, 1);
  const Solution s = solve(p, Algorithm::kSearch);
  EXPECT_EQ(planner::memory::check_solution(p, s), "");
  EXPECT_EQ(s.arena_size, planner::memory::lower_bound(p).bytes);
}

// A strip `height` tall and `length` long cut by random straight cuts into
// `pieces` rectangles, each a buffer (its time span, its height): a perfect
// packing, so the lower bound (`height`) is reachable.
Problem sliced_strip(std::mt19937& rng, size_t pieces, int64_t length, uint64_t height) {
  struct Piece {
    int64_t t0, t1;
    uint64_t o0, o1;
  };
  std::vector<Piece> cut = {{0, length, 0, height}};
  while (cut.size() < pieces) {
    Piece& p = cut[std::uniform_int_distribution<size_t>(0, cut.size() - 1)(rng)];
    if (std::uniform_int_distribution<int>(0, 1)(rng) == 0 && p.t1 - p.t0 > 1) {
      const int64_t t = std::uniform_int_distribution<int64_t>(p.t0 + 1, p.t1 - 1)(rng);
      Piece right = p;
      right.t0 = t;
      p.t1 = t;
      cut.push_back(right);
    } else if (p.o1 - p.o0 > 1) {
      const uint64_t o = std::uniform_int_distribution<uint64_t>(p.o0 + 1, p.o1 - 1)(rng);
      Piece top = p;
      top.o0 = o;
      p.o1 = o;
      cut.push_back(top);
    }
  }
  Problem problem;
  for (const Piece& p : cut) problem.buffers.push_back({p.t0, p.t1, p.o1 - p.o0});
  return problem;
}

TEST(MemoryPlanTest, SlicedStripsAreRebuiltAtTheBound) {
  // Greedy first fit packs these 10-25% above the bound. A node budget
  // (not time) keeps the test independent of the machine.
  std::mt19937 rng(2026);
  for (int round = 0; round < 6; ++round) {
    const Problem p = sliced_strip(rng, 300, 1000, 1000);
    ASSERT_EQ(planner::memory::lower_bound(p).bytes, 1000u);
    SolveOptions options;
    options.time_limit_s = 120;
    options.node_limit = 3'000'000;
    const Solution s = planner::memory::solve(p, options);
    EXPECT_EQ(planner::memory::check_solution(p, s), "") << "round " << round;
    EXPECT_EQ(s.arena_size, 1000u) << "round " << round << ", first fit " << s.first_fit << ", " << s.nodes << " nodes";
  }
}

TEST(MemoryPlanTest, EveryBranchingRebuildsSlicedStrips) {
  // Each branching rule on its own must find a plan no taller than the
  // strip (a perfect packing has few plans: a pruning rule that cut off
  // plans would show as a taller one), and where two rules prove their plan
  // optimal they must agree.
  std::mt19937 rng(4242);
  for (int round = 0; round < 16; ++round) {
    Problem p = sliced_strip(rng, 24 + static_cast<size_t>(round) * 2, 60, 60);
    if (round % 2 == 1) {
      for (size_t i = p.buffers.size(); i-- > 0;) {
        if (std::uniform_int_distribution<int>(0, 5)(rng) == 0)
          p.buffers.erase(p.buffers.begin() + static_cast<long>(i));
      }
    }
    uint64_t proven = 0;
    for (int branching = 0; branching < 4; ++branching) {
      SolveOptions options;
      options.algorithm = Algorithm::kSearch;
      options.time_limit_s = 120;
      options.node_limit = 2'000'000;
      options.branching = branching;
      const Solution s = planner::memory::solve(p, options);
      ASSERT_EQ(planner::memory::check_solution(p, s), "") << "round " << round << " branching " << branching;
      EXPECT_LE(s.arena_size, 60u) << "round " << round << " branching " << branching;
      if (!s.optimal) continue;
      if (proven == 0) proven = s.arena_size;
      EXPECT_EQ(s.arena_size, proven) << "round " << round << " branching " << branching;
    }
    EXPECT_NE(proven, 0u) << "round " << round;
  }
}

TEST(MemoryPlanTest, SearchesDeeperThanTheCallersStack) {
  // The search recurses once per level; a 4,000-piece strip goes thousands
  // of levels deep, more than the 64 KiB stack of the thread calling
  // solve() holds. solve() searches on a thread with a stack of its own.
  std::mt19937 rng(7);
  const Problem p = sliced_strip(rng, 4000, 4000, 4000);
  struct Call {
    const Problem* problem;
    Solution result;
  } call{&p, {}};
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, size_t{64} << 10), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void* arg) -> void* {
                  Call& c = *static_cast<Call*>(arg);
                  SolveOptions options;
                  options.algorithm = Algorithm::kSearch;
                  options.time_limit_s = 120;
                  options.node_limit = 50'000;
                  c.result = planner::memory::solve(*c.problem, options);
                  return nullptr;
                },
                &call),
            0);
  pthread_attr_destroy(&attr);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  EXPECT_EQ(planner::memory::check_solution(p, call.result), "");
  EXPECT_GT(call.result.nodes, 8'000u);  // went past one descent
  EXPECT_LE(call.result.arena_size, call.result.first_fit);
}

TEST(MemoryPlanTest, TwinsAreBundledWhereAPartIsTooLargeToSearch) {
  // 6,000 buffers alive over the whole strip (twins: the same lifetime)
  // under a 300-piece sliced strip: 19 million overlapping pairs, more than
  // the search takes in; bundled, the twins are one buffer and the part is
  // a strip on a plinth, rebuilt at the bound. Sizes and alignment make
  // the bundle's members land at different, aligned offsets.
  std::mt19937 rng(11);
  Problem p = sliced_strip(rng, 200, 1000, 1000);
  for (Buffer& b : p.buffers) b.size *= 16;
  for (int i = 0; i < 6000; ++i) p.buffers.push_back({0, 1000, 1 + static_cast<uint64_t>(i % 3) * 7});
  p.alignment = 16;
  const uint64_t bound = planner::memory::lower_bound(p).bytes;
  SolveOptions options;
  options.time_limit_s = 120;
  options.node_limit = 3'000'000;
  const Solution s = planner::memory::solve(p, options);
  EXPECT_EQ(planner::memory::check_solution(p, s), "");
  EXPECT_EQ(s.arena_size, bound) << "first fit " << s.first_fit << ", " << s.nodes << " nodes";
  EXPECT_LT(s.arena_size, s.first_fit);
}

TEST(MemoryPlanTest, AlignmentIsHonoured) {
  const Problem p = make_problem({{0, 2, 100}, {1, 3, 30}, {2, 4, 64}, {0, 4, 1}}, 64);
  for (Algorithm a : kAll) {
    const Solution s = solve(p, a);
    EXPECT_EQ(planner::memory::check_solution(p, s), "") << planner::memory::algorithm_name(a);
    for (uint64_t o : s.offsets) EXPECT_EQ(o % 64, 0u);
    EXPECT_EQ(s.arena_size % 64, 0u);
  }
  // Sizes round up to the alignment in the bound as in the plans.
  EXPECT_EQ(planner::memory::lower_bound(p).bytes, 128u + 64u + 64u);
}

TEST(MemoryPlanTest, FastFirstFitMatchesTheTextbookAlgorithm) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const uint64_t alignment = round % 3 == 0 ? 16 : 1;
    const Problem p = random_problem(rng, 1 + round % 60, 40, round % 2 ? 100 : 7, alignment);
    std::vector<uint64_t> expected;
    const uint64_t arena = textbook_first_fit(p, expected);
    const Solution s = planner::memory::solve_greedy(p, false);
    ASSERT_EQ(s.offsets, expected) << "round " << round;
    ASSERT_EQ(s.arena_size, arena) << "round " << round;
  }
}

TEST(MemoryPlanTest, RandomIntervalSetsAlwaysGiveValidPlansAboveTheBound) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 120; ++round) {
    const uint64_t alignment = uint64_t{1} << (round % 4);
    const Problem p = random_problem(rng, 1 + round % 45, 10 + round % 30, 1 + round % 97, alignment);
    const uint64_t lb = planner::memory::lower_bound(p).bytes;
    const uint64_t first_fit = solve(p, Algorithm::kGreedyFirstFit).arena_size;
    for (Algorithm a : kAll) {
      const Solution s = solve(p, a, 0.2);
      ASSERT_EQ(planner::memory::check_solution(p, s), "") << "round " << round << " " << algorithm_name(a);
      ASSERT_GE(s.arena_size, lb) << "round " << round;
      if (a == Algorithm::kAuto || a == Algorithm::kSearch) {
        ASSERT_LE(s.arena_size, first_fit) << "round " << round;
        if (s.optimal) {
          ASSERT_EQ(s.arena_size, (lb + alignment - 1) / alignment * alignment);
        }
      }
    }
  }
}

TEST(MemoryPlanTest, SameInputSamePlan) {
  std::mt19937 rng(99);
  for (int round = 0; round < 10; ++round) {
    const Problem p = random_problem(rng, 80, 60, 50, 1);
    SolveOptions options;
    options.time_limit_s = 60;
    options.node_limit = 20000;  // a budget that does not depend on the machine
    const Solution a = planner::memory::solve(p, options);
    const Solution b = planner::memory::solve(p, options);
    EXPECT_EQ(a.offsets, b.offsets);
    EXPECT_EQ(a.arena_size, b.arena_size);
    EXPECT_EQ(a.nodes, b.nodes);
  }
}

TEST(MemoryPlanTest, IndependentPiecesArePlannedApart) {
  // Nothing is alive across moment 10: the two halves are separate parts,
  // and the arena is the larger half's optimum.
  const Problem p = make_problem({{0, 5, 4}, {3, 10, 4}, {0, 10, 2}, {10, 15, 7}, {12, 20, 1}, {10, 20, 1}});
  const Solution s = solve(p, Algorithm::kAuto);
  EXPECT_EQ(planner::memory::check_solution(p, s), "");
  EXPECT_EQ(s.parts, 2);
  EXPECT_EQ(s.arena_size, 10u);
  EXPECT_TRUE(s.optimal);
}

TEST(MemoryPlanTest, LowerBoundNamesItsPeak) {
  const Problem p = make_problem({{0, 3, 10}, {2, 5, 20}, {4, 8, 5}, {0, 8, 1}});
  const planner::memory::LowerBound lb = planner::memory::lower_bound(p);
  EXPECT_EQ(lb.bytes, 31u);
  EXPECT_EQ(lb.moment, 2);
  EXPECT_EQ(lb.live, (std::vector<int>{0, 1, 3}));
}

TEST(MemoryPlanTest, CheckerNamesOverlappingBuffers) {
  const Problem p = make_problem({{0, 4, 8}, {2, 6, 8}, {5, 9, 8}});
  Solution s;
  s.offsets = {0, 4, 0};
  s.arena_size = 12;
  EXPECT_NE(planner::memory::check_solution(p, s).find("buffers 0 and 1 overlap"), std::string::npos);
  s.offsets = {0, 8, 0};
  s.arena_size = 12;
  EXPECT_NE(planner::memory::check_solution(p, s).find("ends past the arena"), std::string::npos);
  s.arena_size = 16;
  EXPECT_EQ(planner::memory::check_solution(p, s), "");
}

TEST(MemoryPlanTest, ParsesHalfOpenAndInclusiveCsv) {
  using planner::memory::parse_interval_csv;
  const auto half = parse_interval_csv("id,lower,upper,size\n7,0,2,10\n8,2,3,5\n", "half.csv");
  EXPECT_FALSE(half.inclusive);
  EXPECT_EQ(half.problem.buffers[0].end, 2);
  EXPECT_EQ(half.ids[1], "8");
  EXPECT_EQ(planner::memory::lower_bound(half.problem).bytes, 10u);
  const auto inclusive = parse_interval_csv("id,start_incl,end_incl,size\n0,0,2,10\n1,2,3,5\n", "incl.csv");
  EXPECT_TRUE(inclusive.inclusive);
  EXPECT_EQ(inclusive.problem.buffers[0].end, 3);
  EXPECT_EQ(planner::memory::lower_bound(inclusive.problem).bytes, 15u);
  const auto used = parse_interval_csv("id,first_used,last_used,size\n0,0,0,4\n", "tflm.csv");
  EXPECT_TRUE(used.inclusive);
  const auto theirs = parse_interval_csv("id,lower,upper,size,offset\n0,0,1,4,0\n1,0,1,4,4\n", "iree.csv");
  ASSERT_TRUE(theirs.offsets.has_value());
  EXPECT_EQ((*theirs.offsets)[1], 4u);
  EXPECT_THROW(parse_interval_csv("id,lower,upper,size\n0,3,3,4\n", "empty.csv"), planner::PlanError);
  EXPECT_THROW(parse_interval_csv("id,lower,upper,size\n0,0,x,4\n", "bad.csv"), planner::PlanError);
  EXPECT_THROW(parse_interval_csv("id,lower,upper,size\n0,0,1\n", "short.csv"), planner::PlanError);
  try {
    parse_interval_csv("id,lower,upper,size\n0,0,1,4\n1,0,-,4\n", "where.csv");
    FAIL();
  } catch (const planner::PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("where.csv:3"), std::string::npos) << e.what();
  }
}

// a = relu(x); b = sigmoid(a); c = a + b: a and b are alive together.
std::string two_live_tensors(std::string& a_name, std::string& b_name) {
  GraphBuilder g;
  const int x = g.input("x", {4, 16});
  const int a = g.node("Relu", {x});
  const int b = g.node("Sigmoid", {a});
  g.output(g.node("Add", {a, b}));
  a_name = g.graph().values[static_cast<size_t>(a)].name;
  b_name = g.graph().values[static_cast<size_t>(b)].name;
  return g.plan().bytes;
}

fb::PlannedStorageT* planned(fb::ProgramT& p, const std::string& name) {
  for (auto& t : p.methods[0]->tensors) {
    if (t->name == name) return t->storage.AsPlannedStorage();
  }
  return nullptr;
}

TEST(VerifierTest, AcceptsPlannedPrograms) {
  std::string a, b;
  EXPECT_TRUE(planner::verify_program(two_live_tensors(a, b)).empty());
}

TEST(VerifierTest, CatchesAPlantedOverlapNamingBothTensors) {
  std::string a, b;
  const std::string bytes = mutate_program(two_live_tensors(a, b), [&](fb::ProgramT& p) {
    ASSERT_NE(planned(p, a), nullptr);
    ASSERT_NE(planned(p, b), nullptr);
    planned(p, b)->offset = planned(p, a)->offset;
  });
  const auto errors = planner::verify_program(bytes);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].find("'" + a + "'"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("'" + b + "'"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("share bytes"), std::string::npos) << errors[0];
}

TEST(VerifierTest, CatchesAPlantedOutOfArenaOffset) {
  std::string a, b;
  const std::string bytes = mutate_program(two_live_tensors(a, b), [&](fb::ProgramT& p) {
    ASSERT_NE(planned(p, b), nullptr);
    planned(p, b)->offset = p.methods[0]->arenas[0]->size;
  });
  const auto errors = planner::verify_program(bytes);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].find("'" + b + "'"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("outside arena"), std::string::npos) << errors[0];
}

TEST(VerifierTest, CatchesAMisalignedOffset) {
  std::string a, b;
  const std::string bytes =
      mutate_program(two_live_tensors(a, b), [&](fb::ProgramT& p) { planned(p, a)->offset += 4; });
  const auto errors = planner::verify_program(bytes);
  ASSERT_FALSE(errors.empty());
  bool aligned_error = false;
  for (const auto& e : errors) aligned_error |= e.find("not aligned") != std::string::npos;
  EXPECT_TRUE(aligned_error);
}

}  // namespace
}  // namespace kiln::testing
