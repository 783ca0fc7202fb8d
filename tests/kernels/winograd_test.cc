// Winograd F(2x2, 3x3) convolution against a direct double-precision
// convolution: odd output sizes (partial tiles), pads from 0 to 2 and
// asymmetric, channel counts that are no multiple of the register tile,
// several tile blocks, a batch of two, bias and activations, every path;
// and that the scratch the planner is told about is never overrun, padded
// (as planned now) or not (as planned before the pad).

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "gemm.h"
#include "kernel_test_values.h"

namespace kiln::kernels {
namespace {

struct Case {
  int64_t n, c, h, w, m, pt, pl, pb, pr;
  fb::Activation activation;
};

class WinogradTest : public ::testing::TestWithParam<std::tuple<Case, GemmPath>> {};

TEST_P(WinogradTest, MatchesDirectConvolution) {
  const auto [k, path] = GetParam();
  const int64_t oh = k.h + k.pt + k.pb - 2, ow = k.w + k.pl + k.pr - 2;
  const int64_t tiles = (oh + 1) / 2 * ((ow + 1) / 2);
  const std::vector<float> x = values(static_cast<size_t>(k.n * k.c * k.h * k.w), 1);
  const std::vector<float> w = values(static_cast<size_t>(k.m * k.c * 9), 2);
  const std::vector<float> bias = values(static_cast<size_t>(k.m), 3);
  std::vector<float> u(static_cast<size_t>(winograd_weight_floats(k.m, k.c)));
  winograd_transform_weights(k.m, k.c, w.data(), u.data());
  const size_t input_floats = static_cast<size_t>(winograd_input_floats(k.c, tiles));
  const size_t product_floats = static_cast<size_t>(winograd_product_floats(k.m, k.c, tiles));
  std::vector<float> v(input_floats + 64, kSentinel), prod(product_floats + 64, kSentinel);
  std::vector<float> y(static_cast<size_t>(k.n * k.m * oh * ow) + 16, kSentinel);
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(fb::CreateFusedActivation(builder, k.activation, -0.3f, 0.4f));
  WinogradConv conv;
  // clang-format off
  conv.n = k.n; conv.c = k.c; conv.h = k.h; conv.w = k.w; conv.m = k.m;
  conv.oh = oh; conv.ow = ow; conv.pt = k.pt; conv.pl = k.pl;
  // clang-format on
  conv.x = x.data();
  conv.weights = u.data();
  conv.bias = bias.data();
  conv.y = y.data();
  conv.activation = flatbuffers::GetRoot<fb::FusedActivation>(builder.GetBufferPointer());
  conv.transformed_input = v.data();
  conv.transformed_input_floats = static_cast<int64_t>(input_floats);
  conv.products = prod.data();
  conv.products_floats = static_cast<int64_t>(product_floats);
  winograd_conv(conv, path);

  // Programs planned before the pad between transformed inputs, and before
  // the one between products: the smaller scratch runs unpadded, to the
  // same bits, and is not overrun.
  const size_t unpadded_floats = static_cast<size_t>(winograd_input_unpadded_floats(k.c, tiles));
  const size_t unpadded_product_floats = static_cast<size_t>(winograd_product_unpadded_floats(k.m, k.c, tiles));
  for (int old : {0, 1}) {  // 0: neither pad; 1: the input pad only
    SCOPED_TRACE(old == 0 ? "unpadded" : "products unpadded");
    std::vector<float> v_unpadded((old == 0 ? unpadded_floats : input_floats) + 64, kSentinel);
    std::vector<float> prod_unpadded(unpadded_product_floats + 64, kSentinel);
    std::vector<float> y_unpadded(y.size(), kSentinel);
    WinogradConv unpadded = conv;
    unpadded.transformed_input = v_unpadded.data();
    unpadded.transformed_input_floats = static_cast<int64_t>(v_unpadded.size() - 64);
    unpadded.products = prod_unpadded.data();
    unpadded.products_floats = static_cast<int64_t>(unpadded_product_floats);
    unpadded.y = y_unpadded.data();
    winograd_conv(unpadded, path);
    ASSERT_EQ(y, y_unpadded);
    for (size_t i = v_unpadded.size() - 64; i < v_unpadded.size(); ++i)
      ASSERT_EQ(v_unpadded[i], kSentinel) << "overrun";
    for (size_t i = unpadded_product_floats; i < prod_unpadded.size(); ++i) {
      ASSERT_EQ(prod_unpadded[i], kSentinel) << "product overrun";
    }
  }

  double scale = 1e-30;
  std::vector<double> want(static_cast<size_t>(k.n * k.m * oh * ow));
  for (int64_t n = 0; n < k.n; ++n) {
    for (int64_t m = 0; m < k.m; ++m) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = bias[static_cast<size_t>(m)];
          for (int64_t c = 0; c < k.c; ++c) {
            for (int64_t ky = 0; ky < 3; ++ky) {
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = oy - k.pt + ky, ix = ox - k.pl + kx;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                sum += static_cast<double>(w[static_cast<size_t>(((m * k.c + c) * 3 + ky) * 3 + kx)]) *
                       x[static_cast<size_t>(((n * k.c + c) * k.h + iy) * k.w + ix)];
              }
            }
          }
          if (k.activation == fb::Activation::RELU) sum = sum > 0 ? sum : 0;
          if (k.activation == fb::Activation::CLIP) sum = std::min(std::max(sum, -0.3), 0.4);
          if (k.activation == fb::Activation::SIGMOID) sum = 1 / (1 + std::exp(-sum));
          want[static_cast<size_t>(((n * k.m + m) * oh + oy) * ow + ox)] = sum;
          scale = std::max(scale, std::fabs(sum));
        }
      }
    }
  }
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::fabs(y[i] - want[i]), 1e-5 * scale) << "at " << i;
  }
  for (size_t i = want.size(); i < y.size(); ++i) ASSERT_EQ(y[i], kSentinel) << "output overrun";
  for (size_t i = input_floats; i < v.size(); ++i) ASSERT_EQ(v[i], kSentinel) << "input scratch overrun";
  for (size_t i = product_floats; i < prod.size(); ++i) ASSERT_EQ(prod[i], kSentinel) << "product scratch overrun";
}

