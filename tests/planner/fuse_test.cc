// Fusion passes: BatchNormalization folded into Conv and activations into
// their producer change no output, remove the instructions they absorb,
// and stay away from every case where fusing would be wrong.

#include <gtest/gtest.h>

#include <cmath>

#include "exec/run.h"
#include "support/graph_builder.h"

namespace kiln::testing {
namespace {

using planner::LInstruction;
using planner::PlanOptions;
using planner::PlanResult;

HostTensor input_values(std::vector<int64_t> shape, float scale = 1.f) {
  HostTensor t(DType::FLOAT32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * std::sin(0.37f * static_cast<float>(i) + 0.1f);
  return t;
}

// The kernel ops of the plan, in order (copies and views left out).
std::vector<std::string> kernels(const PlanResult& r) {
  std::vector<std::string> ops;
  for (const LInstruction& ins : r.program.methods[0].instructions) {
    if (ins.kind == LInstruction::Kind::kKernel && ins.op != "Copy") ops.push_back(ins.op);
  }
  return ops;
}

const fb::FusedActivationT* activation_of(const PlanResult& r, const std::string& op) {
  for (const LInstruction& ins : r.program.methods[0].instructions) {
    if (ins.op != op) continue;
    if (const auto* p = ins.params.AsConvParams()) return p->activation.get();
    if (const auto* p = ins.params.AsGemmParams()) return p->activation.get();
    if (const auto* p = ins.params.AsBinaryParams()) return p->activation.get();
    if (const auto* p = ins.params.AsMatMulParams()) return p->activation.get();
  }
  return nullptr;
}

// Plans `b` with and without fusion, runs both on `inputs` and expects the
// same outputs; returns the fused plan.
PlanResult plan_and_compare(GraphBuilder& b, const std::vector<HostTensor>& inputs) {
  PlanOptions plain;
  plain.fuse = false;
  const PlanResult unfused = b.plan(plain);
  PlanResult fused = b.plan();
  const auto want = planner::run_program(unfused.bytes, inputs, {}).outputs;
  const auto got = planner::run_program(fused.bytes, inputs, {}).outputs;
  EXPECT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size() && o < got.size(); ++o) {
    EXPECT_EQ(want[o].shape, got[o].shape);
    double scale = 1e-30;
    for (int64_t i = 0; i < want[o].numel(); ++i) scale = std::max(scale, std::fabs(want[o].float_at(i)));
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      EXPECT_NEAR(got[o].float_at(i), want[o].float_at(i), 1e-5 * scale) << "output " << o << " at " << i;
    }
  }
  return fused;
}

// x -> Conv -> BatchNormalization -> act
int conv_bn(GraphBuilder& b, int x, bool with_bias) {
  std::vector<int> conv_inputs = {x, b.ramp("w", {8, 3, 3, 3}, 0.05f)};
  if (with_bias) conv_inputs.push_back(b.ramp("b", {8}, 0.2f));
  const int conv = b.node("Conv", conv_inputs, {{"pads", ints_attr({1, 1, 1, 1})}});
  return b.node("BatchNormalization", {conv, b.ramp("scale", {8}, 0.3f), b.ramp("shift", {8}, 0.1f),
                                       b.ramp("mean", {8}, 0.05f), b.constant("var", HostTensor::from_floats(
                                           {0.5f, 1.f, 1.5f, 2.f, 0.7f, 0.9f, 1.1f, 1.3f}, {8}))},
                {{"epsilon", float_attr(1e-3f)}});
}

TEST(FuseTest, BatchNormFoldsIntoConvAndReluFuses) {
  for (bool with_bias : {false, true}) {
    GraphBuilder b;
    const int x = b.input("x", {1, 3, 10, 10});
    b.output(b.node("Relu", {conv_bn(b, x, with_bias)}));
    const PlanResult r = plan_and_compare(b, {input_values({1, 3, 10, 10})});
    EXPECT_EQ(r.fuse.batch_norms_folded, 1);
    EXPECT_EQ(r.fuse.activations_fused, 1);
    EXPECT_EQ(kernels(r), std::vector<std::string>{"Conv"});
    const fb::FusedActivationT* a = activation_of(r, "Conv");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->kind, fb::Activation::RELU);
  }
}

