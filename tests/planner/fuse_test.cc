// Fusion passes: BatchNormalization folded into Conv and activations into
// their producer change no output, remove the instructions they absorb,
// and stay away from every case where fusing would be wrong.

#include <gtest/gtest.h>

#include <cmath>

#include "exec/run.h"
#include "kiln/runtime/posix_thread_pool.h"
#include "report/plan_report.h"
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

// Plans `b` with and without fusion, runs both on `inputs` (the fused plan
// on `pool` when given) and expects the same outputs; returns the fused
// plan.
PlanResult plan_and_compare(GraphBuilder& b, const std::vector<HostTensor>& inputs, ThreadPool* pool = nullptr) {
  PlanOptions plain;
  plain.fuse = false;
  const PlanResult unfused = b.plan(plain);
  PlanResult fused = b.plan();
  planner::RunOptions options;
  options.thread_pool = pool;
  const auto want = planner::run_program(unfused.bytes, inputs, {}).outputs;
  const auto got = planner::run_program(fused.bytes, inputs, options).outputs;
  EXPECT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size() && o < got.size(); ++o) {
    EXPECT_EQ(want[o].shape, got[o].shape);
    double scale = 1e-30;
    for (int64_t i = 0; i < want[o].numel(); ++i) scale = std::max(scale, std::fabs(want[o].float_at(i)));
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      if (std::isnan(want[o].float_at(i))) {
        EXPECT_TRUE(std::isnan(got[o].float_at(i))) << "output " << o << " at " << i;
        continue;
      }
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
  return b.node("BatchNormalization",
                {conv, b.ramp("scale", {8}, 0.3f), b.ramp("shift", {8}, 0.1f), b.ramp("mean", {8}, 0.05f),
                 b.constant("var", HostTensor::from_floats({0.5f, 1.f, 1.5f, 2.f, 0.7f, 0.9f, 1.1f, 1.3f}, {8}))},
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
  const int bn =
      b.node("BatchNormalization", {conv, b.ramp("s", {8}, 0.3f), b.ramp("t", {8}), b.ramp("m", {8}),
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

// x -> producer: the producers a gated activation fuses into.
int producer(GraphBuilder& b, const std::string& op, int x) {
  if (op == "Conv") {
    return b.node("Conv", {x, b.ramp("w", {6, 3, 3, 3}, 0.08f), b.ramp("b", {6}, 0.3f)},
                  {{"pads", ints_attr({1, 1, 1, 1})}});
  }
  if (op == "Gemm") return b.node("Gemm", {x, b.ramp("w", {8, 8}, 0.3f), b.ramp("c", {8})});
  if (op == "MatMul") return b.node("MatMul", {x, b.ramp("w", {8, 8}, 0.3f)});
  return b.node("Add", {x, b.ramp("c", {8}, 0.5f)});
}

std::vector<int64_t> producer_input(const std::string& op) {
  return op == "Conv" ? std::vector<int64_t>{1, 3, 7, 7} : std::vector<int64_t>{5, 8};
}

TEST(FuseTest, SiluFusesIntoItsProducer) {
  for (const std::string op : {"Conv", "Gemm", "MatMul", "Add"}) {
    for (bool gate_first : {false, true}) {
      SCOPED_TRACE(op + (gate_first ? ", Mul(sigmoid(x), x)" : ", Mul(x, sigmoid(x))"));
      GraphBuilder b;
      const int x = b.input("x", producer_input(op));
      const int y = producer(b, op, x);
      const int s = b.node("Sigmoid", {y});
      b.output(b.node("Mul", gate_first ? std::vector<int>{s, y} : std::vector<int>{y, s}));
      const PlanResult r = plan_and_compare(b, {input_values(producer_input(op), 4.f)});
      EXPECT_EQ(kernels(r), std::vector<std::string>{op});
      EXPECT_EQ(r.fuse.gated_into_producer, 1);
      EXPECT_EQ(r.fuse.gated_standalone, 0);
      EXPECT_EQ(r.fuse.activations_fused, 1);
      EXPECT_EQ(r.fuse.activations_by_kind.at("Silu"), 1);
      const fb::FusedActivationT* a = activation_of(r, op);
      ASSERT_NE(a, nullptr);
      EXPECT_EQ(a->kind, fb::Activation::SILU);
      // plan.json reports it by kind.
      const std::string json = planner::plan_json(r);
      EXPECT_NE(json.find("\"activations_by_kind\":{\"Silu\":1}"), std::string::npos) << json.substr(0, 400);
      EXPECT_NE(json.find("\"gated_into_producer\":1"), std::string::npos);
    }
  }
}

// The HardSwish patterns exporters write, each fused into a Conv.
TEST(FuseTest, HardSwishPatternsFuseIntoTheirProducer) {
  struct Pattern {
    std::string name;
    int (*build)(GraphBuilder& b, int y);
    float alpha, beta;
  };
  const std::vector<Pattern> patterns = {
      {"Mul(x, HardSigmoid(x))",
       [](GraphBuilder& b, int y) {
         return b.node("Mul", {y, b.node("HardSigmoid", {y}, {{"alpha", float_attr(1.f / 6.f)}})});
       },
       1.f / 6.f, 0.5f},
      {"Mul(x, HardSigmoid(x)) with alpha 0.2, beta 0.4",
       [](GraphBuilder& b, int y) {
         return b.node("Mul",
                       {b.node("HardSigmoid", {y}, {{"alpha", float_attr(0.2f)}, {"beta", float_attr(0.4f)}}), y});
       },
       0.2f, 0.4f},
      {"Mul(x, Clip(x + 3, 0, 6) / 6)",
       [](GraphBuilder& b, int y) {
         const int clip = b.node("Clip", {b.node("Add", {y, b.constant("three", HostTensor::scalar_float(3.f))}),
                                          b.constant("lo", HostTensor::scalar_float(0.f)),
                                          b.constant("hi", HostTensor::scalar_float(6.f))});
         return b.node("Mul", {y, b.node("Div", {clip, b.constant("six", HostTensor::scalar_float(6.f))})});
       },
       1.f / 6.f, 0.5f},
      {"Mul(x, Clip(3 + x, 0, 6)) / 6",
       [](GraphBuilder& b, int y) {
         const int clip = b.node("Clip", {b.node("Add", {b.constant("three", HostTensor::scalar_float(3.f)), y}),
                                          b.constant("lo", HostTensor::scalar_float(0.f)),
                                          b.constant("hi", HostTensor::scalar_float(6.f))});
         return b.node("Div", {b.node("Mul", {clip, y}), b.constant("six", HostTensor::scalar_float(6.f))});
       },
       1.f / 6.f, 0.5f},
      {"Mul(x, Clip(x + 3, 0, 6) * (1/6))",
       [](GraphBuilder& b, int y) {
         const int clip = b.node("Clip", {b.node("Add", {y, b.constant("three", HostTensor::scalar_float(3.f))}),
                                          b.constant("lo", HostTensor::scalar_float(0.f)),
                                          b.constant("hi", HostTensor::scalar_float(6.f))});
         return b.node("Mul", {y, b.node("Mul", {b.constant("sixth", HostTensor::scalar_float(1.f / 6.f)), clip})});
       },
       1.f / 6.f, 0.5f},
  };
  for (const Pattern& pattern : patterns) {
    SCOPED_TRACE(pattern.name);
    GraphBuilder b;
    const int x = b.input("x", {1, 3, 7, 7});
    b.output(pattern.build(b, producer(b, "Conv", x)));
    const PlanResult r = plan_and_compare(b, {input_values({1, 3, 7, 7}, 6.f)});
    EXPECT_EQ(kernels(r), std::vector<std::string>{"Conv"});
    EXPECT_EQ(r.fuse.gated_into_producer, 1);
    EXPECT_EQ(r.fuse.activations_by_kind.at("HardSwish"), 1);
    const fb::FusedActivationT* a = activation_of(r, "Conv");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->kind, fb::Activation::HARD_SWISH);
    EXPECT_FLOAT_EQ(a->alpha, pattern.alpha);
    EXPECT_FLOAT_EQ(a->beta, pattern.beta);
  }
}

// Where no producer can take the gate (a graph input, a node without fused
// activations, x read elsewhere), the pattern still becomes one pass.
TEST(FuseTest, GatedPatternsWithoutAProducerBecomeOneElementwisePass) {
  {
    SCOPED_TRACE("SiLU of a graph input");
    GraphBuilder b;
    const int x = b.input("x", {3, 50});
    b.output(b.node("Mul", {x, b.node("Sigmoid", {x})}));
    const PlanResult r = plan_and_compare(b, {input_values({3, 50}, 12.f)});
    EXPECT_EQ(kernels(r), std::vector<std::string>{"Silu"});
    EXPECT_EQ(r.fuse.gated_standalone, 1);
    EXPECT_EQ(r.fuse.gated_into_producer, 0);
  }
  {
    SCOPED_TRACE("HardSwish pattern after MaxPool, x read again");
    GraphBuilder b;
    const int x = b.input("x", {1, 2, 6, 6});
    const int pool = b.node("MaxPool", {x}, {{"kernel_shape", ints_attr({2, 2})}});
    const int clip = b.node(
        "Clip", {b.node("Add", {pool, b.constant("three", HostTensor::scalar_float(3.f))}),
                 b.constant("lo", HostTensor::scalar_float(0.f)), b.constant("hi", HostTensor::scalar_float(6.f))});
    const int hs = b.node("Div", {b.node("Mul", {pool, clip}), b.constant("six", HostTensor::scalar_float(6.f))});
    b.output(b.node("Add", {hs, pool}));
    const PlanResult r = plan_and_compare(b, {input_values({1, 2, 6, 6}, 5.f)});
    EXPECT_EQ(kernels(r), (std::vector<std::string>{"Pool", "HardSwish", "Add"}));
    EXPECT_EQ(r.fuse.gated_standalone, 1);
  }
  {
    SCOPED_TRACE("SiLU of a Conv whose output is read again");
    GraphBuilder b;
    const int x = b.input("x", {1, 3, 7, 7});
    const int y = producer(b, "Conv", x);
    const int silu = b.node("Mul", {y, b.node("Sigmoid", {y})});
    b.output(b.node("Sub", {silu, y}));
    const PlanResult r = plan_and_compare(b, {input_values({1, 3, 7, 7}, 3.f)});
    EXPECT_EQ(kernels(r), (std::vector<std::string>{"Conv", "Silu", "Sub"}));
  }
}

TEST(FuseTest, GatedPatternsStayWhenAnIntermediateIsReadElsewhere) {
  {
    SCOPED_TRACE("the sigmoid is a graph output");
    GraphBuilder b;
    const int x = b.input("x", {4, 8});
    const int y = producer(b, "Gemm", x);
    const int s = b.node("Sigmoid", {y});
    b.output(b.node("Mul", {y, s}));
    b.output(s);
    const PlanResult r = plan_and_compare(b, {input_values({4, 8})});
    EXPECT_EQ(r.fuse.gated_into_producer + r.fuse.gated_standalone, 0);
    EXPECT_EQ(kernels(r), (std::vector<std::string>{"Gemm", "Sigmoid", "Mul"}));
  }
  {
    SCOPED_TRACE("the sigmoid reads something else");
    GraphBuilder b;
    const int x = b.input("x", {4, 8});
    const int y = producer(b, "Gemm", x);
    b.output(b.node("Mul", {y, b.node("Sigmoid", {x})}));
    const PlanResult r = plan_and_compare(b, {input_values({4, 8})});
    EXPECT_EQ(r.fuse.gated_into_producer + r.fuse.gated_standalone, 0);
  }
  {
    SCOPED_TRACE("a clip that is not 0..h with a division by h");
    GraphBuilder b;
    const int x = b.input("x", {4, 8});
    const int y = producer(b, "Gemm", x);
    const int clip = b.node(
        "Clip", {b.node("Add", {y, b.constant("three", HostTensor::scalar_float(3.f))}),
                 b.constant("lo", HostTensor::scalar_float(0.f)), b.constant("hi", HostTensor::scalar_float(6.f))});
    b.output(b.node("Mul", {y, b.node("Div", {clip, b.constant("five", HostTensor::scalar_float(5.f))})}));
    const PlanResult r = plan_and_compare(b, {input_values({4, 8}, 5.f)});
    EXPECT_EQ(r.fuse.gated_into_producer + r.fuse.gated_standalone, 0);
  }
}

// Only nodes on the CPU fuse: with the pattern on a Vulkan device nothing
// changes there (its shaders take SILU too, but the planner fuses on the CPU).
TEST(FuseTest, GatedPatternsOnAnotherDeviceStayApart) {
  GraphBuilder b;
  const int x = b.input("x", {1, 3, 7, 7});
  const int y = producer(b, "Conv", x);
  b.output(b.node("Mul", {y, b.node("Sigmoid", {y})}));
  PlanOptions options;
  options.targets = "vulkan:0,cpu";
  const PlanResult r = b.plan(options);
  EXPECT_EQ(r.fuse.gated_into_producer + r.fuse.gated_standalone, 0);
  EXPECT_EQ(r.fuse.activations_fused, 0);
}

// Squeeze-and-excitation as torchvision writes it (mobilenet_v3): the gate's
// activations fuse into the two 1x1 convolutions, the scaling stays one Mul.
TEST(FuseTest, SqueezeExcitationGateFusesIntoItsConvolutions) {
  GraphBuilder b;
  const int x = b.input("x", {1, 8, 5, 5});
  const int pooled = b.node("GlobalAveragePool", {x});
  const int fc1 = b.node("Conv", {pooled, b.ramp("w1", {4, 8, 1, 1}, 0.2f), b.ramp("b1", {4})});
  const int fc2 = b.node("Conv", {b.node("Relu", {fc1}), b.ramp("w2", {8, 4, 1, 1}, 0.2f), b.ramp("b2", {8})});
  const int gate = b.node("HardSigmoid", {fc2}, {{"alpha", float_attr(1.f / 6.f)}});
  b.output(b.node("Mul", {x, gate}));
  const PlanResult r = plan_and_compare(b, {input_values({1, 8, 5, 5}, 2.f)});
  EXPECT_EQ(kernels(r), (std::vector<std::string>{"GlobalAveragePool", "Conv", "Conv", "Mul"}));
  EXPECT_EQ(r.fuse.activations_by_kind.at("Relu"), 1);
  EXPECT_EQ(r.fuse.activations_by_kind.at("HardSigmoid"), 1);
}

// GELU as PyTorch exports it (and with the 0.5 applied to x first): fused
// into a MatMul that took its bias, or one Gelu pass over a graph input.
TEST(FuseTest, GeluFusesIntoItsProducerOrBecomesOnePass) {
  for (bool half_first : {false, true}) {
    for (bool producer_present : {true, false}) {
      SCOPED_TRACE(std::string(half_first ? "Mul(Mul(x, 0.5), 1 + erf)" : "Mul(Mul(x, 1 + erf), 0.5)") +
                   (producer_present ? ", after MatMul + bias" : ", of a graph input"));
      GraphBuilder b;
      const int in = b.input("x", {3, 8});
      const int x = producer_present
                        ? b.node("Add", {b.node("MatMul", {in, b.ramp("w", {8, 8}, 0.3f)}), b.ramp("bias", {8}, 0.2f)})
                        : in;
      const int erf = b.node("Erf", {b.node("Div", {x, b.constant("sqrt2", HostTensor::scalar_float(1.4142135f))})});
      const int one_plus = b.node("Add", {erf, b.constant("one", HostTensor::scalar_float(1.f))});
      const int half = b.constant("half", HostTensor::scalar_float(0.5f));
      b.output(half_first ? b.node("Mul", {b.node("Mul", {x, half}), one_plus})
                          : b.node("Mul", {b.node("Mul", {x, one_plus}), half}));
      const PlanResult r = plan_and_compare(b, {input_values({3, 8}, 3.f)});
      if (producer_present) {
        EXPECT_EQ(kernels(r), std::vector<std::string>{"MatMul"});
        EXPECT_EQ(r.fuse.biases_fused, 1);
        EXPECT_EQ(r.fuse.activations_by_kind.at("Gelu"), 1);
        ASSERT_NE(activation_of(r, "MatMul"), nullptr);
        EXPECT_EQ(activation_of(r, "MatMul")->kind, fb::Activation::GELU);
      } else {
        EXPECT_EQ(kernels(r), std::vector<std::string>{"Gelu"});
        EXPECT_EQ(r.fuse.gated_standalone, 1);
      }
    }
  }
}

TEST(FuseTest, GeluWithOtherConstantsStaysApart) {
  GraphBuilder b;
  const int x = b.input("x", {3, 8});
  const int erf = b.node("Erf", {b.node("Div", {x, b.constant("two", HostTensor::scalar_float(2.f))})});
  const int one_plus = b.node("Add", {erf, b.constant("one", HostTensor::scalar_float(1.f))});
  b.output(b.node("Mul", {b.node("Mul", {x, one_plus}), b.constant("half", HostTensor::scalar_float(0.5f))}));
  const PlanResult r = plan_and_compare(b, {input_values({3, 8}, 3.f)});
  EXPECT_EQ(r.fuse.gated_into_producer + r.fuse.gated_standalone, 0);
  EXPECT_EQ(kernels(r).size(), 5u);
}

// x -> BatchNormalization (c channels, per-channel statistics, variance
// from 0.25 to 2, some scales negative) -> [Relu] -> 1x1 Conv (m outputs).
int bn_relu_conv(GraphBuilder& b, int x, int64_t c, int64_t m, bool relu, bool bias) {
  std::vector<float> var(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i) var[static_cast<size_t>(i)] = 0.25f + 0.07f * static_cast<float>(i % 26);
  const int bn = b.node("BatchNormalization",
                        {x, b.ramp("bn_s", {c}, 0.4f), b.ramp("bn_t", {c}, 0.3f), b.ramp("bn_m", {c}, 0.2f),
                         b.constant("bn_v", HostTensor::from_floats(var, {c}))},
                        {{"epsilon", float_attr(1e-3f)}});
  const int fed = relu ? b.node("Relu", {bn}) : bn;
  std::vector<int> inputs = {fed, b.ramp("conv_w", {m, c, 1, 1}, 0.05f)};
  if (bias) inputs.push_back(b.ramp("conv_b", {m}, 0.1f));
  return b.node("Conv", inputs);
}

const fb::ConvParamsT* conv_params(const PlanResult& r) {
  for (const LInstruction& ins : r.program.methods[0].instructions) {
    if (ins.op == "Conv") return ins.params.AsConvParams();
  }
  return nullptr;
}

// Pre-activation blocks (DenseNet, ResNet v2): the normalised copy of the
// input is never written; the Conv applies the map as it packs its input.
// Planes of 1, 7x7 and 20x20 positions, output channels on both sides of
// the product's read-in-place limit (96), NaN and a large value in the input
// (Relu maps NaN to 0 fused or not), one thread and three.
TEST(FuseTest, BatchNormAndReluAheadOfAPointwiseConvFuseIntoItsInput) {
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(3), Error::kOk);
  struct Case {
    int64_t c, m, h, w;
  };
  for (const Case& k : {Case{24, 8, 1, 1}, Case{40, 128, 7, 7}, Case{16, 100, 20, 20}, Case{300, 12, 5, 3}}) {
    for (bool relu : {true, false}) {
      for (bool bias : {true, false}) {
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), static_cast<ThreadPool*>(&pool)}) {
          SCOPED_TRACE(::testing::Message()
                       << "c " << k.c << " m " << k.m << " plane " << k.h << "x" << k.w << (relu ? " relu" : "")
                       << (bias ? " bias" : "") << (p != nullptr ? " 3 threads" : ""));
          GraphBuilder b;
          const int x = b.input("x", {2, k.c, k.h, k.w});
          b.output(bn_relu_conv(b, x, k.c, k.m, relu, bias));
          HostTensor in = input_values({2, k.c, k.h, k.w}, 2.f);
          in.data<float>()[3] = std::nanf("");
          in.data<float>()[in.numel() - 1] = -1e4f;
          const PlanResult r = plan_and_compare(b, {in}, p);
          EXPECT_EQ(r.fuse.input_affines_fused, 1);
          EXPECT_EQ(kernels(r), std::vector<std::string>{"Conv"});
          const fb::ConvParamsT* params = conv_params(r);
          ASSERT_NE(params, nullptr);
          EXPECT_EQ(params->input_affine_relu, relu);
        }
      }
    }
  }
}

