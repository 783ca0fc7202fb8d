// The NEON kernels (kernels/portable/src/gemm_neon.cc) that the other
// kernel tests do not reach through a path argument, against
// double-precision references: the Softmax and LayerNormalization rows
// (row lengths around the vector width, the range of e^x, infinities and
// NaN as the scalar kernels define them), max pooling (padding, NaN) and
// the ReLU/Clip clamp. The GEMM micro-kernel, depthwise, Winograd and
// direct-convolution kernels are checked by gemm_test.cc and
// winograd_test.cc, which run on arm64 with KILN_ISA=neon and scalar
// (tests/arm64). Skipped, with the reason, where NEON is off.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "neon.h"

namespace kiln::kernels {
namespace {

#if KILN_NEON

constexpr float kSentinel = 12345.f;

std::vector<float> values(size_t n, uint32_t seed, float spread) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (static_cast<float>(s >> 8) / 16777216.f * 2.f - 1.f) * spread;
  }
  return v;
}

std::vector<double> softmax_reference(const std::vector<float>& x) {
  double max = -INFINITY;
  for (float v : x) max = std::max<double>(max, v);
  std::vector<double> e(x.size());
  double sum = 0;
  // x - max rounded to float as the kernels compute it (that rounding is
  // the larger error for large differences, and the scalar kernel's too).
  for (size_t i = 0; i < x.size(); ++i) {
    sum += e[i] = std::exp(static_cast<double>(x[i] - static_cast<float>(max)));
  }
  for (double& v : e) v /= sum;
  return e;
}

TEST(SoftmaxNeonTest, MatchesReferenceWithinAFewUlp) {
  if (!neon::enabled()) GTEST_SKIP() << "the NEON path is off (KILN_ISA=scalar)";
  for (int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 31, 128, 1000}) {
    for (float spread : {0.5f, 10.f, 100.f}) {
      const std::vector<float> x = values(static_cast<size_t>(n), static_cast<uint32_t>(n), spread);
      std::vector<float> y(static_cast<size_t>(n) + 8, 7.f);
      neon::softmax_row(x.data(), n, y.data());
      const std::vector<double> want = softmax_reference(x);
      for (int64_t i = 0; i < n; ++i) {
        const double w = want[static_cast<size_t>(i)];
        // Results below the smallest normal float may flush to zero.
        EXPECT_NEAR(y[static_cast<size_t>(i)], w, 6e-7 * w + 1.2e-38) << "n " << n << " spread " << spread << " at " << i;
      }
      for (size_t i = static_cast<size_t>(n); i < y.size(); ++i) ASSERT_EQ(y[i], 7.f) << "wrote past the row";
    }
  }
}

TEST(SoftmaxNeonTest, ExpIsAccurateAcrossItsRange) {
  if (!neon::enabled()) GTEST_SKIP() << "the NEON path is off (KILN_ISA=scalar)";
  // A two-element row [x, 0] gives e^x / (1 + e^x); with x far below 0
  // that is e^x itself, which checks exp4 from -87 to 0.
  for (float x = -87.f; x <= 0.f; x += 0.37f) {
    const float in[2] = {x, 0.f};
    float out[2];
    neon::softmax_row(in, 2, out);
    const double e = std::exp(static_cast<double>(x));
    EXPECT_NEAR(out[0], e / (1 + e), 3e-7 * e / (1 + e)) << "x " << x;
    EXPECT_NEAR(out[1], 1 / (1 + e), 3e-7) << "x " << x;
  }
}

TEST(SoftmaxNeonTest, SpecialValuesBehaveAsTheScalarKernel) {
  if (!neon::enabled()) GTEST_SKIP() << "the NEON path is off (KILN_ISA=scalar)";
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {4, 12}) {
    std::vector<float> x(static_cast<size_t>(n), 1.f), y(static_cast<size_t>(n));
    // -inf contributes exactly 0.
    x[1] = -inf;
    neon::softmax_row(x.data(), n, y.data());
    EXPECT_EQ(y[1], 0.f);
    EXPECT_NEAR(y[0], 1.0 / static_cast<double>(n - 1), 1e-7);
    // A NaN anywhere makes every output NaN.
    x[1] = nan;
    neon::softmax_row(x.data(), n, y.data());
    for (float v : y) EXPECT_TRUE(std::isnan(v));
    // +inf: inf - inf is NaN, so the row is NaN (as expf gives it).
    x[1] = inf;
    neon::softmax_row(x.data(), n, y.data());
    for (float v : y) EXPECT_TRUE(std::isnan(v));
    // Very negative entries underflow to 0 beside a large one.
    x.assign(static_cast<size_t>(n), -1000.f);
    x[static_cast<size_t>(n - 1)] = 50.f;
    neon::softmax_row(x.data(), n, y.data());
    EXPECT_EQ(y[0], 0.f);
    EXPECT_EQ(y[static_cast<size_t>(n - 1)], 1.f);
  }
}

