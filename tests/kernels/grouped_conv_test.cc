// grouped_conv3x3 (kernels/cpu/src/grouped_conv.h) against a plain
// double-precision loop: strides 1 and 2, groups of 2 to 32 input
// channels, 1 to 20 output channels (fewer, as many and more than the
// input's, whole and partial sets of 8), planes from 1x1 to 28x28 and
// widths up to 60, odd and even (flat walks and rows narrower than a
// vector, whole rows with a last vector moved back), with
// and without bias, no activation, a clamp (RELU, CLIP) and one applied
// after (LEAKY_RELU); the whole plane at once and by bands of 1 and 3
// output rows (scratch for no more); through the dispatch and each path's
// own kernel on every CPU path this processor and KILN_ISA allow. Nothing
// is written past the outputs or the scratch given; scratch for no band is
// declined.

#include "grouped_conv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernel_test_values.h"
#include "kiln/kernels/gemm_blocking.h"
#include "kiln/kernels/isa.h"

namespace kiln::kernels {
namespace {

double activate(double v, const fb::FusedActivation* a) {
  if (a == nullptr) return v;
  switch (a->kind()) {
    case fb::Activation::RELU: return std::max(v, 0.0);
    case fb::Activation::CLIP: return std::min<double>(a->beta(), std::max<double>(a->alpha(), v));
    case fb::Activation::LEAKY_RELU: return v < 0 ? v * a->alpha() : v;
    default: return v;
  }
}

struct Case {
  int64_t cg, mg, h, w;
  int64_t stride = 1;
};

// `kernel`: 0 the dispatch, 1 the AVX2 kernel, 2 the AVX-512 kernel;
// `band`: scratch for that many output rows at a time, or 0 for the plane.
void check(const Case& c, bool with_bias, const fb::FusedActivation* activation, int kernel, int64_t band,
           const std::string& label) {
  const int64_t k = c.cg * 9, oh = (c.h - 1) / c.stride + 1, ow = (c.w - 1) / c.stride + 1, plane = oh * ow;
  const std::vector<float> x = values(static_cast<size_t>(c.cg * c.h * c.w), 3);
  const std::vector<float> wt = values(static_cast<size_t>(c.mg * k), 5);
  const std::vector<float> bias = values(static_cast<size_t>(c.mg), 9);
  std::vector<float> packed(static_cast<size_t>(gemm_prepacked_a_floats(c.mg, k)));
  gemm_prepack_a(c.mg, k, wt.data(), packed.data());
  const int64_t scratch_floats =
      band == 0 ? grouped_conv3x3_scratch_floats(c.cg, c.mg, c.h, c.w, c.stride)
                : c.cg * 9 * c.mg + c.cg * (c.stride * (band - 1) + 3) * grouped_conv3x3_row_floats(c.w, c.stride) +
                      kGroupedConvSlack;
  ASSERT_EQ(grouped_conv3x3_band_rows(c.cg, c.mg, c.w, c.stride, scratch_floats), band == 0 ? oh : band);
  std::vector<float> scratch(static_cast<size_t>(scratch_floats) + 1, kSentinel);
  std::vector<float> y(static_cast<size_t>(c.mg * plane) + 1, kSentinel);
  GroupedConv3x3 conv;
  conv.cg = c.cg;
  conv.mg = c.mg;
  conv.h = c.h;
  conv.w = c.w;
  conv.stride = c.stride;
  conv.x = x.data();
  conv.packed_weights = packed.data();
  conv.bias = with_bias ? bias.data() : nullptr;
  conv.y = y.data();
  conv.scratch = scratch.data();
  conv.scratch_floats = scratch_floats;
  bool done = false;
  const fb::Activation kind = activation != nullptr ? activation->kind() : fb::Activation::NONE;
  const bool clamp = kind == fb::Activation::RELU || kind == fb::Activation::CLIP;
  const float lo = kind == fb::Activation::CLIP ? activation->alpha() : 0.f;
  const float hi = kind == fb::Activation::CLIP ? activation->beta() : __builtin_inff();
  if (kernel == 0) {
    done = grouped_conv3x3(conv, activation);
  } else if (!clamp && kind != fb::Activation::NONE) {
    return;  // the kernels only clamp; the dispatch applies the others
  } else {
    done = kernel == 1 ? grouped_conv3x3_avx2(conv, clamp, lo, hi) : grouped_conv3x3_avx512(conv, clamp, lo, hi);
  }
  ASSERT_TRUE(done) << label;
  for (int64_t m = 0; m < c.mg; ++m) {
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        double acc = with_bias ? bias[static_cast<size_t>(m)] : 0.0, mag = std::fabs(acc);
        for (int64_t ci = 0; ci < c.cg; ++ci) {
          for (int64_t ky = 0; ky < 3; ++ky) {
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = oy * c.stride - 1 + ky, ix = ox * c.stride - 1 + kx;
              if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
              const double p = double(wt[static_cast<size_t>(m * k + ci * 9 + ky * 3 + kx)]) *
                               x[static_cast<size_t>(ci * c.h * c.w + iy * c.w + ix)];
              acc += p;
              mag += std::fabs(p);
            }
          }
        }
        ASSERT_NEAR(y[static_cast<size_t>(m * plane + oy * ow + ox)], activate(acc, activation), 1e-6 * (1 + mag))
            << label << " channel " << m << " at " << oy << "," << ox;
      }
    }
  }
  EXPECT_EQ(y.back(), kSentinel) << label << ": wrote past the output";
  EXPECT_EQ(scratch.back(), kSentinel) << label << ": wrote past the scratch";
}

