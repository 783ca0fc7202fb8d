// The vector element-wise math (kernels/cpu/src/vmath.h) on every
// vector path this processor and KILN_ISA allow: the largest error in units
// in the last place against double precision over dense sweeps and random
// bit patterns stays within what vmath.h states, and the edges (NaN, +-inf,
// signed zeros, denormal inputs and outputs, large magnitudes, every tail
// length) come out as stated. A path that cannot run here is skipped with
// the reason.

#include "vmath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "kiln/kernels/isa.h"

namespace kiln::kernels {
namespace {

double ulp_of(double ref) {
  const float f = static_cast<float>(std::fabs(ref));
  if (f < std::numeric_limits<float>::min()) return std::ldexp(1.0, -149);
  if (std::isinf(f)) return std::ldexp(1.0, 104);  // the last finite float's spacing
  return static_cast<double>(std::nextafter(f, std::numeric_limits<float>::infinity()) - f);
}

struct Case {
  MathOp op;
  const char* name;
  double (*ref)(double);
  double max_ulp;
  double abs_tol;        // on top of max_ulp (functions with cancellation)
  double lo, hi;         // the sweep
  double abs_tol_x = 0;  // and this times |x| (x times a function with an absolute bound)
};

// The tolerance of `c` at x: max_ulp of ref past the absolute parts.
double excess_ulps(const Case& c, double x, double got, double ref) {
  const double err = got == static_cast<float>(ref) ? 0.0 : std::fabs(got - ref);
  return std::max(0.0, err - c.abs_tol - c.abs_tol_x * std::fabs(x)) / ulp_of(ref);
}

double ref_exp(double x) { return std::exp(x); }
double ref_log(double x) { return std::log(x); }
double ref_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double ref_silu(double x) { return x * ref_sigmoid(x); }
double ref_tanh(double x) { return std::tanh(x); }
double ref_erf(double x) { return std::erf(x); }
double ref_gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double ref_gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
// With alpha as the float the kernel gets (1/6 rounded).
double ref_hard_sigmoid(double x) { return std::min(1.0, std::max(0.0, static_cast<double>(1.f / 6.f) * x + 0.5)); }
double ref_hard_swish(double x) { return x * ref_hard_sigmoid(x); }
double ref_softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }
double ref_relu(double x) { return x > 0 ? x : 0.0; }
double ref_leaky(double x) { return x >= 0 ? x : static_cast<double>(0.1f) * x; }

const Case kCases[] = {
    {MathOp::kExp, "exp", ref_exp, 2, 0, -104, 89},
    {MathOp::kLog, "log", ref_log, 1, 0, 1e-6, 1e6},
    // The quotient's error is absolute below 1/2 (vmath.h).
    {MathOp::kSigmoid, "sigmoid", ref_sigmoid, 0, 2e-7, -100, 100},
    {MathOp::kSilu, "silu", ref_silu, 1, 0, -100, 100, 2e-7},
    {MathOp::kTanh, "tanh", ref_tanh, 6, 0, -12, 12},
    {MathOp::kErf, "erf", ref_erf, 7, 0, -6, 6},
    {MathOp::kGelu, "gelu", ref_gelu, 1, 0, -12, 12, 2e-7},
    {MathOp::kGeluTanh, "gelu_tanh", ref_gelu_tanh, 1, 0, -12, 12, 3e-7},
    {MathOp::kHardSigmoid, "hard_sigmoid", ref_hard_sigmoid, 1, 0, -8, 8},
    {MathOp::kHardSwish, "hard_swish", ref_hard_swish, 2, 0, -8, 8},
    {MathOp::kSoftplus, "softplus", ref_softplus, 4, 0, -100, 40},
    {MathOp::kLeakyRelu, "leaky_relu", ref_leaky, 1, 0, -10, 10},
    {MathOp::kRelu, "relu", ref_relu, 0, 0, -10, 10},
};

float alpha_of(MathOp op) {
  return op == MathOp::kHardSigmoid || op == MathOp::kHardSwish ? 1.f / 6.f : op == MathOp::kLeakyRelu ? 0.1f : 0.f;
}
float beta_of(MathOp op) { return op == MathOp::kHardSigmoid || op == MathOp::kHardSwish ? 0.5f : 0.f; }

// Whether the vector path (1 = AVX2, 2 = AVX-512, 3 = NEON) may run here.
bool path_on(int path) {
  const Isa a = active_isa();
  if (path == 3) return a == Isa::kNeon;
  return (a == Isa::kAvx2 || a == Isa::kAvx512) && static_cast<int>(a) >= path;
}

class VectorMathTest : public ::testing::TestWithParam<std::tuple<int, Case>> {
 protected:
  void SetUp() override {
    path_ = std::get<0>(GetParam());
    if (!path_on(path_)) {
      GTEST_SKIP() << "the "
                   << (path_ == 3   ? "neon"
                       : path_ == 2 ? "avx512"
                                    : "avx2")
                   << " path is off here (processor " << isa_name(processor_isa()) << ", active "
                   << isa_name(active_isa()) << ")";
    }
  }
  std::vector<float> run(const Case& c, const std::vector<float>& in) {
    std::vector<float> out(in.size(), 12345.f);
    EXPECT_TRUE(vector_math_on(path_, c.op, in.data(), out.data(), static_cast<int64_t>(in.size()), alpha_of(c.op),
                               beta_of(c.op)));
    return out;
  }
  int path_ = 0;
};

TEST_P(VectorMathTest, WithinStatedUlp) {
  const Case& c = std::get<1>(GetParam());
  std::vector<float> in;
  const int kSweep = 200000;
  for (int i = 0; i <= kSweep; ++i) in.push_back(static_cast<float>(c.lo + (c.hi - c.lo) * i / kSweep));
  // Random bit patterns inside the sweep's range, and small magnitudes.
  uint32_t s = 12345;
  for (int i = 0; i < 200000; ++i) {
    s = s * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &s, 4);
    if (std::isfinite(f) && f >= c.lo && f <= c.hi && (c.op != MathOp::kLog || f > 0)) in.push_back(f);
  }
  const std::vector<float> out = run(c, in);
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    // A result that rounds to the same float (inf past FLT_MAX included) is exact.
    const double ulps = excess_ulps(c, in[i], out[i], c.ref(in[i]));
    if (ulps > worst || std::isnan(out[i])) {
      worst = std::isnan(out[i]) ? 1e30 : ulps;
      worst_x = in[i];
    }
  }
  EXPECT_LE(worst, c.max_ulp) << c.name << " worst at x = " << worst_x;
  RecordProperty("max_ulp", std::to_string(worst));
  std::printf("  %s path %d: max error %.2f ulp (stated %.0f)\n", c.name, path_, worst, c.max_ulp);
}