TEST(FuseTest, BatchNormAheadOfAConvStaysWhereTheMapCannotGoIntoThePacking) {
  const auto bn = [](GraphBuilder& b, int x, int64_t c) {
    return b.node("BatchNormalization", {x, b.ramp("s", {c}, 0.3f), b.ramp("t", {c}), b.ramp("m", {c}),
                                         b.constant("v", HostTensor::from_floats(std::vector<float>(c, 1.f), {c}))});
  };
  {  // a 3x3 kernel (its padding would read the map's zero as a shifted value)
    GraphBuilder b;
    const int x = b.input("x", {1, 8, 6, 6});
    b.output(b.node("Conv", {b.node("Relu", {bn(b, x, 8)}), b.ramp("w", {4, 8, 3, 3}, 0.05f)},
                    {{"pads", ints_attr({1, 1, 1, 1})}}));
    const PlanResult r = plan_and_compare(b, {input_values({1, 8, 6, 6})});
    EXPECT_EQ(r.fuse.input_affines_fused, 0);
    EXPECT_EQ(kernels(r), (std::vector<std::string>{"BatchNormalization", "Relu", "Conv"}));
  }
  {  // stride 2, and padding on a 1x1 kernel
    for (const char* attr : {"strides", "pads"}) {
      GraphBuilder b;
      const int x = b.input("x", {1, 8, 6, 6});
      std::map<std::string, Attribute> attrs;
      attrs[attr] = std::string(attr) == "strides" ? ints_attr({2, 2}) : ints_attr({1, 0, 1, 0});
      b.output(b.node("Conv", {bn(b, x, 8), b.ramp("w", {4, 8, 1, 1}, 0.05f)}, attrs));
      const PlanResult r = plan_and_compare(b, {input_values({1, 8, 6, 6})});
      EXPECT_EQ(r.fuse.input_affines_fused, 0) << attr;
    }
  }
  {  // the normalised value is also read elsewhere, or is a graph output
    for (bool as_output : {false, true}) {
      GraphBuilder b;
      const int x = b.input("x", {1, 8, 4, 4});
      const int y = b.node("Relu", {bn(b, x, 8)});
      b.output(b.node("Conv", {y, b.ramp("w", {4, 8, 1, 1}, 0.05f)}));
      if (as_output) {
        b.output(y);
      } else {
        b.output(b.node("Sigmoid", {y}));
      }
      const PlanResult r = plan_and_compare(b, {input_values({1, 8, 4, 4})});
      EXPECT_EQ(r.fuse.input_affines_fused, 0);
    }
  }
  {  // planned without packing scratch (firmware): nothing packs B
    GraphBuilder b;
    const int x = b.input("x", {1, 8, 4, 4});
    b.output(b.node("Conv", {bn(b, x, 8), b.ramp("w", {4, 8, 1, 1}, 0.05f)}));
    PlanOptions options;
    options.lower.packing_scratch = false;
    const PlanResult r = b.plan(options);
    EXPECT_EQ(r.fuse.input_affines_fused, 0);
  }
}

}  // namespace
}  // namespace kiln::testing
