// In-place reuse: every safety rule, chains, the policy options, and that
// outputs do not change while the arena shrinks.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "exec/run.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"
#include "verify/verifier.h"

namespace kiln::testing {
namespace {

using planner::LMethod;
using planner::LTensor;
using planner::PlanOptions;
using planner::PlanResult;
using planner::Storage;

const LTensor& tensor(const PlanResult& r, const std::string& name) {
  for (const LTensor& t : r.program.methods[0].tensors) {
    if (t.name == name) return t;
  }
  ADD_FAILURE() << "no tensor " << name;
  static LTensor none;
  return none;
}

// The base tensor name of `name`'s bytes ("" when it has its own).
std::string base_of(const PlanResult& r, const std::string& name) {
  const LTensor& t = tensor(r, name);
  if (t.storage != Storage::kAlias) return "";
  return r.program.methods[0].tensors[static_cast<size_t>(t.alias_of)].name;
}

std::string root_of(const PlanResult& r, const std::string& name) {
  const LMethod& m = r.program.methods[0];
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    if (m.tensors[i].name == name) return m.tensors[static_cast<size_t>(m.root(static_cast<int>(i)))].name;
  }
  return "";
}

std::string name(GraphBuilder& b, int value) { return b.graph().values[static_cast<size_t>(value)].name; }

TEST(InplaceTest, LastUseMustBeThisOp) {
  GraphBuilder b;
  const int x = b.input("x", {64});
  const int a = b.node("Exp", {x});
  const int r = b.node("Relu", {a});    // a is read again below: not in place
  const int s = b.node("Add", {r, a});  // r dies here: the output takes r's bytes
  b.output(b.node("Neg", {s}));
  PlanResult p = b.plan();
  EXPECT_EQ(base_of(p, name(b, r)), "");
  EXPECT_EQ(base_of(p, name(b, s)), name(b, r));
}

TEST(InplaceTest, LaterConsumerOfAnAliasBlocksReuse) {
  GraphBuilder b;
  const int x = b.input("x", {4, 16});
  const int a = b.node("Exp", {x});
  const int view = b.node("Reshape", {a, b.constant("shape", HostTensor::from_int64s({64}, {1}))});
  const int r = b.node("Relu", {a});  // the view of a is read after this
  const int v = b.node("Neg", {view});
  b.output(b.node("Add", {b.node("Reshape", {r, b.constant("shape2", HostTensor::from_int64s({64}, {1}))}), v}));
  PlanResult p = b.plan();
  EXPECT_EQ(base_of(p, name(b, view)), name(b, a));  // the view is an alias, no instruction
  EXPECT_EQ(base_of(p, name(b, r)), "");             // a's bytes are still needed through the view
}

TEST(InplaceTest, NeverOverMethodInputsOutputsOrConstants) {
  GraphBuilder b;
  const int x = b.input("x", {32});
  const int c = b.ramp("c", {32});
  const int r = b.node("Relu", {x});    // x is the application's input
  const int s = b.node("Add", {c, r});  // c is a constant; r dies: r's bytes are used
  const int out = b.node("Neg", {s});   // out is a method output: never an alias
  b.output(out);
  PlanResult p = b.plan();
  EXPECT_EQ(base_of(p, name(b, r)), "");
  EXPECT_EQ(base_of(p, name(b, s)), name(b, r));
  EXPECT_EQ(tensor(p, name(b, out)).storage, Storage::kUser);
}

TEST(InplaceTest, BroadcastToALargerOutputNeverAliases) {
  GraphBuilder b;
  const int x = b.input("x", {1, 16});
  const int y = b.input("y", {8, 16});
  const int small = b.node("Exp", {x});  // [1, 16], dies at the Add
  const int big = b.node("Exp", {y});    // [8, 16], read again later
  const int sum = b.node("Add", {small, big});
  b.output(b.node("Mul", {sum, big}));
  PlanResult p = b.plan();
  EXPECT_EQ(base_of(p, name(b, sum)), "");
}

TEST(InplaceTest, ThroughTheSecondInputWhenOnlyItDies) {
  GraphBuilder b;
  const int x = b.input("x", {8, 16});
  const int a = b.node("Exp", {x});
  const int c = b.node("Tanh", {x});
  const int d = b.node("Sub", {a, c});  // c dies here, a lives on
  b.output(b.node("Mul", {d, a}));
  PlanResult p = b.plan();
  EXPECT_EQ(base_of(p, name(b, d)), name(b, c));
}

// Dtype and device: exercised on a lowered method directly, since no kernel
// that declares an in-place input changes either.
TEST(InplaceTest, DtypeAndDeviceMustMatch) {
  auto method_with = [](DType in_type, fb::Device in_device) {
    LMethod m;
    LTensor in;
    in.name = "in";
    in.dtype = in_type;
    in.shape = {4};
    in.device = in_device;
    LTensor out = in;
    out.name = "out";
    out.dtype = DType::FLOAT32;
    out.device = fb::Device(fb::DeviceType::CPU, 0);
    m.tensors = {in, out};
    planner::LInstruction relu;
    relu.op = relu.source_op = "Relu";
    relu.inputs = {0};
    relu.outputs = {1};
    m.instructions = {relu};
    return m;
  };
  const fb::Device cpu(fb::DeviceType::CPU, 0);
  LMethod same = method_with(DType::FLOAT32, cpu);
  EXPECT_EQ(planner::apply_inplace(same, {}).outputs_in_place, 1);
  EXPECT_EQ(same.tensors[1].storage, Storage::kAlias);
  LMethod other_dtype = method_with(DType::INT32, cpu);  // same byte size
  EXPECT_EQ(planner::apply_inplace(other_dtype, {}).outputs_in_place, 0);
  LMethod other_device = method_with(DType::FLOAT32, fb::Device(fb::DeviceType::VULKAN, 0));
  EXPECT_EQ(planner::apply_inplace(other_device, {}).outputs_in_place, 0);
}

TEST(InplaceTest, ChainsResolveToOneBuffer) {
  GraphBuilder b;
  const int x = b.input("x", {1024});
  int v = b.node("Exp", {x});
  const int first = v;
  std::vector<int> chain;
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Neg", "Abs"}) {
    v = b.node(op, {v});
    chain.push_back(v);
  }
  b.output(b.node("Sqrt", {v}));
  PlanResult p = b.plan();
  for (int t : chain) EXPECT_EQ(root_of(p, name(b, t)), name(b, first));
  ASSERT_EQ(p.program.methods[0].arenas.size(), 1u);
  EXPECT_EQ(p.program.methods[0].arenas[0].size, 4096u);  // one buffer of 1024 floats
  EXPECT_EQ(p.inplace.outputs_in_place, 5);
}

