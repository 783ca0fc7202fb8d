// The BF16 path of the packed GEMM (kiln plan --precision bf16 on the
// CPU): weights prepacked in BF16 as A (Conv) or B (Gemm, MatMul), the
// other operand rounded to BF16 as it is packed, FP32 accumulation.
// Checked against double-precision sums of the BF16-rounded operands:
// each product of two BF16 values is exact in FP32, so what is left is the
// FP32 summation's rounding, as in the FP32 path's tests. Sizes around every
// block edge (k odd, k one past a block, a last panel narrower than 16,
// rows past a multiple of 6), both operand layouts, im2col, the epilogue,
// threads (the same bits as one thread), and the pack layout itself.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gemm.h"
#include "kernel_test_values.h"
#include "kiln/kernels/float16.h"
#include "kiln/kernels/isa.h"
#include "kiln/runtime/posix_thread_pool.h"

namespace kiln::kernels {
namespace {

std::vector<uint16_t> prepack_a(int64_t m, int64_t k, const std::vector<float>& a) {
  std::vector<uint16_t> out(static_cast<size_t>(gemm_prepacked_a_bf16_elements(m, k)), 0xFFFF);
  gemm_prepack_a_bf16(m, k, a.data(), out.data());
  return out;
}

std::vector<uint16_t> prepack_b(int64_t k, int64_t n, const std::vector<float>& b, bool trans_b) {
  std::vector<uint16_t> out(static_cast<size_t>(gemm_prepacked_b_bf16_elements(k, n)), 0xFFFF);
  gemm_prepack_b_bf16(k, n, b.data(), trans_b, out.data());
  return out;
}

GemmMatrix bf16_operand(const std::vector<uint16_t>& packed) {
  GemmMatrix m;
  m.data = reinterpret_cast<const float*>(packed.data());
  m.prepacked = true;
  m.bf16 = true;
  return m;
}

double rounded(float v) { return bfloat16_to_float(float_to_bfloat16(v)); }

// Relative to the largest magnitude of the reference, as the FP32 tests.
void expect_close(const std::vector<double>& want, const std::vector<float>& got, int64_t m, int64_t n, int64_t ldc,
                  const std::string& what) {
  double scale = 1e-30;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double w = want[static_cast<size_t>(i * n + j)];
      ASSERT_LE(std::fabs(got[static_cast<size_t>(i * ldc + j)] - w), 1e-5 * scale) << what << " at " << i << ", " << j;
    }
  }
}

class Bf16GemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!bf16_available()) GTEST_SKIP() << "no BF16 products here (AVX512-BF16 on the avx512 path)";
  }
};

