// Memory regions (memory/regions.h): the hottest tensors per byte go to the
// fastest region within its capacity, every region is an arena of its own
// that fits, a region that cannot hold what is left names itself and the
// bytes over, and the outputs do not change.

#include <gtest/gtest.h>

#include "core/error.h"
#include "emit/program_file.h"
#include "exec/run.h"
#include "support/graph_builder.h"
#include "verify/verifier.h"

namespace kiln::testing {
namespace {

using planner::LArena;
using planner::LMethod;
using planner::PlanOptions;
using planner::PlanResult;
using planner::memory::MemoryRegion;
using planner::memory::RegionSpeed;

constexpr uint64_t kTensor = 1024 * 4;  // one tensor of 1,024 floats

// a = exp(x) is read three times; b, c, d and e once each.
struct Model {
  GraphBuilder b;
  int a, bt, c, d, e;
  Model() {
    const int x = b.input("x", {1024});
    a = b.node("Exp", {x});
    bt = b.node("Tanh", {a});
    c = b.node("Sigmoid", {a});
    d = b.node("Add", {bt, c});
    e = b.node("Mul", {d, a});
    b.output(b.node("Neg", {e}));
  }
  std::string name(int v) { return b.graph().values[static_cast<size_t>(v)].name; }
};

PlanOptions with_regions(std::vector<MemoryRegion> regions) {
  PlanOptions options;
  options.inplace.enabled = false;  // one tensor, one buffer: traffic by hand
  options.memory.regions = std::move(regions);
  return options;
}

const LArena& region_arena(const PlanResult& r, const std::string& name) {
  for (const LArena& a : r.program.methods[0].arenas) {
    if (a.region == name) return a;
  }
  ADD_FAILURE() << "no region " << name;
  static LArena none;
  return none;
}

std::string region_of(const PlanResult& r, const std::string& tensor) {
  const LMethod& m = r.program.methods[0];
  for (const auto& t : m.tensors) {
    if (t.name == tensor && t.arena >= 0) return m.arenas[static_cast<size_t>(t.arena)].region;
  }
  return "?";
}

std::vector<uint8_t> run_once(const std::string& program) {
  planner::HostTensor input(planner::DType::FLOAT32, {1024});
  for (int64_t i = 0; i < input.numel(); ++i) input.data<float>()[i] = static_cast<float>(i % 29) * 0.1f - 1.4f;
  return planner::run_program(program, {input}, {}).outputs[0].bytes;
}

TEST(RegionsTest, HottestTensorPerByteGoesToTheFastRegion) {
  Model m;
  const PlanResult one = m.b.plan(with_regions({}));
  const PlanResult r =
      m.b.plan(with_regions({{"psram", 1 << 20, RegionSpeed::kSlow}, {"tcm", kTensor, RegionSpeed::kFast}}));
  ASSERT_TRUE(planner::verify_program(r.bytes).empty());
  // Arenas in the order the regions were given.
  ASSERT_EQ(r.program.methods[0].arenas.size(), 2u);
  EXPECT_EQ(r.program.methods[0].arenas[0].region, "psram");
  EXPECT_EQ(region_of(r, m.name(m.a)), "tcm");  // written once, read three times
  for (int t : {m.bt, m.c, m.d, m.e}) EXPECT_EQ(region_of(r, m.name(t)), "psram");
  const LArena& tcm = region_arena(r, "tcm");
  const LArena& psram = region_arena(r, "psram");
  EXPECT_EQ(tcm.size, kTensor);
  EXPECT_LE(tcm.size, tcm.capacity);
  EXPECT_EQ(tcm.traffic, 4 * kTensor);
  EXPECT_EQ(psram.traffic, 4 * 2 * kTensor);  // b, c, d, e: written once, read once
  // The program names each arena's region; the outputs are the same.
  const planner::ProgramFile with(r.bytes, "regions"), without(one.bytes, "one arena");
  EXPECT_EQ(with.program().methods()->Get(0)->arenas()->Get(1)->region()->str(), "tcm");
  EXPECT_EQ(without.program().methods()->Get(0)->arenas()->Get(0)->region(), nullptr);
  EXPECT_EQ(run_once(r.bytes), run_once(one.bytes));
}

TEST(RegionsTest, RegionsOfOneSpeedFillInTheOrderGiven) {
  Model m;
  const PlanResult r = m.b.plan(with_regions({{"sram0", 2 * kTensor, RegionSpeed::kNormal},
                                              {"sram1", 1 << 20, RegionSpeed::kNormal},
                                              {"tcm", kTensor, RegionSpeed::kFast}}));
  EXPECT_EQ(region_of(r, m.name(m.a)), "tcm");
  // Two of the rest live at once at most while d and e are made: sram0
  // takes as many as its two tensors' worth allows.
  EXPECT_LE(region_arena(r, "sram0").size, 2 * kTensor);
  EXPECT_GT(region_arena(r, "sram0").traffic, 0u);
  EXPECT_EQ(region_arena(r, "tcm").traffic + region_arena(r, "sram0").traffic + region_arena(r, "sram1").traffic,
            4 * kTensor + 8 * kTensor);
  EXPECT_EQ(run_once(r.bytes), run_once(m.b.plan(with_regions({})).bytes));
}

TEST(RegionsTest, EverythingFitsInTheFastRegion) {
  Model m;
  const PlanResult r =
      m.b.plan(with_regions({{"tcm", 1 << 20, RegionSpeed::kFast}, {"psram", 1 << 20, RegionSpeed::kSlow}}));
  EXPECT_EQ(region_arena(r, "psram").size, 0u);
  EXPECT_EQ(region_arena(r, "psram").traffic, 0u);
  EXPECT_EQ(region_arena(r, "tcm").traffic, 12 * kTensor);
  EXPECT_EQ(run_once(r.bytes), run_once(m.b.plan(with_regions({})).bytes));
}

TEST(RegionsTest, AnOverflowNamesTheRegionAndTheBytesOver) {
  Model m;
  try {
    (void)m.b.plan(with_regions({{"tcm", kTensor, RegionSpeed::kFast}, {"sram", kTensor, RegionSpeed::kSlow}}));
    FAIL() << "planned into regions too small";
  } catch (const planner::PlanError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("memory region 'sram' overflows"), std::string::npos) << what;
    // What is left without a: b and c are read while d is written.
    EXPECT_NE(what.find("needs 12288 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("8192 bytes over"), std::string::npos) << what;
  }
}

// A tensor larger than the fast region goes to the next one.
TEST(RegionsTest, TooLargeForTheFastRegionGoesSlow) {
  Model m;
  const PlanResult r =
      m.b.plan(with_regions({{"tcm", kTensor - 64, RegionSpeed::kFast}, {"psram", 1 << 20, RegionSpeed::kSlow}}));
  EXPECT_EQ(region_arena(r, "tcm").size, 0u);
  EXPECT_EQ(region_arena(r, "psram").traffic, 12 * kTensor);
}

// --hot-constants: the fast region's room after its plan takes copies of
// the constants read most per byte, made once at load; the kernels read the
// copies, and the outputs are the same bits.
TEST(RegionsTest, HotConstantsFillTheFastRegionsRoom) {
  GraphBuilder b;
  const int x = b.input("x", {1024});
  const int shared = b.ramp("shared", {1024});  // read by two kernels
  const int once = b.ramp("once", {1024});      // read by one
  const int big = b.ramp("big", {4, 1024});     // read by one, larger than the room left
  const int p = b.node("Mul", {x, shared});
  const int q = b.node("Add", {p, shared});
  const int r = b.node("Sub", {q, once});
  const int mean = b.node("ReduceMean", {big}, {{"axes", ints_attr({0})}, {"keepdims", int_attr(0)}});
  b.output(b.node("Add", {r, mean}));
  PlanOptions options =
      with_regions({{"tcm", 4 * kTensor, RegionSpeed::kFast}, {"sram", 1 << 20, RegionSpeed::kNormal}});
  const PlanResult plain = b.plan(options);
  options.memory.hot_constants = true;
  const PlanResult hot = b.plan(options);
  ASSERT_TRUE(planner::verify_program(hot.bytes).empty());
  const LArena& tcm = region_arena(hot, "tcm");
  const LArena& plain_tcm = region_arena(plain, "tcm");
  EXPECT_LE(tcm.size, tcm.capacity);
  // 'shared' (two readers) and 'once' fit after the plan; 'big' does not.
  EXPECT_EQ(tcm.hot_constants, 2);
  EXPECT_EQ(tcm.hot_constant_bytes, 2 * kTensor);
  EXPECT_EQ(tcm.hot_constant_reads, 3 * kTensor);
  EXPECT_EQ(tcm.traffic, plain_tcm.traffic + 3 * kTensor);
  const LMethod& m = hot.program.methods[0];
  ASSERT_EQ(m.init_instructions.size(), 2u);
  const std::string shared_name = b.graph().values[static_cast<size_t>(shared)].name;
  const std::string once_name = b.graph().values[static_cast<size_t>(once)].name;
  EXPECT_EQ(m.tensors[static_cast<size_t>(m.init_instructions[0].inputs[0])].name, shared_name);
  for (const planner::LInstruction& ins : m.instructions) {
    for (int t : ins.inputs) {
      if (t < 0) continue;
      const std::string& name = m.tensors[static_cast<size_t>(t)].name;
      EXPECT_NE(name, shared_name) << "a kernel still reads the program's copy";
      EXPECT_NE(name, once_name) << "a kernel still reads the program's copy";
    }
  }
  // Without room nothing is copied; the outputs are the same either way.
  options.memory.regions = {{"tcm", plain_tcm.size, RegionSpeed::kFast}, {"sram", 1 << 20, RegionSpeed::kNormal}};
  EXPECT_EQ(region_arena(b.plan(options), "tcm").hot_constants, 0);
  EXPECT_EQ(run_once(hot.bytes), run_once(plain.bytes));
}

}  // namespace
}  // namespace kiln::testing
