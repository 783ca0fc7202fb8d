// The random ops (Bernoulli, RandomUniform(Like), RandomNormal(Like)), which
// the ONNX node tests can only check by property: their statistics over
// 100,000 samples, and what the seed decides (kernels/cpu/src/math.cc,
// Random; planner/ops/math_ops.cc).
//
// Each mean is checked within 4 standard errors of its expectation, each
// variance within 4 standard errors of the sample variance.

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "exec/run.h"
#include "pipeline.h"
#include "support/graph_builder.h"

namespace kiln::testing {
namespace {

namespace kp = kiln::planner;

constexpr int64_t kSamples = 100000;

std::vector<HostTensor> run(GraphBuilder& b, const std::vector<HostTensor>& inputs = {}) {
  return kp::run_program(b.plan().bytes, inputs, kp::RunOptions{}).outputs;
}

std::vector<double> values(const HostTensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = t.float_at(i);
  return out;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double variance(const std::vector<double>& v) {
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

HostTensor filled(DType dtype, double p) {
  HostTensor t(dtype, {kSamples});
  for (int64_t i = 0; i < kSamples; ++i) {
    if (dtype == DType::FLOAT32) {
      t.data<float>()[i] = static_cast<float>(p);
    } else {
      t.data<double>()[i] = p;
    }
  }
  return t;
}

TEST(RandomOps, BernoulliMeanIsPWithinFourSigma) {
  for (const double p : {0.3, 0.02, 0.9}) {
    for (const DType dtype : {DType::FLOAT32, DType::FLOAT64}) {
      GraphBuilder b;
      const int x = b.input("p", {kSamples}, dtype);
      b.output(b.node("Bernoulli", {x}, {{"seed", float_attr(5.f)}}));
      const std::vector<double> v = values(run(b, {filled(dtype, p)})[0]);
      for (double e : v) ASSERT_TRUE(e == 0.0 || e == 1.0) << e;
      const double sigma = std::sqrt(p * (1 - p) / kSamples);
      EXPECT_NEAR(mean(v), p, 4 * sigma) << "p " << p;
    }
  }
}

TEST(RandomOps, BernoulliTakesEachElementsOwnProbabilityAndOutputDtype) {
  // p = 0 and p = 1 are certain; the output dtype comes from the attribute.
  GraphBuilder b;
  const int x = b.input("p", {6}, DType::FLOAT32);
  b.output(b.node("Bernoulli", {x}, {{"dtype", int_attr(7)}}));  // int64
  HostTensor p = HostTensor::from_floats({0, 1, 0, 1, 1, 0}, {6});
  const HostTensor y = run(b, {p})[0];
  ASSERT_EQ(y.dtype, DType::INT64);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(y.data<int64_t>()[i], static_cast<int64_t>(p.data<float>()[i])) << i;
}

TEST(RandomOps, UniformMeanAndVarianceWithinFourSigma) {
  const double low = -2, high = 3, width = high - low;
  for (const DType dtype : {DType::FLOAT32, DType::FLOAT64}) {
    GraphBuilder b;
    b.output(b.node("RandomUniform", {},
                    {{"shape", ints_attr({kSamples})},
                     {"low", float_attr(-2.f)},
                     {"high", float_attr(3.f)},
                     {"dtype", int_attr(dtype == DType::FLOAT32 ? 1 : 11)},
                     {"seed", float_attr(1.f)}}));
    const HostTensor y = run(b)[0];
    ASSERT_EQ(y.dtype, dtype);
    const std::vector<double> v = values(y);
    for (double e : v) ASSERT_TRUE(e >= low && e < high) << e;
    const double var = width * width / 12, mu4 = std::pow(width, 4) / 80;
    EXPECT_NEAR(mean(v), (low + high) / 2, 4 * std::sqrt(var / kSamples));
    EXPECT_NEAR(variance(v), var, 4 * std::sqrt((mu4 - var * var) / kSamples));
  }
}

TEST(RandomOps, UniformLikeTakesTheInputsShapeAndStaysInRangeInFloat16) {
  GraphBuilder b;
  const int x = b.input("x", {2, 500}, DType::FLOAT32);
  b.output(b.node("RandomUniformLike", {x},
                  {{"low", float_attr(0.5f)}, {"high", float_attr(0.75f)}, {"dtype", int_attr(10)}}));  // float16
  const HostTensor y = run(b, {HostTensor(DType::FLOAT32, {2, 500})})[0];
  ASSERT_EQ(y.dtype, DType::FLOAT16);
  ASSERT_EQ(y.shape, (std::vector<int64_t>{2, 500}));
  for (double e : values(y)) ASSERT_TRUE(e >= 0.5 && e < 0.75) << e;
}

TEST(RandomOps, NormalMeanAndVarianceWithinFourSigma) {
  const double mu = 1, scale = 2;
  for (const char* op : {"RandomNormal", "RandomNormalLike"}) {
    GraphBuilder b;
    std::vector<int> inputs;
    std::map<std::string, Attribute> attrs = {
        {"mean", float_attr(1.f)}, {"scale", float_attr(2.f)}, {"seed", float_attr(3.f)}};
    if (std::string(op) == "RandomNormal") {
      attrs["shape"] = ints_attr({kSamples});
    } else {
      inputs.push_back(b.input("x", {kSamples}, DType::FLOAT64));
    }
    b.output(b.node(op, inputs, attrs));
    const HostTensor y = std::string(op) == "RandomNormal" ? run(b)[0] : run(b, {filled(DType::FLOAT64, 0)})[0];
    const std::vector<double> v = values(y);
    const double var = scale * scale;
    EXPECT_NEAR(mean(v), mu, 4 * std::sqrt(var / kSamples)) << op;
    EXPECT_NEAR(variance(v), var, 4 * std::sqrt(2 * var * var / kSamples)) << op;
  }
}

// A RandomUniform of 1,000 floats with the given attributes, run `runs`
// times on one plan.
std::vector<HostTensor> uniform_runs(std::map<std::string, Attribute> attrs, int runs) {
  GraphBuilder b;
  attrs["shape"] = ints_attr({1000});
  b.output(b.node("RandomUniform", {}, attrs));
  const std::string program = b.plan().bytes;
  std::vector<HostTensor> out;
  for (int r = 0; r < runs; ++r) out.push_back(kp::run_program(program, {}, kp::RunOptions{}).outputs[0]);
  return out;
}

TEST(RandomOps, TheSeedDecidesTheValues) {
  const std::vector<HostTensor> a = uniform_runs({{"seed", float_attr(42.f)}}, 2);
  const std::vector<HostTensor> again = uniform_runs({{"seed", float_attr(42.f)}}, 1);
  const std::vector<HostTensor> other = uniform_runs({{"seed", float_attr(43.f)}}, 1);
  EXPECT_EQ(a[0].bytes, a[1].bytes) << "two runs of one program";
  EXPECT_EQ(a[0].bytes, again[0].bytes) << "two plans with the same seed";
  EXPECT_NE(a[0].bytes, other[0].bytes) << "different seeds";
  int equal = 0;
  for (int64_t i = 0; i < 1000; ++i) equal += a[0].data<float>()[i] == other[0].data<float>()[i];
  EXPECT_LT(equal, 5);
}

TEST(RandomOps, WithoutASeedTheKeyComesFromTheOutputsName) {
  // The same model plans to the same values; two nodes draw different ones.
  const std::vector<HostTensor> a = uniform_runs({}, 2);
  const std::vector<HostTensor> again = uniform_runs({}, 1);
  EXPECT_EQ(a[0].bytes, a[1].bytes);
  EXPECT_EQ(a[0].bytes, again[0].bytes);
  GraphBuilder b;
  b.output(b.node("RandomUniform", {}, {{"shape", ints_attr({1000})}}));
  b.output(b.node("RandomUniform", {}, {{"shape", ints_attr({1000})}}));
  const std::vector<HostTensor> two = run(b);
  EXPECT_NE(two[0].bytes, two[1].bytes);
}

TEST(RandomOps, RandomValuesAreNeverFoldedIntoConstants) {
  GraphBuilder b;
  b.output(b.node("RandomNormal", {}, {{"shape", ints_attr({4, 4})}}));
  const kp::PlanResult plan = b.plan();
  int random = 0;
  for (const kp::LInstruction& ins : plan.program.methods.back().instructions) random += ins.op == "Random";
  EXPECT_EQ(random, 1);
}

}  // namespace
}  // namespace kiln::testing