TEST(Bf16PackTest, LayoutPairsTheInnerDimension) {
  // A 7 x 3: two panels of six rows, k rounded up to 4, zeros past m and k.
  std::vector<float> a(21);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i + 1);
  const std::vector<uint16_t> pa = prepack_a(7, 3, a);
  ASSERT_EQ(pa.size(), 12u * 4);
  // Panel 0, pair 0: rows 0..5 at k = 0, 1.
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(bfloat16_to_float(pa[2 * r]), a[r * 3 + 0]);
    EXPECT_EQ(bfloat16_to_float(pa[2 * r + 1]), a[r * 3 + 1]);
    // Pair 1: k = 2, then the zero that pads k.
    EXPECT_EQ(bfloat16_to_float(pa[12 + 2 * r]), a[r * 3 + 2]);
    EXPECT_EQ(pa[12 + 2 * r + 1], 0);
  }
  // Panel 1: row 6, then zero rows.
  EXPECT_EQ(bfloat16_to_float(pa[24]), a[18]);
  EXPECT_EQ(bfloat16_to_float(pa[25]), a[19]);
  for (size_t i = 26; i < 36; ++i) EXPECT_EQ(pa[i], 0) << i;
  // B 3 x 17 (and its transpose): two panels of 16 columns.
  std::vector<float> b(51), bt(51);
  for (int p = 0; p < 3; ++p) {
    for (int j = 0; j < 17; ++j) b[p * 17 + j] = bt[j * 3 + p] = static_cast<float>(100 + p * 17 + j);
  }
  for (bool trans : {false, true}) {
    const std::vector<uint16_t> pb = prepack_b(3, 17, trans ? bt : b, trans);
    ASSERT_EQ(pb.size(), 4u * 32);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(bfloat16_to_float(pb[2 * j]), b[j]);
      EXPECT_EQ(bfloat16_to_float(pb[2 * j + 1]), b[17 + j]);
      EXPECT_EQ(bfloat16_to_float(pb[32 + 2 * j]), b[34 + j]);
      EXPECT_EQ(pb[32 + 2 * j + 1], 0);
    }
    // Panel 1 (at 16 * k2 = 64): column 16, then zeros.
    EXPECT_EQ(bfloat16_to_float(pb[64]), b[16]);
    EXPECT_EQ(bfloat16_to_float(pb[65]), b[33]);
    for (int j = 1; j < 16; ++j) EXPECT_EQ(pb[64 + 2 * j], 0);
  }
  // Round to nearest even: 1 + 2^-8 is halfway between two BF16 values
  // and goes to the even one (1); 1 + 3 * 2^-8 goes up.
  EXPECT_EQ(rounded(1.f + 1.f / 256), 1.0);
  EXPECT_EQ(rounded(1.f + 3.f / 256), 1.f + 4.f / 256);
}

struct Shape {
  int64_t m, n, k;
};

const Shape kShapes[] = {{1, 1, 1},     {5, 15, 3},     {6, 16, 2},   {7, 17, 255},   {13, 33, 256},  {72, 40, 257},
                         {73, 600, 31}, {100, 48, 600}, {12, 1, 100}, {1, 1000, 512}, {64, 49, 1152}, {30, 513, 9}};

// Weights as A (a convolution's), prepacked in BF16; B plain, transposed,
// or with the epilogue's row bias and a ReLU; C accumulated.
TEST_F(Bf16GemmTest, PrepackedAAgainstRoundedReference) {
  const Activation relu(fb::Activation::RELU, 0.f, 0.f);
  for (const Shape& s : kShapes) {
    for (int variant = 0; variant < 3; ++variant) {
      const bool trans_b = variant == 1, epilogue_on = variant == 2;
      const std::vector<float> a = values(static_cast<size_t>(s.m * s.k), 11);
      const std::vector<float> b = values(static_cast<size_t>(s.k * s.n), 12);
      const std::vector<float> bias = values(static_cast<size_t>(s.m), 13);
      const std::vector<uint16_t> pa = prepack_a(s.m, s.k, a);
      const int64_t ldc = s.n + 3;
      std::vector<float> out(static_cast<size_t>(s.m * ldc), kSentinel);
      std::vector<double> want(static_cast<size_t>(s.m * s.n));
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          double sum = epilogue_on ? bias[static_cast<size_t>(i)] : 0.0;
          for (int64_t p = 0; p < s.k; ++p) {
            const float bv = trans_b ? b[static_cast<size_t>(j * s.k + p)] : b[static_cast<size_t>(p * s.n + j)];
            sum += rounded(a[static_cast<size_t>(i * s.k + p)]) * rounded(bv);
          }
          want[static_cast<size_t>(i * s.n + j)] = epilogue_on && sum < 0 ? 0.0 : sum;
        }
      }
      GemmMatrix bm{b.data(), trans_b ? s.k : s.n, trans_b};
      GemmEpilogue epilogue;
      if (epilogue_on) {
        epilogue.row_bias = bias.data();
        epilogue.activation = relu.get();
      }
      std::vector<float> pack_b(static_cast<size_t>(gemm_pack_b_floats(s.k, s.n)) + 64, kSentinel);
      gemm_packed(s.m, s.n, s.k, bf16_operand(pa), bm, nullptr, out.data(), ldc, epilogue, nullptr, pack_b.data());
      const std::string what =
          "A " + dims_name({s.m, s.k}) + " by " + dims_name({s.k, s.n}) + " variant " + std::to_string(variant);
      expect_close(want, out, s.m, s.n, ldc, what);
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = s.n; j < ldc; ++j) ASSERT_EQ(out[static_cast<size_t>(i * ldc + j)], kSentinel) << what;
      }
      for (size_t i = static_cast<size_t>(gemm_pack_b_floats(s.k, s.n)); i < pack_b.size(); ++i) {
        ASSERT_EQ(pack_b[i], kSentinel) << what << ": pack_b overrun";
      }
    }
  }
}