TEST(FuseTest, ActivationsWithParametersFuse) {
  struct Act {
    std::string op;
    std::map<std::string, Attribute> attrs;
    fb::Activation kind;
  };
  const std::vector<Act> acts = {{"LeakyRelu", {{"alpha", float_attr(0.2f)}}, fb::Activation::LEAKY_RELU},
                                 {"HardSigmoid", {}, fb::Activation::HARD_SIGMOID},
                                 {"HardSwish", {}, fb::Activation::HARD_SWISH},
                                 {"Sigmoid", {}, fb::Activation::SIGMOID},
                                 {"Tanh", {}, fb::Activation::TANH}};
  for (const Act& act : acts) {
    SCOPED_TRACE(act.op);
    GraphBuilder b;
    const int x = b.input("x", {4, 24});
    const int y = b.node("Gemm", {x, b.ramp("w", {24, 16}, 0.3f), b.ramp("c", {16})});
    b.output(b.node(act.op, {y}, act.attrs));
    const PlanResult r = plan_and_compare(b, {input_values({4, 24}, 3.f)});
    EXPECT_EQ(kernels(r), std::vector<std::string>{"Gemm"});
    const fb::FusedActivationT* a = activation_of(r, "Gemm");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->kind, act.kind);
  }
}

TEST(FuseTest, ClipWithConstantBoundsFusesIntoMatMulAndAdd) {
  GraphBuilder b;
  const int x = b.input("x", {2, 5, 12});
  const int lo = b.constant("lo", HostTensor::scalar_float(0.f));
  const int hi = b.constant("hi", HostTensor::scalar_float(0.6f));
  const int mm = b.node("Clip", {b.node("MatMul", {x, b.ramp("w", {12, 7})}), lo, hi});
  const int sum = b.node("Relu", {b.node("Add", {mm, b.ramp("bias", {7})})});
  b.output(sum);
  const PlanResult r = plan_and_compare(b, {input_values({2, 5, 12}, 2.f)});
  EXPECT_EQ(r.fuse.activations_fused, 2);
  EXPECT_EQ(kernels(r), (std::vector<std::string>{"MatMul", "Add"}));
  ASSERT_NE(activation_of(r, "MatMul"), nullptr);
  EXPECT_EQ(activation_of(r, "MatMul")->kind, fb::Activation::CLIP);
  EXPECT_FLOAT_EQ(activation_of(r, "MatMul")->beta, 0.6f);
  ASSERT_NE(activation_of(r, "Add"), nullptr);
  EXPECT_EQ(activation_of(r, "Add")->kind, fb::Activation::RELU);
}

TEST(FuseTest, ConstantBiasAddFusesIntoMatMul) {
  for (bool packing : {true, false}) {
    SCOPED_TRACE(packing ? "packed" : "plain loops");
    GraphBuilder b;
    const int x = b.input("x", {2, 5, 12});
    const int mm = b.node("MatMul", {x, b.ramp("w", {12, 7})});
    b.output(b.node("Relu", {b.node("Add", {b.ramp("bias", {1, 7}, 0.3f), mm})}));
    PlanOptions options;
    options.lower.packing_scratch = packing;
    const PlanResult r = b.plan(options);
    EXPECT_EQ(r.fuse.biases_fused, 1);
    EXPECT_EQ(r.fuse.activations_fused, 1);
    // Without packing the bias and activation run as an Add after the product.
    EXPECT_EQ(kernels(r), (packing ? std::vector<std::string>{"MatMul"} : std::vector<std::string>{"MatMul", "Add"}));
    PlanOptions plain = options;
    plain.fuse = false;
    const HostTensor in = input_values({2, 5, 12}, 2.f);
    const auto want = planner::run_program(b.plan(plain).bytes, {in}, {}).outputs;
    const auto got = planner::run_program(r.bytes, {in}, {}).outputs;
    ASSERT_EQ(want.size(), 1u);
    ASSERT_EQ(got.size(), 1u);
    for (int64_t i = 0; i < want[0].numel(); ++i) EXPECT_NEAR(got[0].float_at(i), want[0].float_at(i), 1e-5);
  }
}

