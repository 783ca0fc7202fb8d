// Several methods in one program (planner plan_methods, `kiln plan
// --method`): the runtime selects each by name; methods of one arena group
// load into ONE host buffer (MethodMeta::split_host_arenas) the size
// Program::shared_arena_bytes names, and each gives the same outputs as
// when loaded on its own even when the other ran in between; the
// validator refuses arena groups that are out of range, repeat a method or
// are too small for a member. Two programs planned apart share one buffer
// the same way.

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kiln/kernels/cpu.h"
#include "kiln/runtime/program.h"
#include "kiln/schema/arena_layout.h"
#include "pipeline.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"

namespace kiln::testing {
namespace {

// conv -> relu -> maxpool -> flatten -> gemm: the larger method.
Graph cnn_graph() {
  GraphBuilder b;
  const int x = b.input("image", {1, 2, 6, 6});
  const int w = b.ramp("w", {4, 2, 3, 3});
  const int conv = b.node("Conv", {x, w}, {{"pads", ints_attr({1, 1, 1, 1})}});
  const int pool = b.node("MaxPool", {b.node("Relu", {conv})},
                          {{"kernel_shape", ints_attr({2, 2})}, {"strides", ints_attr({2, 2})}});
  const int fc_w = b.ramp("fc_w", {36, 5}, 0.05f);
  b.output(b.node("Gemm", {b.node("Flatten", {pool}), fc_w}));
  return b.graph();
}

// tanh(x @ w) with the same ramp weights as the cnn's fc_w: stored once.
Graph small_graph() {
  GraphBuilder b;
  const int x = b.input("x", {1, 36});
  const int w = b.ramp("fc_w", {36, 5}, 0.05f);
  b.output(b.node("Tanh", {b.node("MatMul", {x, w})}));
  return b.graph();
}

std::string two_methods(bool concurrent) {
  std::vector<std::pair<std::string, Graph>> graphs;
  graphs.emplace_back("cnn", cnn_graph());
  graphs.emplace_back("small", small_graph());
  return planner::plan_methods(std::move(graphs), {}, concurrent).bytes;
}

// Runs `method` on a ramp input; its first output.
std::vector<float> run(Method& method) {
  std::vector<float> x(method.meta().input(0)->nbytes / 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 11) * 0.1f - 0.5f;
  std::vector<float> y(method.meta().output(0)->nbytes / 4, -1.f);
  EXPECT_EQ(method.set_input(0, x.data(), x.size() * 4), Error::kOk);
  EXPECT_EQ(method.set_output(0, y.data(), y.size() * 4), Error::kOk);
  EXPECT_EQ(method.execute(), Error::kOk);
  return y;
}

// Each method's output when loaded alone, with arenas of its own.
std::vector<float> alone(const Program& program, const char* name) {
  MethodMemory memory(*program.method_meta(name));
  Result<Method> method = program.load_method(name, memory.manager());
  EXPECT_TRUE(method.ok());
  return method.ok() ? run(*method) : std::vector<float>{};
}

TEST(MethodsTest, MethodsOfOneGroupShareOneBuffer) {
  ASSERT_EQ(register_cpu_kernels(), Error::kOk);
  LoadedProgram p(two_methods(false));
  ASSERT_TRUE(p.program.ok());
  const Program& program = *p.program;
  ASSERT_EQ(program.num_methods(), 2u);
  EXPECT_STREQ(*program.method_name(1), "small");
  const MethodMeta cnn = *program.method_meta("cnn");
  const MethodMeta small = *program.method_meta("small");
  EXPECT_TRUE(*program.may_share_arenas("cnn", "small"));
  EXPECT_EQ(program.may_share_arenas("cnn", "nope").error(), Error::kNotFound);
  const uint64_t shared = *program.shared_arena_bytes("small");
  EXPECT_EQ(shared, *program.shared_arena_bytes("cnn"));
  EXPECT_EQ(shared, std::max(cnn.host_arena_bytes(), small.host_arena_bytes()));
  EXPECT_LT(shared, cnn.host_arena_bytes() + small.host_arena_bytes());
  const std::vector<float> want_cnn = alone(program, "cnn");
  const std::vector<float> want_small = alone(program, "small");

  AlignedBytes buffer(std::string(static_cast<size_t>(shared) + 64, '\0'));
  Span<uint8_t> whole(buffer.data(), static_cast<size_t>(shared));
  Span<uint8_t> spans_cnn[4], spans_small[4];
  ASSERT_EQ(cnn.split_host_arenas(whole, spans_cnn), Error::kOk);
  ASSERT_EQ(small.split_host_arenas(whole, spans_small), Error::kOk);
  EXPECT_EQ(spans_cnn[0].data(), spans_small[0].data());
  EXPECT_EQ(cnn.split_host_arenas(whole.subspan(0, static_cast<size_t>(cnn.host_arena_bytes()) - 1), spans_cnn),
            Error::kBufferTooSmall);
  EXPECT_EQ(cnn.split_host_arenas(whole.subspan(4, static_cast<size_t>(cnn.host_arena_bytes())), spans_cnn),
            Error::kBufferMisaligned);
  EXPECT_EQ(cnn.split_host_arenas(whole, Span<Span<uint8_t>>(spans_cnn, 0)), Error::kInvalidArgument);

  MethodMemory memory_cnn(cnn), memory_small(small);
  MemoryManager manager_cnn = memory_cnn.manager(), manager_small = memory_small.manager();
  manager_cnn.arenas = Span<const Span<uint8_t>>(spans_cnn, cnn.num_arenas());
  manager_small.arenas = Span<const Span<uint8_t>>(spans_small, small.num_arenas());
  Result<Method> method_cnn = program.load_method("cnn", manager_cnn);
  Result<Method> method_small = program.load_method("small", manager_small);
  ASSERT_TRUE(method_cnn.ok() && method_small.ok());
  EXPECT_EQ(run(*method_cnn), want_cnn);
  EXPECT_EQ(run(*method_small), want_small);
  EXPECT_EQ(run(*method_cnn), want_cnn);
}

// Two programs planned apart whose methods run one after another: one
// buffer, the larger method's host arenas (what `kiln pack --shared-arena`
// sizes), serves both.
TEST(MethodsTest, TwoProgramsShareOneBuffer) {
  ASSERT_EQ(register_cpu_kernels(), Error::kOk);
  LoadedProgram a(planner::plan_graph(cnn_graph(), {}).bytes);
  LoadedProgram b(planner::plan_graph(small_graph(), {}).bytes);
  ASSERT_TRUE(a.program.ok() && b.program.ok());
  const MethodMeta meta_a = *a.program->method_meta("forward");
  const MethodMeta meta_b = *b.program->method_meta("forward");
  const uint64_t bytes = std::max(meta_a.host_arena_bytes(), meta_b.host_arena_bytes());
  const std::vector<float> want_a = alone(*a.program, "forward");
  const std::vector<float> want_b = alone(*b.program, "forward");
  AlignedBytes buffer(std::string(static_cast<size_t>(bytes) + 64, '\0'));
  Span<uint8_t> spans_a[4], spans_b[4];
  ASSERT_EQ(meta_a.split_host_arenas({buffer.data(), static_cast<size_t>(bytes)}, spans_a), Error::kOk);
  ASSERT_EQ(meta_b.split_host_arenas({buffer.data(), static_cast<size_t>(bytes)}, spans_b), Error::kOk);
  MethodMemory memory_a(meta_a), memory_b(meta_b);
  MemoryManager manager_a = memory_a.manager(), manager_b = memory_b.manager();
  manager_a.arenas = Span<const Span<uint8_t>>(spans_a, meta_a.num_arenas());
  manager_b.arenas = Span<const Span<uint8_t>>(spans_b, meta_b.num_arenas());
  Result<Method> method_a = a.program->load_method("forward", manager_a);
  Result<Method> method_b = b.program->load_method("forward", manager_b);
  ASSERT_TRUE(method_a.ok() && method_b.ok());
  EXPECT_EQ(run(*method_a), want_a);
  EXPECT_EQ(run(*method_b), want_b);
  EXPECT_EQ(run(*method_a), want_a);
}

TEST(MethodsTest, ConcurrentMethodsFormNoGroup) {
  LoadedProgram p(two_methods(true));
  ASSERT_TRUE(p.program.ok());
  EXPECT_FALSE(*p.program->may_share_arenas("cnn", "small"));
  EXPECT_TRUE(*p.program->may_share_arenas("cnn", "cnn"));
  EXPECT_EQ(*p.program->shared_arena_bytes("cnn"), p.program->method_meta("cnn")->host_arena_bytes());
}

TEST(MethodsTest, ByteIdenticalConstantsAreStoredOnce) {
  std::vector<std::pair<std::string, Graph>> graphs;
  graphs.emplace_back("a", small_graph());
  graphs.emplace_back("b", small_graph());
  const planner::PlanResult both = planner::plan_methods(std::move(graphs), {}, false);
  LoadedProgram one(planner::plan_graph(small_graph(), {}).bytes);
  ASSERT_TRUE(one.program.ok());
  LoadedProgram two(both.bytes);
  ASSERT_TRUE(two.program.ok());
  EXPECT_EQ(two.program->segment().size(), one.program->segment().size());
}

TEST(MethodsTest, BadArenaGroupsAreRefused) {
  const std::string bytes = two_methods(false);
  auto group = [](fb::ProgramT& p) -> fb::ArenaGroupT& { return *p.arena_groups.at(0); };
  EXPECT_EQ(load_error(bytes), Error::kOk);
  EXPECT_EQ(load_error(mutate_program(bytes, [&](fb::ProgramT& p) { group(p).methods[1] = 2; })),
            Error::kInvalidProgram);
  EXPECT_EQ(load_error(mutate_program(bytes, [&](fb::ProgramT& p) { group(p).methods[1] = 0; })),
            Error::kInvalidProgram);
  EXPECT_EQ(load_error(mutate_program(bytes, [&](fb::ProgramT& p) { group(p).host_bytes -= 1; })),
            Error::kInvalidProgram);
  EXPECT_EQ(load_error(mutate_program(bytes,
                                      [&](fb::ProgramT& p) {
                                        auto again = std::make_unique<fb::ArenaGroupT>();
                                        again->methods = {1};
                                        again->host_bytes = group(p).host_bytes;
                                        p.arena_groups.push_back(std::move(again));
                                      })),
            Error::kInvalidProgram);
}

}  // namespace
}  // namespace kiln::testing