// Weights as B (a Linear layer's), prepacked in BF16, plain or transposed
// before packing; A plain or transposed, packed at run time; the column
// bias.
TEST_F(Bf16GemmTest, PrepackedBAgainstRoundedReference) {
  for (const Shape& s : kShapes) {
    for (int variant = 0; variant < 3; ++variant) {
      const bool trans_a = variant == 1, trans_b = variant == 2;
      const std::vector<float> a = values(static_cast<size_t>(s.m * s.k), 21);
      const std::vector<float> b = values(static_cast<size_t>(s.k * s.n), 22);
      const std::vector<float> col = values(static_cast<size_t>(s.n), 23);
      const std::vector<uint16_t> pb = prepack_b(s.k, s.n, b, trans_b);
      std::vector<float> out(static_cast<size_t>(s.m * s.n), kSentinel);
      std::vector<double> want(static_cast<size_t>(s.m * s.n));
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          double sum = col[static_cast<size_t>(j)];
          for (int64_t p = 0; p < s.k; ++p) {
            const float av = trans_a ? a[static_cast<size_t>(p * s.m + i)] : a[static_cast<size_t>(i * s.k + p)];
            const float bv = trans_b ? b[static_cast<size_t>(j * s.k + p)] : b[static_cast<size_t>(p * s.n + j)];
            sum += rounded(av) * rounded(bv);
          }
          want[static_cast<size_t>(i * s.n + j)] = sum;
        }
      }
      GemmEpilogue epilogue;
      epilogue.col_bias = col.data();
      std::vector<float> pack_a(static_cast<size_t>(gemm_pack_a_floats(s.m, s.k)) + 64, kSentinel);
      gemm_packed(s.m, s.n, s.k, {a.data(), trans_a ? s.m : s.k, trans_a}, bf16_operand(pb), nullptr, out.data(), s.n,
                  epilogue, pack_a.data(), nullptr);
      expect_close(
          want, out, s.m, s.n, s.n,
          "A " + dims_name({s.m, s.k}) + " by B " + dims_name({s.k, s.n}) + " variant " + std::to_string(variant));
      for (size_t i = static_cast<size_t>(gemm_pack_a_floats(s.m, s.k)); i < pack_a.size(); ++i) {
        ASSERT_EQ(pack_a[i], kSentinel) << "pack_a overrun";
      }
    }
  }
}