TEST(FuseTest, BiasThatIsNotPerColumnStaysAnAdd) {
  GraphBuilder b;
  const int x = b.input("x", {5, 12});
  const int mm = b.node("MatMul", {x, b.ramp("w", {12, 7})});
  b.output(b.node("Add", {mm, b.ramp("bias", {5, 1})}));  // one value per row
  const PlanResult r = plan_and_compare(b, {input_values({5, 12})});
  EXPECT_EQ(r.fuse.biases_fused, 0);
  EXPECT_EQ(kernels(r), (std::vector<std::string>{"MatMul", "Add"}));
}

TEST(FuseTest, NothingFusesWhenTheIntermediateIsReadTwice) {
  GraphBuilder b;
  const int x = b.input("x", {1, 3, 8, 8});
  const int conv = b.node("Conv", {x, b.ramp("w", {8, 3, 3, 3}, 0.05f)}, {{"pads", ints_attr({1, 1, 1, 1})}});
  const int bn = b.node("BatchNormalization", {conv, b.ramp("s", {8}, 0.3f), b.ramp("t", {8}), b.ramp("m", {8}),
                                               b.constant("v", HostTensor::from_floats(std::vector<float>(8, 1.f), {8}))});
  const int relu = b.node("Relu", {bn});
  b.output(b.node("Add", {b.node("Add", {conv, bn}), relu}));  // conv and bn are read again
  const PlanResult r = plan_and_compare(b, {input_values({1, 3, 8, 8})});
  EXPECT_EQ(r.fuse.batch_norms_folded, 0);
  EXPECT_EQ(r.fuse.activations_fused, 0);
  EXPECT_EQ(kernels(r), (std::vector<std::string>{"Conv", "BatchNormalization", "Relu", "Add", "Add"}));
}

TEST(FuseTest, NothingFusesIntoAGraphOutput) {
  GraphBuilder b;
  const int x = b.input("x", {4, 8});
  const int y = b.node("Gemm", {x, b.ramp("w", {8, 8})});
  b.output(y);
  b.output(b.node("Relu", {y}));
  const PlanResult r = plan_and_compare(b, {input_values({4, 8})});
  EXPECT_EQ(r.fuse.activations_fused, 0);
  EXPECT_EQ(kernels(r), (std::vector<std::string>{"Gemm", "Relu"}));
}

TEST(FuseTest, BatchNormStaysWhenTheConvWeightsAreNotConstant) {
  GraphBuilder b;
  const int x = b.input("x", {1, 3, 6, 6});
  const int w = b.input("w", {8, 3, 3, 3});
  const int conv = b.node("Conv", {x, w});
  b.output(b.node("BatchNormalization", {conv, b.ramp("s", {8}, 0.3f), b.ramp("t", {8}), b.ramp("m", {8}),
                                         b.constant("v", HostTensor::from_floats(std::vector<float>(8, 1.f), {8}))}));
  const PlanResult r = plan_and_compare(b, {input_values({1, 3, 6, 6}), input_values({8, 3, 3, 3}, 0.1f)});
  EXPECT_EQ(r.fuse.batch_norms_folded, 0);
  EXPECT_EQ(kernels(r), (std::vector<std::string>{"Conv", "BatchNormalization"}));
}

TEST(FuseTest, ClipWithARunTimeBoundStaysApart) {
  GraphBuilder b;
  const int x = b.input("x", {3, 4});
  const int hi = b.input("hi", {});
  const int lo = b.constant("lo", HostTensor::scalar_float(0.f));
  b.output(b.node("Clip", {b.node("MatMul", {x, b.ramp("w", {4, 4})}), lo, hi}));
  const PlanResult r = plan_and_compare(b, {input_values({3, 4}), HostTensor::scalar_float(0.3f)});
  EXPECT_EQ(r.fuse.activations_fused, 0);
  EXPECT_EQ(kernels(r), (std::vector<std::string>{"MatMul", "Clip"}));
}

}  // namespace
}  // namespace kiln::testing