// A model of element-wise chains over a large tensor: much smaller arena,
// identical outputs.
TEST(InplaceTest, ElementwiseChainsShrinkTheArenaWithIdenticalOutputs) {
  GraphBuilder b;
  const int x = b.input("x", {64, 1024});
  int v = b.node("Sigmoid", {x});
  const int scale = b.ramp("scale", {1024}, 0.01f);
  for (int i = 0; i < 6; ++i) {
    v = b.node("Mul", {v, scale});
    v = b.node("Add", {v, scale});
    v = b.node("Clip", {v}, {{"min", float_attr(-1.f)}, {"max", float_attr(1.f)}});
    v = b.node("Tanh", {v});
  }
  b.output(b.node("Relu", {v}));
  b.graph().opset = 6;  // Clip with min/max attributes
  for (auto& n : b.graph().nodes) n.opset = 6;
  PlanOptions on;
  on.compare_without_inplace = true;
  PlanOptions off;
  off.inplace.enabled = false;
  PlanResult with = b.plan(on);
  PlanResult without = b.plan(off);
  const uint64_t a = with.program.methods[0].arenas[0].size;
  const uint64_t c = without.program.methods[0].arenas[0].size;
  EXPECT_EQ(a, 64u * 1024 * 4);
  EXPECT_EQ(c, 2u * 64 * 1024 * 4);
  EXPECT_EQ(with.inplace_saving.without, c);
  EXPECT_EQ(with.inplace_saving.with, a);
  // By default the saving is estimated by first fit on both sides (which
  // plans these chains optimally), with no second search.
  const PlanResult estimated = b.plan();
  EXPECT_TRUE(estimated.inplace_saving.estimated());
  EXPECT_EQ(estimated.inplace_saving.bytes_saved(), c - a);
  planner::HostTensor input(DType::FLOAT32, {64, 1024});
  for (int64_t i = 0; i < input.numel(); ++i) input.data<float>()[i] = static_cast<float>(i % 113) * 0.05f - 2.f;
  const auto r1 = planner::run_program(with.bytes, {input}, {});
  const auto r2 = planner::run_program(without.bytes, {input}, {});
  ASSERT_EQ(r1.outputs[0].bytes, r2.outputs[0].bytes);
}