INSTANTIATE_TEST_SUITE_P(
    Geometry, WinogradTest,
    ::testing::Combine(
        ::testing::Values(Case{1, 16, 8, 8, 16, 1, 1, 1, 1, fb::Activation::NONE},
                          Case{2, 17, 9, 11, 19, 1, 1, 1, 1, fb::Activation::RELU},    // odd sizes, batch
                          Case{1, 20, 7, 7, 24, 0, 0, 0, 0, fb::Activation::CLIP},     // no padding, 5x5 out
                          Case{1, 16, 6, 13, 7, 2, 0, 1, 2, fb::Activation::SIGMOID},  // asymmetric pads
                          Case{1, 64, 40, 36, 20, 1, 1, 1, 1, fb::Activation::RELU},   // several tile blocks
                          Case{1, 300, 17, 17, 9, 1, 1, 1, 1, fb::Activation::NONE},   // more than one depth block
                          // Few columns: all of a deep k in one block; the
                          // second in several row blocks of twelve-row tiles.
                          Case{1, 300, 5, 5, 9, 1, 1, 1, 1, fb::Activation::NONE},
                          Case{1, 300, 7, 7, 256, 1, 1, 1, 1, fb::Activation::RELU},
                          Case{1, 16, 1, 1, 16, 2, 2, 2, 2, fb::Activation::NONE},  // one pixel, all padding
                          // Tile rows of 1 to 9 tiles (runs cut at row and
                          // panel ends, rows narrower than a vector's 18
                          // columns): DenseNet's 7x7 and 14x14, SqueezeNet's
                          // 13x13, and narrow or one-sided planes.
                          Case{1, 128, 7, 7, 32, 1, 1, 1, 1, fb::Activation::RELU},
                          Case{1, 32, 14, 14, 8, 1, 1, 1, 1, fb::Activation::NONE},
                          Case{2, 16, 13, 13, 20, 1, 1, 1, 1, fb::Activation::CLIP},
                          Case{1, 16, 9, 2, 7, 1, 1, 1, 1, fb::Activation::NONE},
                          Case{1, 16, 5, 17, 6, 0, 1, 1, 0, fb::Activation::RELU},
                          Case{1, 16, 11, 3, 6, 2, 0, 0, 2, fb::Activation::NONE}),
        ::testing::Values(GemmPath::kAuto, GemmPath::kAvx2, GemmPath::kPortable)),
    [](const ::testing::TestParamInfo<std::tuple<Case, GemmPath>>& info) {
      const auto& c = std::get<0>(info.param);
      const GemmPath path = std::get<1>(info.param);
      std::string act = fb::EnumNameActivation(c.activation);
      for (char& ch : act) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      return "n" + std::to_string(c.n) + "_c" + std::to_string(c.c) + "_in" + dims_name({c.h, c.w}) + "_m" +
             std::to_string(c.m) + "_p" + dims_name({c.pt, c.pl, c.pb, c.pr}, "") + "_" + act + "_" +
             gemm_path_name(path);
    });

}  // namespace
}  // namespace kiln::kernels