// A convolution's im2col operand, converted after it is packed: 3x3 pad 1
// and stride 2, against the same product over an explicit im2col matrix.
TEST_F(Bf16GemmTest, Im2colOperandMatchesExplicitMatrix) {
  const int64_t c = 19, h = 11, w = 13, m = 20;
  for (int64_t stride : {1, 2}) {
    GemmIm2col g;
    const std::vector<float> x = values(static_cast<size_t>(c * h * w), 31);
    g.x = x.data();
    g.channels = c;
    g.h = h;
    g.w = w;
    g.kh = g.kw = 3;
    g.sh = g.sw = stride;
    g.pt = g.pl = 1;
    g.oh = (h + 2 - 3) / stride + 1;
    g.ow = (w + 2 - 3) / stride + 1;
    const int64_t k = c * 9, n = g.oh * g.ow;
    std::vector<float> cols(static_cast<size_t>(k * n), 0.f);
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t ky = 0; ky < 3; ++ky) {
        for (int64_t kx = 0; kx < 3; ++kx) {
          for (int64_t oy = 0; oy < g.oh; ++oy) {
            for (int64_t ox = 0; ox < g.ow; ++ox) {
              const int64_t iy = oy * stride - 1 + ky, ix = ox * stride - 1 + kx;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              cols[static_cast<size_t>(((ch * 3 + ky) * 3 + kx) * n + oy * g.ow + ox)] =
                  x[static_cast<size_t>((ch * h + iy) * w + ix)];
            }
          }
        }
      }
    }
    const std::vector<float> a = values(static_cast<size_t>(m * k), 32);
    const std::vector<uint16_t> pa = prepack_a(m, k, a);
    std::vector<float> pack_b(static_cast<size_t>(gemm_pack_b_floats(k, n)));
    std::vector<float> got(static_cast<size_t>(m * n)), want(static_cast<size_t>(m * n));
    gemm_packed(m, n, k, bf16_operand(pa), {}, &g, got.data(), n, {}, nullptr, pack_b.data());
    gemm_packed(m, n, k, bf16_operand(pa), {cols.data(), n, false}, nullptr, want.data(), n, {}, nullptr,
                pack_b.data());
    EXPECT_EQ(got, want) << "stride " << stride;
  }
}

// Threads split the tiles and the packing; every output keeps its bits.
TEST_F(Bf16GemmTest, ThreadsGiveTheSameBits) {
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(2), Error::kOk);
  for (const Shape& s : {Shape{256, 784, 1152}, Shape{197, 384, 1536}, Shape{64, 3136, 147}}) {
    const std::vector<float> a = values(static_cast<size_t>(s.m * s.k), 41);
    const std::vector<float> b = values(static_cast<size_t>(s.k * s.n), 42);
    const std::vector<uint16_t> pa = prepack_a(s.m, s.k, a);
    const std::vector<uint16_t> pb = prepack_b(s.k, s.n, b, false);
    std::vector<float> pack_a(static_cast<size_t>(gemm_pack_a_floats(s.m, s.k)));
    std::vector<float> pack_b(static_cast<size_t>(gemm_pack_b_floats(s.k, s.n)));
    for (bool weights_as_a : {true, false}) {
      std::vector<float> one(static_cast<size_t>(s.m * s.n)), two(one.size());
      for (int run = 0; run < 2; ++run) {
        ThreadPool* p = run == 0 ? nullptr : &pool;
        std::vector<float>& out = run == 0 ? one : two;
        if (weights_as_a) {
          gemm_packed(s.m, s.n, s.k, bf16_operand(pa), {b.data(), s.n, false}, nullptr, out.data(), s.n, {}, nullptr,
                      pack_b.data(), GemmPath::kAuto, p);
        } else {
          gemm_packed(s.m, s.n, s.k, {a.data(), s.k, false}, bf16_operand(pb), nullptr, out.data(), s.n, {},
                      pack_a.data(), nullptr, GemmPath::kAuto, p);
        }
      }
      EXPECT_EQ(one, two) << dims_name({s.m, s.n, s.k}) << (weights_as_a ? " weights as A" : " weights as B");
    }
  }
}