TEST(GroupedConvTest, MatchesDirectConvolutionOnEveryPath) {
  const Isa saved = active_isa();
  const Case cases[] = {
      // clang-format off
      {8, 8, 14, 14}, {8, 8, 7, 7},   {4, 4, 1, 1},   {4, 12, 2, 3},  {16, 16, 7, 7}, {16, 5, 14, 14},
      {8, 20, 9, 9},  {2, 3, 5, 17},  {8, 8, 3, 15},  {8, 13, 4, 31}, {4, 8, 3, 33},  {8, 8, 2, 45},
      {16, 8, 3, 60}, {32, 9, 6, 8},  {8, 16, 28, 28}, {8, 1, 1, 16}, {8, 7, 16, 1},  {4, 8, 1, 7},
      // clang-format on
      // Stride 2: outputs 1x1 to 28x28, rows of 1 to 30 outputs from even
      // and odd input widths.
      // clang-format off
      {8, 8, 14, 14, 2}, {8, 8, 15, 15, 2}, {4, 4, 1, 1, 2},  {4, 12, 2, 3, 2}, {16, 16, 7, 7, 2},
      {16, 5, 28, 28, 2}, {8, 20, 9, 9, 2}, {2, 3, 5, 17, 2}, {8, 13, 4, 31, 2}, {4, 8, 3, 33, 2},
      {8, 8, 2, 45, 2},  {16, 8, 3, 60, 2}, {32, 9, 6, 8, 2},  {8, 16, 56, 56, 2}, {8, 7, 16, 1, 2},
      {8, 8, 5, 35, 2},  {8, 3, 4, 64, 2},
      // clang-format on
  };
  const Activation relu(fb::Activation::RELU, 0.f, 0.f);
  const Activation clip(fb::Activation::CLIP, -0.5f, 0.75f);
  const Activation leaky(fb::Activation::LEAKY_RELU, 0.1f, 0.f);
  const fb::FusedActivation* activations[] = {nullptr, relu.get(), clip.get(), leaky.get()};
  int runs = 0;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!processor_has(isa)) continue;
    ASSERT_EQ(set_isa(isa), Error::kOk);
    if (isa == Isa::kScalar) {
      // The scalar path keeps the packed product: the kernel declines.
      EXPECT_FALSE(grouped_conv3x3_available());
      continue;
    }
    ASSERT_TRUE(grouped_conv3x3_available()) << isa_name(isa);
    for (const Case& c : cases) {
      for (bool with_bias : {false, true}) {
        for (const fb::FusedActivation* a : activations) {
          for (int kernel : {0, isa == Isa::kAvx512 ? 2 : 1}) {
            const std::string label = std::string(isa_name(isa)) + (kernel == 0 ? " dispatch" : " kernel") + " cg " +
                                      std::to_string(c.cg) + " mg " + std::to_string(c.mg) + " " + std::to_string(c.h) +
                                      "x" + std::to_string(c.w) + " stride " + std::to_string(c.stride) +
                                      (with_bias ? " bias" : "") + " activation " +
                                      std::to_string(a != nullptr ? int(a->kind()) : 0);
            for (int64_t band : {0, 1, 3}) {
              check(c, with_bias, a, kernel, band, label + " band " + std::to_string(band));
              ++runs;
            }
          }
        }
      }
    }
  }
  ASSERT_EQ(set_isa(saved), Error::kOk);
  if (runs == 0) GTEST_SKIP() << "the processor has neither AVX2 nor AVX-512";
}

// Scratch one float short of a band of one output row: every kernel
// declines and writes nothing.
TEST(GroupedConvTest, DeclinesScratchWithoutABand) {
  for (int64_t stride : {1, 2}) {
    const int64_t cg = 8, mg = 8, h = 6, w = 20;
    const int64_t floats = cg * 9 * mg + cg * 3 * grouped_conv3x3_row_floats(w, stride) + kGroupedConvSlack - 1;
    ASSERT_EQ(grouped_conv3x3_band_rows(cg, mg, w, stride, floats), 0);
    ASSERT_EQ(grouped_conv3x3_band_rows(cg, mg, w, stride, floats + 1), 1);
    const std::vector<float> x = values(static_cast<size_t>(cg * h * w), 3);
    const std::vector<float> packed(static_cast<size_t>(gemm_prepacked_a_floats(mg, cg * 9)), 0.5f);
    std::vector<float> scratch(static_cast<size_t>(floats), kSentinel);
    std::vector<float> y(static_cast<size_t>(mg * h * w), kSentinel);
    GroupedConv3x3 conv;
    conv.cg = cg;
    conv.mg = mg;
    conv.h = h;
    conv.w = w;
    conv.stride = stride;
    conv.x = x.data();
    conv.packed_weights = packed.data();
    conv.y = y.data();
    conv.scratch = scratch.data();
    conv.scratch_floats = floats;
    EXPECT_FALSE(grouped_conv3x3_avx2(conv, false, 0.f, 0.f));
    EXPECT_FALSE(grouped_conv3x3_avx512(conv, false, 0.f, 0.f));
    EXPECT_FALSE(grouped_conv3x3(conv, nullptr));
    for (float v : scratch) ASSERT_EQ(v, kSentinel);
    for (float v : y) ASSERT_EQ(v, kSentinel);
  }
}

}  // namespace
}  // namespace kiln::kernels
