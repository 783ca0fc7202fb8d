// depthwise_conv (kernels/cpu/src/depthwise.h) against a plain
// double-precision loop: kernels 1x1 to 7x7 (square and not), strides 1
// and 2, dilations 1 to 7 (and one the vector kernels' row ring declines),
// pads from 0 to beyond the kernel, widths around the vector lengths
// and one too wide for the stack buffers (the plain path), with and without
// a clamp, on every CPU path this processor and KILN_ISA allow (set_isa).

#include "depthwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernel_test_values.h"
#include "kiln/kernels/isa.h"

namespace kiln::kernels {
namespace {

struct Geometry {
  int64_t h, w, kh, kw, stride, pt, pl, pb, pr;
  int64_t dh = 1, dw = 1;
};

void check_output(const Geometry& g, const std::vector<float>& in, const std::vector<float>& wt,
                  const std::vector<float>& out, int64_t oh, int64_t ow, bool clamped, float lo, float hi,
                  const std::string& path) {
  for (int64_t oy = 0; oy < oh; ++oy) {
    for (int64_t ox = 0; ox < ow; ++ox) {
      double acc = 0.25;
      for (int64_t ky = 0; ky < g.kh; ++ky) {
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const int64_t iy = oy * g.stride - g.pt + ky * g.dh, ix = ox * g.stride - g.pl + kx * g.dw;
          if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) acc += double(wt[ky * g.kw + kx]) * in[iy * g.w + ix];
        }
      }
      if (clamped) acc = std::min<double>(hi, std::max<double>(lo, acc));
      ASSERT_NEAR(out[static_cast<size_t>(oy * ow + ox)], acc, 1e-5)
          << path << " at " << oy << "," << ox << " of " << oh << "x" << ow << " (kernel " << g.kh << "x" << g.kw
          << ", stride " << g.stride << ", dilation " << g.dh << "x" << g.dw << ")";
    }
  }
  EXPECT_EQ(out.back(), kSentinel) << "wrote past the output";
}

void check(const Geometry& g, Isa isa, const fb::FusedActivation* activation, float lo, float hi) {
  const int64_t oh = (g.h + g.pt + g.pb - (g.kh - 1) * g.dh - 1) / g.stride + 1;
  const int64_t ow = (g.w + g.pl + g.pr - (g.kw - 1) * g.dw - 1) / g.stride + 1;
  ASSERT_GT(oh, 0);
  ASSERT_GT(ow, 0);
  const std::vector<float> in = values(static_cast<size_t>(g.h * g.w), 7);
  const std::vector<float> wt = values(static_cast<size_t>(g.kh * g.kw), 11);
  std::vector<float> out(static_cast<size_t>(oh * ow) + 1, kSentinel);
  DepthwiseConv c;
  // clang-format off
  c.in = in.data(); c.h = g.h; c.w = g.w; c.weights = wt.data();
  c.kh = g.kh; c.kw = g.kw; c.stride = g.stride; c.pt = g.pt; c.pl = g.pl;
  c.dh = g.dh; c.dw = g.dw;
  c.bias = 0.25f; c.out = out.data(); c.oh = oh; c.ow = ow;
  // clang-format on
  ASSERT_EQ(set_isa(isa), Error::kOk);
  // `direct`: the path's own vector kernel called directly (the dispatch
  // hands some widths of the AVX-512 path to the AVX2 kernel), skipped
  // where it declines the geometry.
  for (bool direct : {false, true}) {
    if (direct && isa == Isa::kScalar) break;
    std::fill(out.begin(), out.end(), kSentinel);
    if (!direct) {
      depthwise_conv(c, activation);
    } else {
      const bool clamp = activation != nullptr;
      const bool done =
          isa == Isa::kAvx512 ? depthwise_conv_avx512(c, clamp, lo, hi) : depthwise_conv_avx2(c, clamp, lo, hi);
      if (!done) break;
    }
    check_output(g, in, wt, out, oh, ow, activation != nullptr, lo, hi,
                 std::string(isa_name(isa)) + (direct ? " kernel" : ""));
  }
}