// Winograd F(2x2, 3x3) with BF16 transformed weights: the 16 products in
// BF16 over the transformed inputs rounded in place. Against a direct
// double-precision convolution of the unrounded operands: the transforms
// add and subtract up to four values before rounding and nine products'
// sums after, so the rounding error is a few u of the output's scale
// (u = 2^-8), not u of each value; 4u bounds it (about 1.1u seen). Partial tiles, odd
// channel counts (an odd last pair), several tile blocks, the scratch
// never overrun.
TEST_F(Bf16GemmTest, WinogradProductsInBf16) {
  struct Geometry {
    int64_t c, h, w, m;
  };
  for (const Geometry& k : {Geometry{17, 9, 11, 13}, Geometry{64, 28, 28, 64}, Geometry{3, 5, 6, 7}}) {
    const int64_t oh = k.h, ow = k.w;  // pads 1 all round
    const int64_t tiles = (oh + 1) / 2 * ((ow + 1) / 2);
    const std::vector<float> x = values(static_cast<size_t>(k.c * k.h * k.w), 51);
    const std::vector<float> w = values(static_cast<size_t>(k.m * k.c * 9), 52);
    std::vector<uint16_t> u(static_cast<size_t>(winograd_weight_bf16_elements(k.m, k.c)) + 8, 0xABCD);
    winograd_transform_weights_bf16(k.m, k.c, w.data(), u.data());
    for (size_t i = u.size() - 8; i < u.size(); ++i) ASSERT_EQ(u[i], 0xABCD) << "weights overrun";
    const size_t input_floats = static_cast<size_t>(winograd_input_floats(k.c, tiles));
    const size_t product_floats = static_cast<size_t>(winograd_product_floats(k.m, k.c, tiles));
    std::vector<float> v(input_floats + 64, kSentinel), prod(product_floats + 64, kSentinel);
    std::vector<float> y(static_cast<size_t>(k.m * oh * ow));
    WinogradConv conv;
    // clang-format off
    conv.n = 1; conv.c = k.c; conv.h = k.h; conv.w = k.w; conv.m = k.m;
    conv.oh = oh; conv.ow = ow; conv.pt = 1; conv.pl = 1;
    // clang-format on
    conv.x = x.data();
    conv.weights = reinterpret_cast<const float*>(u.data());
    conv.bf16 = true;
    conv.y = y.data();
    conv.transformed_input = v.data();
    conv.transformed_input_floats = static_cast<int64_t>(input_floats);
    conv.products = prod.data();
    conv.products_floats = static_cast<int64_t>(product_floats);
    winograd_conv(conv);
    for (size_t i = input_floats; i < v.size(); ++i) ASSERT_EQ(v[i], kSentinel) << "transformed inputs overrun";
    for (size_t i = product_floats; i < prod.size(); ++i) ASSERT_EQ(prod[i], kSentinel) << "products overrun";
    std::vector<double> want(y.size());
    double scale = 1e-30;
    for (int64_t o = 0; o < k.m; ++o) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = 0.0;
          for (int64_t ch = 0; ch < k.c; ++ch) {
            for (int64_t ky = 0; ky < 3; ++ky) {
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = oy - 1 + ky, ix = ox - 1 + kx;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                sum += static_cast<double>(w[static_cast<size_t>(((o * k.c + ch) * 3 + ky) * 3 + kx)]) *
                       x[static_cast<size_t>((ch * k.h + iy) * k.w + ix)];
              }
            }
          }
          want[static_cast<size_t>((o * oh + oy) * ow + ox)] = sum;
          scale = std::max(scale, std::fabs(sum));
        }
      }
    }
    double worst = 0.0;
    for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(y[i] - want[i]) / scale);
    EXPECT_LE(worst, 4.0 / 256) << dims_name({k.c, k.h, k.w, k.m});
    EXPECT_GT(worst, 0.0) << "BF16 rounding shows";
    std::printf("winograd bf16 %s: worst error %.2e of the output's scale\n", dims_name({k.c, k.h, k.w, k.m}).c_str(),
                worst);
  }
}

// The switch: capped below AVX-512, nothing multiplies BF16 (programs with
// BF16 weights are then refused at load: tests/models).
TEST(Bf16AvailableTest, FollowsTheIsaCap) {
  const Isa before = active_isa();
  if (processor_has(Isa::kAvx2)) {
    ASSERT_EQ(set_isa(Isa::kAvx2), Error::kOk);
    EXPECT_FALSE(bf16_available());
  }
  ASSERT_EQ(set_isa(Isa::kScalar), Error::kOk);
  EXPECT_FALSE(bf16_available());
  ASSERT_EQ(set_isa(before), Error::kOk);
}

}  // namespace
}  // namespace kiln::kernels
