// Checks shared by the vector Softmax and LayerNormalization rows (and the
// max pooling planes) of every ISA path (x86 AVX2 in norm_test.cc, NEON in neon_test.cc) against
// double-precision references: row lengths around the vector width, inputs
// spanning the range of exp, and the special values (infinities, NaN) the
// scalar kernels' results define. Each check takes the row function.

#ifndef KILN_TESTS_KERNELS_ROW_CHECKS_H_
#define KILN_TESTS_KERNELS_ROW_CHECKS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace kiln::kernels::row_checks {

using SoftmaxRowFn = void (*)(const float* in, int64_t n, float* out);
using LayerNormRowFn = void (*)(const float* in, int64_t n, const float* scale, const float* bias, double epsilon,
                                float* out, float* mean, float* inv_std);

inline std::vector<float> values(size_t n, uint32_t seed, float spread) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (static_cast<float>(s >> 8) / 16777216.f * 2.f - 1.f) * spread;
  }
  return v;
}

inline std::vector<double> softmax_reference(const std::vector<float>& x) {
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

inline void check_softmax_matches_reference(SoftmaxRowFn softmax) {
  for (int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 31, 128, 1000}) {
    for (float spread : {0.5f, 10.f, 100.f}) {
      const std::vector<float> x = values(static_cast<size_t>(n), static_cast<uint32_t>(n), spread);
      std::vector<float> y(static_cast<size_t>(n) + 8, 7.f);
      softmax(x.data(), n, y.data());
      const std::vector<double> want = softmax_reference(x);
      for (int64_t i = 0; i < n; ++i) {
        const double w = want[static_cast<size_t>(i)];
        // Results below the smallest normal float may flush to zero.
        EXPECT_NEAR(y[static_cast<size_t>(i)], w, 6e-7 * w + 1.2e-38)
            << "n " << n << " spread " << spread << " at " << i;
      }
      for (size_t i = static_cast<size_t>(n); i < y.size(); ++i) ASSERT_EQ(y[i], 7.f) << "wrote past the row";
    }
  }
}

inline void check_softmax_exp_range(SoftmaxRowFn softmax) {
  // A two-element row [x, 0] gives e^x / (1 + e^x); with x far below 0
  // that is e^x itself, which checks the vector exp from -87 to 0.
  for (float x = -87.f; x <= 0.f; x += 0.37f) {
    const float in[2] = {x, 0.f};
    float out[2];
    softmax(in, 2, out);
    const double e = std::exp(static_cast<double>(x));
    EXPECT_NEAR(out[0], e / (1 + e), 3e-7 * e / (1 + e)) << "x " << x;
    EXPECT_NEAR(out[1], 1 / (1 + e), 3e-7) << "x " << x;
  }
}

inline void check_softmax_special_values(SoftmaxRowFn softmax) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {4, 12}) {
    std::vector<float> x(static_cast<size_t>(n), 1.f), y(static_cast<size_t>(n));
    // -inf contributes exactly 0.
    x[1] = -inf;
    softmax(x.data(), n, y.data());
    EXPECT_EQ(y[1], 0.f);
    EXPECT_NEAR(y[0], 1.0 / static_cast<double>(n - 1), 1e-7);
    // A NaN anywhere makes every output NaN.
    x[1] = nan;
    softmax(x.data(), n, y.data());
    for (float v : y) EXPECT_TRUE(std::isnan(v));
    // +inf: inf - inf is NaN, so the row is NaN (as expf gives it).
    x[1] = inf;
    softmax(x.data(), n, y.data());
    for (float v : y) EXPECT_TRUE(std::isnan(v));
    // Very negative entries underflow to 0 beside a large one.
    x.assign(static_cast<size_t>(n), -1000.f);
    x[static_cast<size_t>(n - 1)] = 50.f;
    softmax(x.data(), n, y.data());
    EXPECT_EQ(y[0], 0.f);
    EXPECT_EQ(y[static_cast<size_t>(n - 1)], 1.f);
  }
}

inline void check_layer_norm_matches_reference(LayerNormRowFn layer_norm) {
  for (int64_t n : {1, 5, 8, 13, 64, 512, 777}) {
    for (bool with_bias : {false, true}) {
      // An offset large against the spread: the statistics need care.
      std::vector<float> x = values(static_cast<size_t>(n), 3, 2.f);
      for (float& v : x) v += 1000.f;
      const std::vector<float> scale = values(static_cast<size_t>(n), 4, 1.f);
      const std::vector<float> bias = values(static_cast<size_t>(n), 5, 1.f);
      std::vector<float> y(static_cast<size_t>(n));
      float mean = 0, inv = 0;
      layer_norm(x.data(), n, scale.data(), with_bias ? bias.data() : nullptr, 1e-5, y.data(), &mean, &inv);
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
      layer_norm(z.data(), n, scale.data(), with_bias ? bias.data() : nullptr, 1e-5, z.data(), nullptr, nullptr);
      EXPECT_EQ(z, y);
    }
  }
}

// A max pooling plane (x86 AVX2 in gemm_test.cc, NEON in neon_test.cc)
// against the direct maximum over each window's in-bounds taps: NaN where
// a tap is NaN, the exact maximum elsewhere. `what` names the case.
inline void check_max_pool_plane(const std::vector<float>& x, int64_t h, int64_t w, int64_t kh, int64_t kw,
                                 int64_t stride, int64_t pad, const float* out, int64_t oh, int64_t ow,
                                 const std::string& what) {
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
      const float got = out[oy * ow + ox];
      if (nan) {
        ASSERT_TRUE(std::isnan(got)) << what << " at " << oy << ", " << ox;
      } else {
        ASSERT_EQ(got, want) << what << " at " << oy << ", " << ox;
      }
    }
  }
}

}  // namespace kiln::kernels::row_checks

#endif  // KILN_TESTS_KERNELS_ROW_CHECKS_H_