TEST_P(VectorMathTest, EveryTailLengthAndInPlace) {
  const Case& c = std::get<1>(GetParam());
  for (int n = 0; n <= 40; ++n) {
    std::vector<float> in(static_cast<size_t>(n) + 1, 7.f);
    for (int i = 0; i < n; ++i) in[static_cast<size_t>(i)] = static_cast<float>(0.37 * (i - 20) + 0.5);
    std::vector<float> out(in.size(), 12345.f);
    ASSERT_TRUE(vector_math_on(path_, c.op, in.data(), out.data(), n, alpha_of(c.op), beta_of(c.op)));
    EXPECT_EQ(out[static_cast<size_t>(n)], 12345.f) << c.name << ": wrote past n = " << n;
    std::vector<float> same = in;
    ASSERT_TRUE(vector_math_on(path_, c.op, same.data(), same.data(), n, alpha_of(c.op), beta_of(c.op)));
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(std::memcmp(&same[static_cast<size_t>(i)], &out[static_cast<size_t>(i)], 4), 0)
          << c.name << " in place differs at " << i;
    }
  }
}

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kDenorm = 1e-40f;

float one(int path, MathOp op, float x, float alpha = 0.f, float beta = 0.f) {
  float in[3] = {x, x, x}, out[3];
  EXPECT_TRUE(vector_math_on(path, op, in, out, 3, alpha, beta));
  return out[1];
}