TEST(LayerNormNeonTest, MatchesReference) {
  if (!neon::enabled()) GTEST_SKIP() << "the NEON path is off (KILN_ISA=scalar)";
  for (int64_t n : {1, 5, 8, 13, 64, 512, 777}) {
    for (bool with_bias : {false, true}) {
      // An offset large against the spread: the statistics need care.
      std::vector<float> x = values(static_cast<size_t>(n), 3, 2.f);
      for (float& v : x) v += 1000.f;
      const std::vector<float> scale = values(static_cast<size_t>(n), 4, 1.f);
      const std::vector<float> bias = values(static_cast<size_t>(n), 5, 1.f);
      std::vector<float> y(static_cast<size_t>(n));
      float mean = 0, inv = 0;
      neon::layer_norm_row(x.data(), n, scale.data(), with_bias ? bias.data() : nullptr, 1e-5, y.data(), &mean,
                           &inv);
      double m = 0, var = 0;
      for (float v : x) m += v;
      m /= static_cast<double>(n);
      for (float v : x) var += (v - m) * (v - m);
      var /= static_cast<double>(n);
      const double want_inv = 1 / std::sqrt(var + 1e-5);
      EXPECT_NEAR(mean, m, 1e-4);
      EXPECT_NEAR(inv, want_inv, 1e-5 * want_inv);
      for (int64_t i = 0; i < n; ++i) {
        const size_t j = static_cast<size_t>(i);
        const double w = (x[j] - m) * want_inv * scale[j] + (with_bias ? bias[j] : 0.0);
        EXPECT_NEAR(y[j], w, 2e-4) << "n " << n << " at " << i;
      }
      // In place, as the planner may run it.
      std::vector<float> z = x;
      neon::layer_norm_row(z.data(), n, scale.data(), with_bias ? bias.data() : nullptr, 1e-5, z.data(), nullptr,
                           nullptr);
      EXPECT_EQ(z, y);
    }
  }
}


TEST(MaxPoolNeonTest, MatchesDirectMaximumWithPaddingAndNaN) {
  if (!neon::enabled()) GTEST_SKIP() << "the NEON path is off (KILN_ISA=scalar)";
  for (int64_t stride : {1, 2}) {
    for (const auto& [kh, kw, pad] : {std::tuple<int64_t, int64_t, int64_t>{3, 3, 1}, {2, 2, 0}, {3, 2, 1}, {4, 4, 2}}) {
      for (const auto& [h, w] : {std::pair<int64_t, int64_t>{7, 7}, {12, 37}, {30, 9}}) {
        const int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
        std::vector<float> x = values(static_cast<size_t>(h * w), 13, 1.f);
        x[static_cast<size_t>(w + 2)] = std::nanf("");
        std::vector<float> out(static_cast<size_t>(oh * ow) + 16, kSentinel);
        ASSERT_TRUE(neon::max_pool(x.data(), h, w, kh, kw, stride, pad, pad, out.data(), oh, ow));
        for (int64_t oy = 0; oy < oh; ++oy) {
          for (int64_t ox = 0; ox < ow; ++ox) {
            float want = -INFINITY;
            bool nan = false;
            for (int64_t ky = 0; ky < kh; ++ky) {
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                const float v = x[static_cast<size_t>(iy * w + ix)];
                nan = nan || std::isnan(v);
                want = std::max(want, v);
              }
            }
            const float got = out[static_cast<size_t>(oy * ow + ox)];
            if (nan) {
              ASSERT_TRUE(std::isnan(got)) << oy << ", " << ox;
            } else {
              ASSERT_EQ(got, want) << "stride " << stride << " window " << kh << "x" << kw << " at " << oy << ", " << ox;
            }
          }
        }
        for (size_t i = static_cast<size_t>(oh * ow); i < out.size(); ++i) ASSERT_EQ(out[i], kSentinel);
      }
    }
  }
}

TEST(ClampNeonTest, ReluAndClipKeepTheScalarRules) {
  if (!neon::enabled()) GTEST_SKIP() << "the NEON path is off (KILN_ISA=scalar)";
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {1, 4, 7, 33}) {
    std::vector<float> x = values(static_cast<size_t>(n), 21, 3.f);
    x[0] = nan;
    if (n > 2) x[2] = -inf;
    std::vector<float> relu = x, clip = x;
    relu.push_back(kSentinel);
    clip.push_back(kSentinel);
    neon::clamp(relu.data(), n, 0.f, inf, true);
    neon::clamp(clip.data(), n, -0.5f, 0.75f, false);
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[static_cast<size_t>(i)];
      EXPECT_EQ(relu[static_cast<size_t>(i)], v > 0.f ? v : 0.f) << i;  // NaN gives 0
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(clip[static_cast<size_t>(i)]));  // NaN stays NaN
      } else {
        EXPECT_EQ(clip[static_cast<size_t>(i)], std::min(0.75f, std::max(-0.5f, v))) << i;
      }
    }
    EXPECT_EQ(relu.back(), kSentinel);
    EXPECT_EQ(clip.back(), kSentinel);
  }
}

#endif  // KILN_NEON

}  // namespace
}  // namespace kiln::kernels