TEST(DepthwiseConvTest, MatchesDirectConvolutionOnEveryPath) {
  const Isa saved = active_isa();
  const Geometry cases[] = {
      // clang-format off
      {7, 7, 5, 5, 1, 2, 2, 2, 2},      {14, 14, 5, 5, 2, 2, 2, 2, 2},   {112, 112, 5, 5, 2, 1, 1, 2, 2},
      {28, 28, 7, 7, 1, 3, 3, 3, 3},    {9, 23, 3, 5, 1, 1, 2, 1, 2},    {17, 33, 5, 3, 2, 0, 0, 0, 0},
      {5, 5, 1, 1, 1, 0, 0, 0, 0},      {6, 6, 2, 2, 2, 0, 0, 1, 1},     {3, 4, 5, 5, 1, 4, 4, 4, 4},
      {8, 16, 5, 5, 1, 2, 2, 2, 2},     {8, 17, 5, 5, 2, 2, 2, 2, 2},    {4, 2000, 5, 5, 1, 2, 2, 2, 2},
      {4, 1500, 3, 5, 2, 1, 2, 1, 2},   {1, 1, 5, 5, 1, 2, 2, 2, 2},     {7, 1, 7, 7, 2, 3, 3, 3, 3},
      // clang-format on
      // Stride 2 rows split by parity in whole vectors: left pads even and
      // odd, the vector part ending on either parity.
      {6, 100, 5, 5, 2, 2, 2, 2, 2},
      {5, 99, 7, 7, 2, 3, 3, 3, 3},
      {4, 64, 3, 3, 2, 0, 0, 1, 1},
      // Dilated: LR-ASPP's 5x5 at dilation 2 on 20x20, strides 1 and 2,
      // widths 1 and odd, pads beyond the dilated kernel, rings of 4 and 7
      // rows (dilations 3 and 7), unequal dilations, four vectors a row,
      // and a dilation no ring of at most 7 rows takes (the plain path).
      {20, 20, 5, 5, 1, 4, 4, 4, 4, 2, 2},
      {21, 21, 5, 5, 2, 4, 4, 4, 4, 2, 2},
      {9, 1, 3, 3, 1, 2, 2, 2, 2, 2, 2},
      {11, 13, 3, 3, 2, 5, 6, 5, 6, 3, 3},
      {16, 70, 3, 3, 1, 7, 7, 7, 7, 7, 7},
      {12, 19, 5, 3, 1, 4, 1, 4, 1, 2, 1},
      {10, 9, 3, 5, 2, 3, 6, 3, 6, 3, 3},
      {30, 9, 7, 7, 1, 18, 18, 18, 18, 6, 6},
      {25, 31, 3, 3, 1, 210, 210, 210, 210, 210, 210},
      {8, 90, 5, 5, 2, 4, 5, 4, 5, 2, 3},
  };
  const Activation clip(fb::Activation::CLIP, 0.f, 0.05f);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!processor_has(isa)) continue;
    for (const Geometry& g : cases) {
      check(g, isa, nullptr, 0.f, 0.f);
      check(g, isa, clip.get(), 0.f, 0.05f);
    }
  }
  ASSERT_EQ(set_isa(saved), Error::kOk);
}

// A k x k row-reuse kernel at one stride: every width from 1 to 66 (a
// strip's last vector partial or whole, strips inside the row and reaching
// a padded column, or ending one column short of the row's end), the given
// heights, every left pad from 0 to k - 1 with each width, the other pads
// 0 to k - 1 varying with the width; with and without a clamp.
void sweep_row_reuse(int64_t k, int64_t stride, std::initializer_list<int64_t> heights, Isa isa,
                     const fb::FusedActivation* relu) {
  for (int64_t w = 1; w <= 66; ++w) {
    for (int64_t h : heights) {
      for (int64_t pl = 0; pl < k; ++pl) {
        const int64_t pt = (w + h + pl) % k, pb = (w + 2 * h) % (k - 2), pr = (w + pl) % k;
        const Geometry g{h, w, k, k, stride, pt, pl, pb, pr};
        if (h + pt + pb < k || w + pl + pr < k) continue;
        check(g, isa, nullptr, 0.f, 0.f);
        check(g, isa, relu, 0.f, __builtin_inff());
      }
    }
  }
}

// The 5x5 row-reuse kernels (strides 1 and 2; heights 1 to 9), then
// dilations at stride 1, through the dispatch and each path's own kernel.
TEST(DepthwiseConvTest, FiveByFiveRowReuseOnEveryPath) {
  const Isa saved = active_isa();
  const Activation relu(fb::Activation::RELU, 0.f, 0.f);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!processor_has(isa)) continue;
    for (int64_t stride : {1, 2}) sweep_row_reuse(5, stride, {1, 2, 5, 9}, isa, relu.get());
    // Dilated at stride 1 (rows walked by dilation class): dilations 1 to
    // 4 on each axis, widths below, at and past one and two vectors, the
    // plane shorter and taller than the dilated kernel.
    for (int64_t dh : {1, 2, 3, 4}) {
      for (int64_t dw : {1, 2, 3}) {
        for (int64_t w : {1, 3, 7, 8, 9, 16, 20, 23, 33}) {
          for (int64_t h : {1, 4, 9, 20}) {
            const int64_t pt = 2 * dh - h % 2, pl = 2 * dw - w % 2, pb = 2 * dh, pr = 2 * dw + w % 3;
            Geometry g{h, w, 5, 5, 1, pt, pl, pb, pr};
            g.dh = dh;
            g.dw = dw;
            if (h + pt + pb < 4 * dh + 1 || w + pl + pr < 4 * dw + 1) continue;
            check(g, isa, nullptr, 0.f, 0.f);
            check(g, isa, relu.get(), 0.f, __builtin_inff());
          }
        }
      }
    }
  }
  ASSERT_EQ(set_isa(saved), Error::kOk);
}

// The 7x7 row-reuse kernel (stride 1, undilated): planes shorter than the
// kernel (every output row skips some kernel rows), and taller (output
// rows that read all seven: the tap-by-tap order).
TEST(DepthwiseConvTest, SevenBySevenRowReuseOnEveryPath) {
  const Isa saved = active_isa();
  const Activation relu(fb::Activation::RELU, 0.f, 0.f);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (processor_has(isa)) sweep_row_reuse(7, 1, {1, 2, 6, 9, 16}, isa, relu.get());
  }
  ASSERT_EQ(set_isa(saved), Error::kOk);
}

}  // namespace
}  // namespace kiln::kernels