TEST_P(VectorMathTest, Edges) {
  const Case& c = std::get<1>(GetParam());
  const MathOp op = c.op;
  const float a = alpha_of(op), b = beta_of(op);
  if (op == MathOp::kRelu) {
    EXPECT_EQ(one(path_, op, kNaN, a, b), 0.f) << "relu(NaN) is 0, as the scalar kernel gives";
  } else {
    EXPECT_TRUE(std::isnan(one(path_, op, kNaN, a, b))) << c.name << "(NaN)";
  }
  // +-inf, the largest finite floats and denormals against the reference
  // (NaN where the function has no value there).
  for (float x : {kInf, -kInf, 3.4e38f, -3.4e38f, 1e30f, -1e30f, kDenorm, -kDenorm, 1.4e-45f, 0.f, -0.f, 1e-30f,
                  -1e-30f, 88.72f, 88.73f, -87.5f, -103.f, -104.5f}) {
    if (op == MathOp::kLog && x < 0) {
      EXPECT_TRUE(std::isnan(one(path_, op, x))) << "log(" << x << ")";
      continue;
    }
    const double ref = c.ref(x);
    const float got = one(path_, op, x, a, b);
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(got)) << c.name << "(" << x << ") = " << got;
    } else if (std::isinf(ref) || std::fabs(ref) > 3.4028234e38) {
      EXPECT_EQ(got, static_cast<float>(ref)) << c.name << "(" << x << ")";
    } else {
      EXPECT_LE(excess_ulps(c, x, got, ref), c.max_ulp) << c.name << "(" << x << ") = " << got << ", expected " << ref;
    }
  }
}

TEST(VectorMathEdges, ExpAndLogAtTheirLimits) {
  for (int path : {1, 2, 3}) {
    if (!path_on(path)) continue;
    EXPECT_EQ(one(path, MathOp::kExp, kInf), kInf);
    EXPECT_EQ(one(path, MathOp::kExp, -kInf), 0.f);
    EXPECT_EQ(one(path, MathOp::kExp, 89.f), kInf);
    EXPECT_EQ(one(path, MathOp::kExp, 0.f), 1.f);
    // Denormal results: exp(-100) = 3.72e-44, about 26.5 times the smallest denormal.
    EXPECT_EQ(one(path, MathOp::kExp, -100.f), static_cast<float>(std::exp(-100.0)));
    EXPECT_EQ(one(path, MathOp::kLog, 0.f), -kInf);
    EXPECT_EQ(one(path, MathOp::kLog, -0.f), -kInf);
    EXPECT_EQ(one(path, MathOp::kLog, kInf), kInf);
    EXPECT_EQ(one(path, MathOp::kLog, 1.f), 0.f);
    EXPECT_EQ(one(path, MathOp::kLog, 1.4e-45f), static_cast<float>(std::log(static_cast<double>(1.4e-45f))));
    EXPECT_EQ(one(path, MathOp::kSigmoid, kInf), 1.f);
    EXPECT_EQ(one(path, MathOp::kSigmoid, -kInf), 0.f);
    EXPECT_EQ(one(path, MathOp::kTanh, kInf), 1.f);
    EXPECT_EQ(one(path, MathOp::kTanh, -kInf), -1.f);
    EXPECT_EQ(one(path, MathOp::kErf, kInf), 1.f);
    EXPECT_EQ(one(path, MathOp::kErf, -kInf), -1.f);
    EXPECT_EQ(one(path, MathOp::kGelu, kInf), kInf);
    EXPECT_EQ(one(path, MathOp::kHardSwish, kInf, 1.f / 6.f, 0.5f), kInf);
    EXPECT_EQ(one(path, MathOp::kSoftplus, kInf), kInf);
    EXPECT_EQ(one(path, MathOp::kSoftplus, -kInf), 0.f);
    // Signs of zero survive the odd functions.
    EXPECT_TRUE(std::signbit(one(path, MathOp::kTanh, -0.f)));
    EXPECT_TRUE(std::signbit(one(path, MathOp::kErf, -0.f)));
  }
}

