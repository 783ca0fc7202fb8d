// The NEON kernels (kernels/cpu/src/arm/) that the other
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
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "arm/neon.h"
#include "isa_switch.h"
#include "row_checks.h"

namespace kiln::kernels {
namespace {

#if KILN_NEON

constexpr float kSentinel = 12345.f;

using namespace row_checks;

#define KILN_SKIP_WITHOUT_NEON \
  if (!neon::enabled()) GTEST_SKIP() << "the NEON path is off (KILN_ISA=scalar)"

TEST(SoftmaxNeonTest, MatchesReferenceWithinAFewUlp) {
  KILN_SKIP_WITHOUT_NEON;
  check_softmax_matches_reference(neon::softmax_row);
}

TEST(SoftmaxNeonTest, ExpIsAccurateAcrossItsRange) {
  KILN_SKIP_WITHOUT_NEON;
  check_softmax_exp_range(neon::softmax_row);
}

TEST(SoftmaxNeonTest, SpecialValuesBehaveAsTheScalarKernel) {
  KILN_SKIP_WITHOUT_NEON;
  check_softmax_special_values(neon::softmax_row);
}

TEST(LayerNormNeonTest, MatchesReference) {
  KILN_SKIP_WITHOUT_NEON;
  check_layer_norm_matches_reference(neon::layer_norm_row);
}

TEST(MaxPoolNeonTest, MatchesDirectMaximumWithPaddingAndNaN) {
  if (!neon::enabled()) GTEST_SKIP() << "the NEON path is off (KILN_ISA=scalar)";
  for (int64_t stride : {1, 2}) {
    for (const auto& [kh, kw, pad] :
         {std::tuple<int64_t, int64_t, int64_t>{3, 3, 1}, {2, 2, 0}, {3, 2, 1}, {4, 4, 2}}) {
      for (const auto& [h, w] : {std::pair<int64_t, int64_t>{7, 7}, {12, 37}, {30, 9}}) {
        const int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
        std::vector<float> x = values(static_cast<size_t>(h * w), 13, 1.f);
        x[static_cast<size_t>(w + 2)] = std::nanf("");
        std::vector<float> out(static_cast<size_t>(oh * ow) + 16, kSentinel);
        ASSERT_TRUE(neon::max_pool(x.data(), h, w, kh, kw, stride, pad, pad, out.data(), oh, ow));
        check_max_pool_plane(
            x, h, w, kh, kw, stride, pad, out.data(), oh, ow,
            "stride " + std::to_string(stride) + " window " + std::to_string(kh) + "x" + std::to_string(kw));
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