// x * x reads one dying tensor twice: the product takes its bytes, so an
// element-wise chain ending in a square keeps one buffer, not two.
TEST(InplaceTest, SquareOfADyingTensorWritesOverIt) {
  GraphBuilder b;
  const int x = b.input("x", {1024});
  const int e = b.node("Exp", {x});
  const int t = b.node("Tanh", {e});
  const int sq = b.node("Mul", {t, t});
  b.output(b.node("Neg", {sq}));
  PlanResult p = b.plan();
  EXPECT_EQ(base_of(p, name(b, sq)), name(b, t));
  EXPECT_EQ(root_of(p, name(b, sq)), name(b, e));
  ASSERT_EQ(p.program.methods[0].arenas.size(), 1u);
  EXPECT_EQ(p.program.methods[0].arenas[0].size, 4096u);  // one buffer of 1024 floats
  EXPECT_EQ(p.inplace.outputs_in_place, 2);
  ASSERT_TRUE(planner::verify_program(p.bytes).empty());
  PlanOptions off;
  off.inplace.enabled = false;
  PlanResult q = b.plan(off);
  EXPECT_EQ(q.program.methods[0].arenas[0].size, 2u * 4096);
  planner::HostTensor input(DType::FLOAT32, {1024});
  for (int64_t i = 0; i < input.numel(); ++i) input.data<float>()[i] = static_cast<float>(i % 37) * 0.1f - 1.8f;
  const auto r1 = planner::run_program(p.bytes, {input}, {});
  const auto r2 = planner::run_program(q.bytes, {input}, {});
  ASSERT_EQ(r1.outputs[0].bytes, r2.outputs[0].bytes);
  const float v = std::tanh(std::exp(input.data<float>()[5]));
  float got;
  std::memcpy(&got, r1.outputs[0].bytes.data() + 5 * sizeof(float), sizeof(float));
  EXPECT_EQ(got, -(v * v));
}

// The same bytes twice are only written over where the kernel declares both
// inputs (PRelu declares its data, not its slope), and only while they die.
TEST(InplaceTest, SquareNeedsBothInputsDeclaredAndDying) {
  GraphBuilder b;
  const int x = b.input("x", {256});
  const int e = b.node("Exp", {x});
  const int p1 = b.node("PRelu", {e, e});
  const int t = b.node("Tanh", {p1});
  const int sq = b.node("Mul", {t, t});  // t is read again below
  b.output(b.node("Add", {sq, t}));
  PlanResult p = b.plan();
  EXPECT_EQ(base_of(p, name(b, p1)), "");
  EXPECT_EQ(base_of(p, name(b, sq)), "");
  ASSERT_TRUE(planner::verify_program(p.bytes).empty());
}

TEST(InplaceTest, PolicyOptions) {
  GraphBuilder b;
  const int x = b.input("x", {256});
  const int a = b.node("Exp", {x});
  const int r = b.node("Relu", {a});
  const int s = b.node("Sigmoid", {r});
  b.output(b.node("Neg", {s}));
  PlanOptions only_relu;
  only_relu.inplace.ops = std::set<std::string>{"Relu"};
  PlanResult p = b.plan(only_relu);
  EXPECT_EQ(base_of(p, name(b, r)), name(b, a));
  EXPECT_EQ(base_of(p, name(b, s)), "");
  PlanOptions off;
  off.inplace.enabled = false;
  PlanResult q = b.plan(off);
  EXPECT_EQ(base_of(q, name(b, r)), "");
  EXPECT_EQ(q.inplace.outputs_in_place, 0);
}

TEST(InplaceTest, KernelsWithoutADeclarationAreNeverInPlace) {
  GraphBuilder b;
  const int x = b.input("x", {4, 8});
  const int a = b.node("Exp", {x});
  const int t = b.node("Softmax", {a}, {{"axis", int_attr(1)}});  // same size, a dies, but not declared
  b.output(b.node("Neg", {t}));
  PlanResult p = b.plan();
  EXPECT_EQ(base_of(p, name(b, t)), "");
}

// The verifier rejects two live tensors sharing bytes unless one is a
// declared alias of the other.
TEST(InplaceTest, VerifierRejectsAnUndeclaredOverlap) {
  GraphBuilder b;
  const int x = b.input("x", {256});
  const int a = b.node("Exp", {x});
  const int r = b.node("Relu", {a});
  b.output(b.node("Add", {r, a}));
  PlanResult p = b.plan();
  ASSERT_TRUE(planner::verify_program(p.bytes).empty());
  const std::string an = name(b, a), rn = name(b, r);
  // Put r on a's bytes without declaring an alias: both are alive at the Add.
  const std::string bad = mutate_program(p.bytes, [&](fb::ProgramT& prog) {
    auto& tensors = prog.methods[0]->tensors;
    uint64_t offset = 0;
    for (auto& t : tensors) {
      if (t->name == an) offset = t->storage.AsPlannedStorage()->offset;
    }
    for (auto& t : tensors) {
      if (t->name == rn) t->storage.AsPlannedStorage()->offset = offset;
    }
  });
  const auto errors = planner::verify_program(bad);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find(an), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find(rn), std::string::npos) << errors[0];
  // Declaring r an alias of a makes the same bytes legal for the verifier.
  const std::string declared = mutate_program(p.bytes, [&](fb::ProgramT& prog) {
    auto& tensors = prog.methods[0]->tensors;
    uint32_t base = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i]->name == an) base = static_cast<uint32_t>(i);
    }
    for (auto& t : tensors) {
      if (t->name == rn) {
        fb::AliasStorageT alias;
        alias.base = base;
        t->storage.Set(alias);
      }
    }
  });
  EXPECT_TRUE(planner::verify_program(declared).empty());
}

}  // namespace
}  // namespace kiln::testing