// Inputs for the clamped quotients' tests: 0 to `top` in steps of `step`,
// the 64 floats either side of each clamp point, the `extra` values, and
// the negatives of them all.
std::vector<float> quotient_inputs(float top, float step, std::initializer_list<float> clamps,
                                   std::initializer_list<float> extra) {
  std::vector<float> xs;
  for (float x = 0.f; x <= top; x += step) xs.push_back(x);
  for (float x : clamps) {
    float up = x, down = x;
    for (int i = 0; i < 64; ++i) {
      up = std::nextafter(up, kInf);
      down = std::nextafter(down, 0.f);
      xs.push_back(up);
      xs.push_back(down);
    }
  }
  for (float x : extra) xs.push_back(x);
  const size_t half = xs.size();
  for (size_t i = 0; i < half; ++i) xs.push_back(-xs[i]);
  return xs;
}

// Sigmoid and tanh are one clamped quotient (vmath.h): at and past the
// clamp points they reach their limits exactly and never leave [0, 1] and
// [-1, 1]; where sigmoid is at least 1/2 its error is relative (4 ulp).
TEST(VectorMathEdges, SigmoidAndTanhQuotients) {
  const std::vector<float> xs = quotient_inputs(24.f, 1.f / 1024, {9.02f, 9.25f, 18.04f, 18.5f},
                                                {1e30f, 3.4e38f, kInf, kDenorm, 1.4e-45f, 1e-30f});
  std::vector<float> s(xs.size()), t(xs.size());
  for (int path : {1, 2, 3}) {
    if (!path_on(path)) continue;
    const auto n = static_cast<int64_t>(xs.size());
    ASSERT_TRUE(vector_math_on(path, MathOp::kSigmoid, xs.data(), s.data(), n));
    ASSERT_TRUE(vector_math_on(path, MathOp::kTanh, xs.data(), t.data(), n));
    double worst = 0, worst_abs = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const float x = xs[i];
      ASSERT_TRUE(s[i] >= 0.f && s[i] <= 1.f) << "sigmoid(" << x << ") = " << s[i] << " on path " << path;
      ASSERT_TRUE(t[i] >= -1.f && t[i] <= 1.f) << "tanh(" << x << ") = " << t[i] << " on path " << path;
      if (std::fabs(x) >= 9.25f) {
        EXPECT_EQ(t[i], x > 0 ? 1.f : -1.f) << "tanh(" << x << ")";
      }
      if (std::fabs(x) >= 18.5f) {
        EXPECT_EQ(s[i], x > 0 ? 1.f : 0.f) << "sigmoid(" << x << ")";
      }
      const double ref = ref_sigmoid(x);
      worst_abs = std::max(worst_abs, std::fabs(s[i] - ref));
      if (x >= 0.f) worst = std::max(worst, std::fabs(s[i] - ref) / ulp_of(ref));
      // Tiny inputs: x P(0) / Q(0) = x, exact (denormals included), signs kept.
      if (std::fabs(x) <= 1e-30f) {
        EXPECT_EQ(std::memcmp(&t[i], &x, 4), 0) << "tanh(" << x << ") = " << t[i];
        EXPECT_EQ(s[i], 0.5f) << "sigmoid(" << x << ")";
      }
    }
    EXPECT_LE(worst, 4.0) << "sigmoid for x >= 0 on path " << path;
    EXPECT_LE(worst_abs, 2e-7) << "sigmoid on path " << path;
    std::printf("  sigmoid path %d: max error %.2f ulp for x >= 0, %.3g absolute\n", path, worst, worst_abs);
    EXPECT_EQ(one(path, MathOp::kSigmoid, 0.f), 0.5f);
    EXPECT_EQ(one(path, MathOp::kSigmoid, -0.f), 0.5f);
    EXPECT_TRUE(std::signbit(one(path, MathOp::kSilu, -0.f)));
    EXPECT_TRUE(std::isnan(one(path, MathOp::kSilu, -kInf))) << "-inf times sigmoid(-inf) = 0, as the reference";
    EXPECT_EQ(one(path, MathOp::kSilu, kInf), kInf);
    EXPECT_EQ(one(path, MathOp::kGeluTanh, kInf), kInf);
    EXPECT_TRUE(std::signbit(one(path, MathOp::kGeluTanh, -1e30f))) << "-1e30 times 0";
  }
}

// erf and the erf GELU's Phi are quotients too: exact limits from their
// clamp points on (erf +-1 from 3.92, GELU -0 and x from 5.75), erf within
// [-1, 1] and x Phi(x) between x and 0.
TEST(VectorMathEdges, ErfAndGeluQuotients) {
  const std::vector<float> xs = quotient_inputs(8.f, 1.f / 4096, {3.92f, 5.75f}, {1e30f, 3.4e38f, kDenorm, 1e-30f});
  std::vector<float> e(xs.size()), g(xs.size());
  for (int path : {1, 2, 3}) {
    if (!path_on(path)) continue;
    const auto n = static_cast<int64_t>(xs.size());
    ASSERT_TRUE(vector_math_on(path, MathOp::kErf, xs.data(), e.data(), n));
    ASSERT_TRUE(vector_math_on(path, MathOp::kGelu, xs.data(), g.data(), n));
    for (size_t i = 0; i < xs.size(); ++i) {
      const float x = xs[i];
      ASSERT_TRUE(e[i] >= -1.f && e[i] <= 1.f) << "erf(" << x << ") = " << e[i] << " on path " << path;
      ASSERT_TRUE(x >= 0.f ? g[i] >= 0.f && g[i] <= x : g[i] <= 0.f && g[i] >= x)
          << "gelu(" << x << ") = " << g[i] << " on path " << path;
      if (std::fabs(x) >= 3.92f) {
        EXPECT_EQ(e[i], x > 0 ? 1.f : -1.f) << "erf(" << x << ")";
      }
      if (x >= 5.75f) {
        EXPECT_EQ(g[i], x) << "gelu(" << x << ")";
      }
      if (x <= -5.75f) {
        EXPECT_TRUE(g[i] == 0.f && std::signbit(g[i])) << "gelu(" << x << ") = " << g[i];
      }
    }
    EXPECT_TRUE(std::signbit(one(path, MathOp::kErf, -kDenorm)));
    EXPECT_EQ(one(path, MathOp::kGelu, 0.f), 0.f);
  }
}

// Firmware's fused GELU takes erf from erf_portable (vmath.h): the vector
// paths' polynomials on one float, with the C library's expf.
TEST(VectorMathEdges, PortableErfWithinThreeUlp) {
  double worst = 0;
  float worst_x = 0;
  for (float x = -6.f; x <= 6.f; x += 1.f / 4096) {
    for (const float v : {x, std::ldexp(x, -20)}) {
      const double ref = std::erf(static_cast<double>(v));
      const double ulps = std::fabs(erf_portable(v) - ref) / ulp_of(ref);
      if (ulps > worst) worst = ulps, worst_x = v;
    }
  }
  EXPECT_LE(worst, 3.0) << "worst at x = " << worst_x;
  std::printf("  erf_portable: max error %.2f ulp\n", worst);
  EXPECT_TRUE(std::isnan(erf_portable(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(erf_portable(std::numeric_limits<float>::infinity()), 1.f);
  EXPECT_EQ(erf_portable(-std::numeric_limits<float>::infinity()), -1.f);
  EXPECT_TRUE(std::signbit(erf_portable(-0.f)));
}

TEST(VectorMathEdges, ScalarPathHasNoVectorMath) {
  const Isa saved = active_isa();
  ASSERT_EQ(set_isa(Isa::kScalar), Error::kOk);
  float x = 1.f;
  EXPECT_FALSE(vector_math(MathOp::kExp, &x, &x, 1));
  EXPECT_EQ(x, 1.f);
  ASSERT_EQ(set_isa(saved), Error::kOk);
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<int, Case>>& info) {
  const int path = std::get<0>(info.param);
  return std::string(path == 3 ? "neon_" : path == 2 ? "avx512_" : "avx2_") + std::get<1>(info.param).name;
}

INSTANTIATE_TEST_SUITE_P(Paths, VectorMathTest,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::ValuesIn(kCases)), case_name);

}  // namespace
}  // namespace kiln::kernels
