// The packed GEMM and the depthwise kernel against plain double-precision
// loops: odd sizes around every block edge, transposes, accumulation, the
// bias and activation epilogue, im2col geometry, both micro-kernels; and
// that nothing is written outside C or past the scratch sizes the planner
// is told.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "arm/neon.h"
#include "flatbuffers/flatbuffers.h"
#include "gemm.h"
#include "isa_switch.h"
#include "kernel_test_values.h"
#include "kiln/runtime/posix_thread_pool.h"
#include "parallel.h"
#include "pool_8bit.h"
#include "row_checks.h"
#include "x86/x86.h"

namespace kiln::kernels {
namespace {

// Scratch with a guard region after the planned size, which must stay
// untouched.
struct Scratch {
  Scratch(int64_t m, int64_t n, int64_t k)
      : a_floats(gemm_pack_a_floats(m, k)),
        b_floats(gemm_pack_b_floats(k, n)),
        a(static_cast<size_t>(a_floats) + 64, kSentinel),
        b(static_cast<size_t>(b_floats) + 64, kSentinel) {}
  void expect_guards_intact() const {
    for (size_t i = static_cast<size_t>(a_floats); i < a.size(); ++i) ASSERT_EQ(a[i], kSentinel) << "pack_a overrun";
    for (size_t i = static_cast<size_t>(b_floats); i < b.size(); ++i) ASSERT_EQ(b[i], kSentinel) << "pack_b overrun";
  }
  int64_t a_floats, b_floats;
  std::vector<float> a, b;
};

// Relative to the largest magnitude of the reference.
void expect_close(const std::vector<double>& want, const float* got, int64_t m, int64_t n, int64_t ldc) {
  double scale = 1e-30;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double w = want[static_cast<size_t>(i * n + j)];
      ASSERT_LE(std::fabs(got[i * ldc + j] - w), 1e-5 * scale) << "at " << i << ", " << j;
    }
  }
}

struct Case {
  int64_t m, n, k;
  bool trans_a, trans_b;
};

class PackedGemmTest : public ::testing::TestWithParam<std::tuple<Case, GemmPath>> {};

TEST_P(PackedGemmTest, MatchesReference) {
  const auto [c, path] = GetParam();
  const std::vector<float> a = values(static_cast<size_t>(c.m * c.k), 1);
  const std::vector<float> b = values(static_cast<size_t>(c.k * c.n), 2);
  const int64_t lda = c.trans_a ? c.m : c.k, ldb = c.trans_b ? c.k : c.n;
  const int64_t ldc = c.n + 3;  // a wider C: the columns past n stay untouched
  std::vector<float> out(static_cast<size_t>(c.m * ldc), kSentinel);
  // Accumulate onto a C that starts at known values.
  const std::vector<float> start = values(static_cast<size_t>(c.m * c.n), 3);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) out[static_cast<size_t>(i * ldc + j)] = start[static_cast<size_t>(i * c.n + j)];
  }
  std::vector<double> want(static_cast<size_t>(c.m * c.n));
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = start[static_cast<size_t>(i * c.n + j)];
      for (int64_t p = 0; p < c.k; ++p) {
        const float av = c.trans_a ? a[static_cast<size_t>(p * lda + i)] : a[static_cast<size_t>(i * lda + p)];
        const float bv = c.trans_b ? b[static_cast<size_t>(j * ldb + p)] : b[static_cast<size_t>(p * ldb + j)];
        sum += static_cast<double>(av) * bv;
      }
      want[static_cast<size_t>(i * c.n + j)] = sum;
    }
  }
  Scratch scratch(c.m, c.n, c.k);
  GemmEpilogue epilogue;
  epilogue.accumulate = true;
  gemm_packed(c.m, c.n, c.k, {a.data(), lda, c.trans_a}, {b.data(), ldb, c.trans_b}, nullptr, out.data(), ldc, epilogue,
              scratch.a.data(), scratch.b.data(), path);
  expect_close(want, out.data(), c.m, c.n, ldc);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = c.n; j < ldc; ++j) ASSERT_EQ(out[static_cast<size_t>(i * ldc + j)], kSentinel);
  }
  scratch.expect_guards_intact();
}

// Sizes below, at and past the register tile (6 x 16) and the blocks
// (kGemmMc = 72 rows, kGemmNc = 512 columns, kGemmKc = 256 deep); single
// rows (the unpacked path).
INSTANTIATE_TEST_SUITE_P(
    Sizes, PackedGemmTest,
    ::testing::Combine(::testing::Values(Case{1, 1, 1, false, false}, Case{6, 16, 8, false, false},
                                         Case{5, 15, 7, false, false}, Case{7, 17, 3, false, true},
                                         Case{13, 33, 257, true, false}, Case{73, 20, 40, true, true},
                                         Case{12, 513, 256, false, true}, Case{80, 530, 300, false, false},
                                         Case{2, 1000, 9, false, false}, Case{150, 3, 512, true, true},
                                         Case{1, 600, 70, false, true}, Case{1, 37, 300, false, false},
                                         Case{1, 20, 5, true, false}),
                       ::testing::Values(GemmPath::kAuto, GemmPath::kAvx2, GemmPath::kPortable)),
    [](const ::testing::TestParamInfo<std::tuple<Case, GemmPath>>& info) {
      const auto& c = std::get<0>(info.param);
      const GemmPath path = std::get<1>(info.param);
      return "m" + std::to_string(c.m) + "_n" + std::to_string(c.n) + "_k" + std::to_string(c.k) +
             (c.trans_a ? "_ta" : "") + (c.trans_b ? "_tb" : "") + "_" + gemm_path_name(path);
    });

double activate(double v, fb::Activation kind, float alpha, float beta) {
  switch (kind) {
    case fb::Activation::RELU: return v > 0 ? v : 0;
    case fb::Activation::CLIP: return std::min<double>(std::max<double>(v, alpha), beta);
    case fb::Activation::SIGMOID: return 1 / (1 + std::exp(-v));
    default: return v;
  }
}

TEST(PackedGemmEpilogueTest, BiasesAndActivationsOnEveryBlock) {
  const int64_t m = 9, n = 40, k = 300;  // two inner blocks: the epilogue runs once, on the last
  const std::vector<float> a = values(static_cast<size_t>(m * k), 4);
  const std::vector<float> b = values(static_cast<size_t>(k * n), 5);
  const std::vector<float> bias = values(static_cast<size_t>(m), 6);
  const std::vector<float> col_bias = values(static_cast<size_t>(n), 7);
  for (GemmPath path : {GemmPath::kAuto, GemmPath::kAvx2, GemmPath::kPortable}) {
    for (const auto& [kind, alpha, beta] :
         {std::tuple{fb::Activation::RELU, 0.f, 0.f}, std::tuple{fb::Activation::CLIP, -0.5f, 0.7f},
          std::tuple{fb::Activation::SIGMOID, 0.f, 0.f}}) {
      const Activation activation(kind, alpha, beta);
      std::vector<float> out(static_cast<size_t>(m * n), kSentinel);  // overwritten, not accumulated
      Scratch scratch(m, n, k);
      GemmEpilogue epilogue;
      epilogue.row_bias = bias.data();
      epilogue.col_bias = col_bias.data();
      epilogue.activation = activation.get();
      gemm_packed(m, n, k, {a.data(), k, false}, {b.data(), n, false}, nullptr, out.data(), n, epilogue,
                  scratch.a.data(), scratch.b.data(), path);
      std::vector<double> want(static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = static_cast<double>(bias[static_cast<size_t>(i)]) + col_bias[static_cast<size_t>(j)];
          for (int64_t p = 0; p < k; ++p) {
            sum += static_cast<double>(a[static_cast<size_t>(i * k + p)]) * b[static_cast<size_t>(p * n + j)];
          }
          want[static_cast<size_t>(i * n + j)] = activate(sum, kind, alpha, beta);
        }
      }
      expect_close(want, out.data(), m, n, n);
      scratch.expect_guards_intact();
    }
  }
}

TEST(PackedGemmTest, PrepackedOperandsMatchRuntimePacking) {
  for (GemmPath path : {GemmPath::kAuto, GemmPath::kAvx2, GemmPath::kPortable}) {
    for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{7, 19, 5}, {80, 530, 300}, {2, 16, 600}}) {
      const std::vector<float> a = values(static_cast<size_t>(m * k), 11);
      const std::vector<float> b = values(static_cast<size_t>(k * n), 12);  // given transposed: n x k
      std::vector<float> pa(static_cast<size_t>(gemm_prepacked_a_floats(m, k)));
      std::vector<float> pb(static_cast<size_t>(gemm_prepacked_b_floats(k, n)));
      gemm_prepack_a(m, k, a.data(), pa.data());
      gemm_prepack_b(k, n, b.data(), true, pb.data());
      Scratch scratch(m, n, k);
      std::vector<float> want(static_cast<size_t>(m * n)), got(static_cast<size_t>(m * n));
      gemm_packed(m, n, k, {a.data(), k, false}, {b.data(), k, true}, nullptr, want.data(), n, GemmEpilogue{},
                  scratch.a.data(), scratch.b.data(), path);
      GemmMatrix pb_matrix{pb.data(), 0, false, true};
      pb_matrix.whole_k = n <= 4 * kGemmNr;  // as Winograd asks on small planes
      gemm_packed(m, n, k, {pa.data(), k, false, true}, pb_matrix, nullptr, got.data(), n, GemmEpilogue{}, nullptr,
                  nullptr, path);
      if (pb_matrix.whole_k && k > kGemmKc) {
        // Few columns against two prepacked operands, all of k in one
        // block (gemm.h): a different order of the same sums.
        for (size_t i = 0; i < want.size(); ++i) {
          EXPECT_NEAR(want[i], got[i], 1e-4f * (1.f + std::fabs(want[i]))) << m << "x" << n << "x" << k << " at " << i;
        }
        continue;
      }
      EXPECT_EQ(want, got) << m << "x" << n << "x" << k;  // same products in the same order
    }
  }
}

// At most four B panels against prepacked A deeper than one block of k
// (1x1 convolutions on 7x7 planes): the tiles run A panel by A panel. Each
// tile still sums its whole k block by block as with A packed at run time
// (same bits), and matches the double-precision product; B read in place,
// packed, and packed through an input affine map; bias and Relu, and
// accumulation onto C; C wider than n stays untouched past it.
// The edge tests' epilogues: mode 0 accumulates into C, mode 1 adds row
// and column bias and clamps.
GemmEpilogue accumulate_or_bias(int mode, const std::vector<float>& row_bias, const std::vector<float>& col_bias,
                                const Activation& clamp) {
  GemmEpilogue epilogue;
  epilogue.accumulate = mode == 0;
  epilogue.row_bias = mode == 0 ? nullptr : row_bias.data();
  epilogue.col_bias = mode == 0 ? nullptr : col_bias.data();
  epilogue.activation = mode == 0 ? nullptr : clamp.get();
  return epilogue;
}

// got (rows x cols, row-major) holds want's bits in its first m rows and
// n columns and start's everywhere else (nothing written past them).
void expect_same_inside(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& start,
                        int64_t rows, int64_t cols, int64_t m, int64_t n) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const size_t at = static_cast<size_t>(i * cols + j);
      if (i < m && j < n) {
        ASSERT_EQ(got[at], want[at]) << "row " << i << " column " << j;
      } else {
        ASSERT_EQ(got[at], start[at]) << "written outside the product: row " << i << " column " << j;
      }
    }
  }
}

// A last B panel of at most kGemmEdgeColumns columns runs with rows in
// lanes on AVX-512 (x86::micro_kernel_avx512_edge): its columns must hold
// the same bits as when the same columns lie in whole 16-column tiles (B
// widened to a multiple of 16), with A prepacked or packed at run time,
// across blocks of k, with row and column bias, clamp and accumulate.
TEST(PackedGemmTest, EdgeColumnsGiveTheBitsOfWholeTiles) {
  const Activation relu6(fb::Activation::CLIP, 0.f, 0.6f);
  // clang-format off
  for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{75, 49, 600}, {7, 49, 257}, {512, 49, 300},
                                {40, 36, 300}, {13, 18, 40}, {150, 3, 520}, {30, 196, 100}, {6, 1, 1}}) {
    // clang-format on
    for (int mode = 0; mode < 2; ++mode) {  // accumulate; row and column bias + clamp
      for (bool prepacked : {false, true}) {
        SCOPED_TRACE("m" + std::to_string(m) + " n" + std::to_string(n) + " k" + std::to_string(k) + " mode " +
                     std::to_string(mode) + (prepacked ? " prepacked" : ""));
        const int64_t wide = gemm_round_up(n, kGemmNr);
        const std::vector<float> a = values(static_cast<size_t>(m * k), 51);
        const std::vector<float> b_wide = values(static_cast<size_t>(k * wide), 52);
        std::vector<float> b(static_cast<size_t>(k * n));
        for (int64_t p = 0; p < k; ++p) {
          for (int64_t j = 0; j < n; ++j) b[static_cast<size_t>(p * n + j)] = b_wide[static_cast<size_t>(p * wide + j)];
        }
        const std::vector<float> row_bias = values(static_cast<size_t>(m), 53);
        const std::vector<float> col_bias = values(static_cast<size_t>(wide), 54);
        const std::vector<float> start = values(static_cast<size_t>(m * wide), 55);
        std::vector<float> pa(static_cast<size_t>(gemm_prepacked_a_floats(m, k)));
        gemm_prepack_a(m, k, a.data(), pa.data());
        const GemmMatrix am = prepacked ? GemmMatrix{pa.data(), k, false, true} : GemmMatrix{a.data(), k, false};
        const GemmEpilogue epilogue = accumulate_or_bias(mode, row_bias, col_bias, relu6);
        std::vector<float> edge(start), tiles(start);  // both ldc = wide
        Scratch edge_scratch(m, n, k), tile_scratch(m, wide, k);
        gemm_packed(m, n, k, am, {b.data(), n, false}, nullptr, edge.data(), wide, epilogue, edge_scratch.a.data(),
                    edge_scratch.b.data(), GemmPath::kAuto);
        gemm_packed(m, wide, k, am, {b_wide.data(), wide, false}, nullptr, tiles.data(), wide, epilogue,
                    tile_scratch.a.data(), tile_scratch.b.data(), GemmPath::kAuto);
        expect_same_inside(edge, tiles, start, m, wide, m, n);
        edge_scratch.expect_guards_intact();
      }
    }
  }
}

// A last A panel of at most kGemmRowEdge rows runs against several B
// panels a call on AVX-512 (x86::micro_kernel_avx512_row_edge): its rows
// must hold the same bits as when they lie in whole 6-row panels (A
// lengthened to a multiple of 6), with B prepacked (weights), packed at
// run time or read in place, across blocks of k, with a last B panel
// narrower than 16 or of edge columns, row and column bias and clamp.
TEST(PackedGemmTest, EdgeRowsGiveTheBitsOfWholeTiles) {
  const Activation relu6(fb::Activation::CLIP, 0.f, 0.6f);
  // clang-format off
  for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{49, 96, 300}, {50, 200, 40}, {7, 132, 257},
                                {8, 80, 600}, {74, 112, 100}, {13, 1000, 20}, {145, 64, 30}}) {
    // clang-format on
    for (int mode = 0; mode < 2; ++mode) {          // accumulate; row and column bias + clamp
      for (int b_kind = 0; b_kind < 3; ++b_kind) {  // plain; transposed (packed at run time); prepacked
        SCOPED_TRACE("m" + std::to_string(m) + " n" + std::to_string(n) + " k" + std::to_string(k) + " mode " +
                     std::to_string(mode) + " B kind " + std::to_string(b_kind));
        const int64_t tall = gemm_round_up(m, kGemmMr);
        const std::vector<float> a_tall = values(static_cast<size_t>(tall * k), 61);
        const std::vector<float> b = values(static_cast<size_t>(k * n), 62);
        std::vector<float> pb(static_cast<size_t>(gemm_prepacked_b_floats(k, n)));
        gemm_prepack_b(k, n, b.data(), b_kind == 1, pb.data());
        GemmMatrix bm{b.data(), b_kind == 1 ? k : n, b_kind == 1};
        if (b_kind == 2) bm = GemmMatrix{pb.data(), 0, false, true};
        const std::vector<float> row_bias = values(static_cast<size_t>(tall), 63);
        const std::vector<float> col_bias = values(static_cast<size_t>(n), 64);
        const std::vector<float> start = values(static_cast<size_t>(tall * n), 65);
        const GemmEpilogue epilogue = accumulate_or_bias(mode, row_bias, col_bias, relu6);
        std::vector<float> edge(start), tiles(start);
        Scratch edge_scratch(m, n, k), tile_scratch(tall, n, k);
        // A's first m rows alone, then all of its rows (no last panel
        // short of six).
        gemm_packed(m, n, k, {a_tall.data(), k, false}, bm, nullptr, edge.data(), n, epilogue, edge_scratch.a.data(),
                    edge_scratch.b.data(), GemmPath::kAuto);
        gemm_packed(tall, n, k, {a_tall.data(), k, false}, bm, nullptr, tiles.data(), n, epilogue,
                    tile_scratch.a.data(), tile_scratch.b.data(), GemmPath::kAuto);
        expect_same_inside(edge, tiles, start, tall, n, m, n);
        edge_scratch.expect_guards_intact();
      }
    }
  }
}

TEST(PackedGemmTest, FewColumnsAgainstDeepPrepackedA) {
  const Activation relu(fb::Activation::RELU, 0.f, 0.f);
  for (GemmPath path : {GemmPath::kAuto, GemmPath::kAvx2, GemmPath::kPortable}) {
    // clang-format off
    for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{7, 49, 257}, {128, 49, 600}, {20, 17, 513},
                                  {13, 64, 300}, {6, 2, 1152}, {100, 33, 520}, {30, 65, 300}, {40, 96, 300},
                                  // clang-format on
                                  {520, 150, 520}}) {
      for (int mode = 0; mode < 3; ++mode) {  // accumulate; bias + Relu; bias + Relu through the affine map
        SCOPED_TRACE(std::string(gemm_path_name(path)) + " m" + std::to_string(m) + " n" + std::to_string(n) + " k" +
                     std::to_string(k) + " mode " + std::to_string(mode));
        const std::vector<float> a = values(static_cast<size_t>(m * k), 41);
        const std::vector<float> b = values(static_cast<size_t>(k * n), 42);
        const std::vector<float> bias = values(static_cast<size_t>(m), 43);
        const std::vector<float> scale = values(static_cast<size_t>(k), 44);
        const std::vector<float> shift = values(static_cast<size_t>(k), 45);
        const std::vector<float> start = values(static_cast<size_t>(m * n), 46);
        std::vector<float> pa(static_cast<size_t>(gemm_prepacked_a_floats(m, k)));
        gemm_prepack_a(m, k, a.data(), pa.data());
        GemmMatrix bm{b.data(), n, false, false};
        if (mode == 2) {
          bm.row_scale = scale.data();
          bm.row_shift = shift.data();
          bm.row_relu = true;
        }
        GemmEpilogue epilogue;
        epilogue.accumulate = mode == 0;
        epilogue.row_bias = mode == 0 ? nullptr : bias.data();
        epilogue.activation = mode == 0 ? nullptr : relu.get();
        const int64_t ldc = n + 3;
        std::vector<float> want_bits(static_cast<size_t>(m * ldc), kSentinel), got(want_bits);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            want_bits[static_cast<size_t>(i * ldc + j)] = got[static_cast<size_t>(i * ldc + j)] =
                start[static_cast<size_t>(i * n + j)];
          }
        }
        Scratch packed_at_run_time(m, n, k), scratch(m, n, k);
        gemm_packed(m, n, k, {a.data(), k, false}, bm, nullptr, want_bits.data(), ldc, epilogue,
                    packed_at_run_time.a.data(), packed_at_run_time.b.data(), path);
        gemm_packed(m, n, k, {pa.data(), k, false, true}, bm, nullptr, got.data(), ldc, epilogue, nullptr,
                    scratch.b.data(), path);
        ASSERT_EQ(want_bits, got);
        std::vector<double> want(static_cast<size_t>(m * n));
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double sum = mode == 0 ? start[static_cast<size_t>(i * n + j)] : bias[static_cast<size_t>(i)];
            for (int64_t p = 0; p < k; ++p) {
              float x = b[static_cast<size_t>(p * n + j)];
              if (mode == 2) {
                x = x * scale[static_cast<size_t>(p)] + shift[static_cast<size_t>(p)];
                if (!(x > 0.f)) x = 0.f;
              }
              sum += static_cast<double>(a[static_cast<size_t>(i * k + p)]) * x;
            }
            want[static_cast<size_t>(i * n + j)] = mode == 0 ? sum : (sum > 0 ? sum : 0);
          }
        }
        expect_close(want, got.data(), m, n, ldc);
        scratch.expect_guards_intact();
      }
    }
  }
}

// One column of B against prepacked A (a 1x1 convolution on a 1x1 plane):
// the matrix-vector product over A's panels in place. Rows not a multiple
// of the panel, one and two inner blocks, tails of the 8-column step, a
// strided and a transposed column, C strided; the bias with a clamp, with
// Sigmoid (after the product), and accumulation onto C.
TEST(PackedGemmTest, OneColumnAgainstPrepackedA) {
  const Activation relu(fb::Activation::RELU, 0.f, 0.f), clip(fb::Activation::CLIP, -0.3f, 0.4f),
      sigmoid(fb::Activation::SIGMOID, 0.f, 0.f);
  struct Epilogue {
    const Activation* activation;
    fb::Activation kind;
    float alpha, beta;
    bool accumulate;
  };
  const Epilogue epilogues[] = {{nullptr, fb::Activation::NONE, 0.f, 0.f, true},
                                {&relu, fb::Activation::RELU, 0.f, 0.f, false},
                                {&clip, fb::Activation::CLIP, -0.3f, 0.4f, false},
                                {&sigmoid, fb::Activation::SIGMOID, 0.f, 0.f, false}};
  for (GemmPath path : {GemmPath::kAuto, GemmPath::kAvx2, GemmPath::kPortable}) {
    // clang-format off
    for (const auto& [m, k] : {std::pair<int64_t, int64_t>{1, 1}, {5, 1}, {6, 7}, {7, 48}, {13, 28}, {96, 4},
                               {100, 257}, {20, 600}, {40, 1152}}) {
      for (const auto& [ldb, trans_b, ldc] : {std::tuple<int64_t, bool, int64_t>{1, false, 1}, {3, false, 2},
                                              {5, true, 1}}) {
        // clang-format on
        for (const Epilogue& e : epilogues) {
          SCOPED_TRACE(std::string(gemm_path_name(path)) + " m" + std::to_string(m) + " k" + std::to_string(k) +
                       " ldb" + std::to_string(ldb) + (trans_b ? " trans_b" : "") + " ldc" + std::to_string(ldc) +
                       " activation " + std::to_string(static_cast<int>(e.kind)) + (e.accumulate ? " +C" : ""));
          const std::vector<float> a = values(static_cast<size_t>(m * k), 21);
          // B's column: entry p at b[p * ldb], or (transposed, one row of k) at b[p].
          const std::vector<float> b = values(static_cast<size_t>(k * ldb), 22);
          const std::vector<float> bias = values(static_cast<size_t>(m), 23);
          const std::vector<float> col_bias = values(1, 24);
          const std::vector<float> start = values(static_cast<size_t>(m), 25);
          std::vector<float> pa(static_cast<size_t>(gemm_prepacked_a_floats(m, k)));
          gemm_prepack_a(m, k, a.data(), pa.data());
          std::vector<float> out(static_cast<size_t>(m * ldc), kSentinel);
          for (int64_t i = 0; i < m; ++i) out[static_cast<size_t>(i * ldc)] = start[static_cast<size_t>(i)];
          // Each row within 1e-6 of the sum of its terms' magnitudes (a clamp
          // can leave the result far smaller than the sum it clamped).
          std::vector<double> want(static_cast<size_t>(m)), tolerance(static_cast<size_t>(m));
          for (int64_t i = 0; i < m; ++i) {
            double sum = e.accumulate ? static_cast<double>(start[static_cast<size_t>(i)])
                                      : static_cast<double>(bias[static_cast<size_t>(i)]) + col_bias[0];
            double magnitude = std::fabs(sum);
            for (int64_t p = 0; p < k; ++p) {
              const double term = static_cast<double>(a[static_cast<size_t>(i * k + p)]) *
                                  b[static_cast<size_t>(trans_b ? p : p * ldb)];
              sum += term;
              magnitude += std::fabs(term);
            }
            want[static_cast<size_t>(i)] = activate(sum, e.kind, e.alpha, e.beta);
            tolerance[static_cast<size_t>(i)] = 1e-6 * magnitude + 1e-7;
          }
          Scratch scratch(m, 1, k);
          GemmEpilogue epilogue;
          epilogue.accumulate = e.accumulate;
          epilogue.row_bias = e.accumulate ? nullptr : bias.data();
          epilogue.col_bias = e.accumulate ? nullptr : col_bias.data();
          epilogue.activation = e.activation != nullptr ? e.activation->get() : nullptr;
          gemm_packed(m, 1, k, {pa.data(), k, false, true}, {b.data(), trans_b ? k : ldb, trans_b}, nullptr, out.data(),
                      ldc, epilogue, nullptr, scratch.b.data(), path);
          for (int64_t i = 0; i < m; ++i) {
            ASSERT_LE(std::fabs(out[static_cast<size_t>(i * ldc)] - want[static_cast<size_t>(i)]),
                      tolerance[static_cast<size_t>(i)])
                << "row " << i;
            for (int64_t j = 1; j < ldc; ++j) ASSERT_EQ(out[static_cast<size_t>(i * ldc + j)], kSentinel);
          }
          scratch.expect_guards_intact();
        }
      }
    }
  }
}

// One column with the input affine map (a BatchNormalization and Relu
// fused ahead of a 1x1 convolution on a 1x1 plane): the column is read
// through it as on the panel path; the matrix-vector product over A's
// panels ignored it.
TEST(PackedGemmTest, OneColumnAgainstPrepackedAWithInputAffine) {
  const int64_t m = 20, k = 300;
  const std::vector<float> a = values(static_cast<size_t>(m * k), 31);
  const std::vector<float> b = values(static_cast<size_t>(k), 32);
  const std::vector<float> scale = values(static_cast<size_t>(k), 33);
  const std::vector<float> shift = values(static_cast<size_t>(k), 34);
  std::vector<float> pa(static_cast<size_t>(gemm_prepacked_a_floats(m, k)));
  gemm_prepack_a(m, k, a.data(), pa.data());
  for (GemmPath path : {GemmPath::kAuto, GemmPath::kAvx2, GemmPath::kPortable}) {
    for (bool relu : {false, true}) {
      SCOPED_TRACE(std::string(gemm_path_name(path)) + (relu ? " relu" : ""));
      GemmMatrix column{b.data(), 1, false, false};
      column.row_scale = scale.data();
      column.row_shift = shift.data();
      column.row_relu = relu;
      std::vector<double> want(static_cast<size_t>(m));
      for (int64_t i = 0; i < m; ++i) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          float x = b[static_cast<size_t>(p)] * scale[static_cast<size_t>(p)] + shift[static_cast<size_t>(p)];
          if (relu && !(x > 0.f)) x = 0.f;
          sum += static_cast<double>(a[static_cast<size_t>(i * k + p)]) * x;
        }
        want[static_cast<size_t>(i)] = sum;
      }
      Scratch scratch(m, 1, k);
      std::vector<float> out(static_cast<size_t>(m), kSentinel);
      gemm_packed(m, 1, k, {pa.data(), k, false, true}, column, nullptr, out.data(), 1, GemmEpilogue{}, nullptr,
                  scratch.b.data(), path);
      expect_close(want, out.data(), m, 1, 1);
      scratch.expect_guards_intact();
    }
  }
}

struct ConvCase {
  int64_t c, h, w, m, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

// The convolution by its definition, in double: y[m][oy * ow + ox], plus
// bias[m] where bias is not nullptr.
std::vector<double> reference_conv(const ConvCase& g, int64_t oh, int64_t ow, const std::vector<float>& x,
                                   const std::vector<float>& w, const float* bias) {
  std::vector<double> y(static_cast<size_t>(g.m * oh * ow));
  for (int64_t m = 0; m < g.m; ++m) {
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        double sum = bias != nullptr ? bias[m] : 0.0;
        for (int64_t c = 0; c < g.c; ++c) {
          for (int64_t ky = 0; ky < g.kh; ++ky) {
            for (int64_t kx = 0; kx < g.kw; ++kx) {
              const int64_t iy = oy * g.sh - g.pt + ky * g.dh, ix = ox * g.sw - g.pl + kx * g.dw;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              sum += static_cast<double>(w[static_cast<size_t>(((m * g.c + c) * g.kh + ky) * g.kw + kx)]) *
                     x[static_cast<size_t>((c * g.h + iy) * g.w + ix)];
            }
          }
        }
        y[static_cast<size_t>((m * oh + oy) * ow + ox)] = sum;
      }
    }
  }
  return y;
}

class Im2colGemmTest : public ::testing::TestWithParam<std::tuple<ConvCase, GemmPath>> {};

TEST_P(Im2colGemmTest, MatchesDirectConvolution) {
  const auto [g, path] = GetParam();
  const int64_t oh = (g.h + g.pt + g.pb - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  const int64_t ow = (g.w + g.pl + g.pr - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  const int64_t k = g.c * g.kh * g.kw, n = oh * ow;
  const std::vector<float> x = values(static_cast<size_t>(g.c * g.h * g.w), 7);
  const std::vector<float> w = values(static_cast<size_t>(g.m * k), 8);
  const std::vector<double> want = reference_conv(g, oh, ow, x, w, nullptr);
  GemmIm2col im2col;
  im2col.x = x.data();
  im2col.channels = g.c;
  im2col.h = g.h;
  im2col.w = g.w;
  im2col.kh = g.kh;
  im2col.kw = g.kw;
  im2col.sh = g.sh;
  im2col.sw = g.sw;
  im2col.dh = g.dh;
  im2col.dw = g.dw;
  im2col.pt = g.pt;
  im2col.pl = g.pl;
  im2col.oh = oh;
  im2col.ow = ow;
  std::vector<float> out(static_cast<size_t>(g.m * n), kSentinel);
  Scratch scratch(g.m, n, k);
  gemm_packed(g.m, n, k, {w.data(), k, false}, {}, &im2col, out.data(), n, GemmEpilogue{}, scratch.a.data(),
              scratch.b.data(), path);
  expect_close(want, out.data(), g.m, n, n);
  scratch.expect_guards_intact();
}

// Output rows shorter and longer than a panel (panels that straddle rows),
// strides, dilations, asymmetric and large pads, more than one inner block.
INSTANTIATE_TEST_SUITE_P(Geometry, Im2colGemmTest,
                         ::testing::Combine(::testing::Values(ConvCase{3, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                                                              ConvCase{4, 23, 21, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
                                                              ConvCase{2, 12, 30, 5, 3, 5, 1, 2, 2, 1, 0, 2, 3, 1},
                                                              ConvCase{3, 17, 17, 10, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},
                                                              ConvCase{40, 8, 8, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                                                              ConvCase{5, 6, 40, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
                                                              ConvCase{1, 4, 4, 2, 3, 3, 1, 1, 1, 1, 4, 4, 4, 4},
                                                              // 1x1 with strides, no padding: panels gathered
                                                              // (pack_b_im2col), narrow last panel, a padded one
                                                              // that must take the copy instead.
                                                              ConvCase{19, 15, 29, 11, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0},
                                                              ConvCase{7, 10, 13, 9, 1, 1, 3, 2, 1, 1, 0, 0, 0, 0},
                                                              ConvCase{5, 8, 8, 4, 1, 1, 2, 2, 1, 1, 0, 0, 1, 1},
                                                              // Strided, gathered tap by tap on AVX-512: a block
                                                              // of k starting inside a channel's taps (360 rows),
                                                              // and 81 taps, past the gather's 64 (the copy).
                                                              ConvCase{40, 15, 15, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
                                                              ConvCase{2, 20, 20, 3, 9, 9, 2, 2, 1, 1, 4, 4, 4, 4}),
                                            ::testing::Values(GemmPath::kAuto, GemmPath::kAvx2, GemmPath::kPortable)),
                         [](const ::testing::TestParamInfo<std::tuple<ConvCase, GemmPath>>& info) {
                           const auto& c = std::get<0>(info.param);
                           const GemmPath path = std::get<1>(info.param);
                           return "c" + std::to_string(c.c) + "_in" + dims_name({c.h, c.w}) + "_m" +
                                  std::to_string(c.m) + "_k" + dims_name({c.kh, c.kw}) + "_s" +
                                  dims_name({c.sh, c.sw}) + "_d" + dims_name({c.dh, c.dw}) + "_p" +
                                  dims_name({c.pt, c.pl, c.pb, c.pr}, "") + "_" + gemm_path_name(path);
                         });

// ConvLanes (output channels in lanes) against the definition, with its
// scratch and output guarded, in each of its ways of reading positions:
// - small planes (2 to 63 positions, around the tile heights) with their
//   positions packed, and pointwise kernels reading the image itself;
// - larger planes read through offsets: 1x1 stride 2 (no table), padded
//   kernels (padding at both ends, at the end only, padding the stride
//   never reaches), dilation, a 7x7 stride-2 first layer, a product
//   written out in two blocks of positions (1,000 channels);
// - groups, one call for all (padded, unpadded, strided, dilated, 1x1,
//   channels a group not a multiple of 16);
// with channels not a multiple of 16 or of 32 (a last one-panel tile),
// several blocks of k, a clamp and an activation applied after the tile;
// then the same bits on two threads with every split forced (groups: with
// a block of scratch a thread).
TEST(ConvLanesTest, MatchesDefinitionOnEveryPath) {
  struct Geometry {
    int64_t c, h, w, m, kh, kw, sh, sw, dh, pad, pad_end;
    int64_t groups = 1;
  };
  const std::vector<Geometry> geometries = {
      {40, 7, 7, 48, 1, 1, 1, 1, 1, 0, 0},      {60, 7, 7, 32, 3, 3, 1, 1, 1, 1, 1},
      {24, 14, 14, 33, 3, 3, 2, 2, 1, 1, 1},    {300, 13, 13, 20, 1, 1, 2, 2, 1, 0, 0},
      {9, 1, 2, 16, 1, 1, 1, 1, 1, 0, 0},       {5, 7, 9, 17, 3, 3, 1, 1, 1, 1, 1},
      {8, 7, 7, 64, 3, 3, 1, 1, 2, 2, 2},       {70, 5, 5, 100, 3, 3, 1, 1, 1, 1, 1},
      {3, 3, 11, 18, 1, 3, 1, 1, 1, 0, 0},      {16, 7, 7, 32, 3, 3, 1, 1, 1, 0, 1},
      {3, 31, 31, 64, 7, 7, 2, 2, 1, 3, 3},     {24, 20, 20, 32, 1, 1, 2, 2, 1, 0, 0},
      {20, 18, 18, 48, 3, 3, 2, 2, 1, 1, 1},    {16, 11, 11, 32, 3, 3, 1, 1, 2, 0, 2},
      {4, 24, 24, 1000, 3, 3, 2, 2, 1, 1, 1},   {64, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 4},
      {96, 14, 14, 96, 3, 3, 2, 2, 1, 1, 1, 3}, {40, 9, 9, 80, 3, 3, 1, 1, 1, 0, 0, 2},
      {128, 6, 6, 96, 1, 1, 1, 1, 1, 0, 0, 2},  {48, 12, 12, 48, 5, 5, 1, 1, 2, 4, 4, 3},
      {36, 8, 8, 54, 3, 3, 1, 1, 1, 1, 1, 2},   {60, 30, 30, 60, 3, 3, 1, 1, 1, 1, 1, 3}};
  const Activation clip(fb::Activation::CLIP, -0.3f, 0.4f);
  const Activation sigmoid(fb::Activation::SIGMOID, 0.f, 0.f);
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(2), Error::kOk);
  for (const Geometry& g : geometries) {
    const int64_t oh = (g.h + g.pad + g.pad_end - g.dh * (g.kh - 1) - 1) / g.sh + 1;
    const int64_t ow = (g.w + g.pad + g.pad_end - g.dh * (g.kw - 1) - 1) / g.sw + 1;
    const int64_t cg = g.c / g.groups, mg = g.m / g.groups, k = cg * g.kh * g.kw, n = oh * ow;
    SCOPED_TRACE(testing::Message() << "c" << g.c << " " << g.h << "x" << g.w << " m" << g.m << " k" << g.kh << "x"
                                    << g.kw << " s" << g.sh << " d" << g.dh << " p" << g.pad << "," << g.pad_end
                                    << " groups " << g.groups);
    const std::vector<float> x = values(static_cast<size_t>(g.c * g.h * g.w), 21);
    const std::vector<float> wt = values(static_cast<size_t>(g.m * k), 22);
    const std::vector<float> bias = values(static_cast<size_t>(g.m), 23);
    const int64_t group_weights = conv_lanes_weight_floats(k, mg);
    std::vector<float> packed(static_cast<size_t>(g.groups * group_weights));
    std::vector<double> sums;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      conv_lanes_prepack_weights(k, mg, wt.data() + grp * mg * k, packed.data() + grp * group_weights);
      const std::vector<float> xg(x.begin() + grp * cg * g.h * g.w, x.begin() + (grp + 1) * cg * g.h * g.w);
      const std::vector<float> wg(wt.begin() + grp * mg * k, wt.begin() + (grp + 1) * mg * k);
      const std::vector<double> part = reference_conv(
          ConvCase{cg, g.h, g.w, mg, g.kh, g.kw, g.sh, g.sw, g.dh, g.dh, g.pad, g.pad, g.pad_end, g.pad_end}, oh, ow,
          xg, wg, bias.data() + grp * mg);
      sums.insert(sums.end(), part.begin(), part.end());
    }
    double scale = 1e-30;
    for (double v : sums) scale = std::max(scale, std::fabs(v));
    for (const GemmPath path : {GemmPath::kAuto, GemmPath::kAvx2, GemmPath::kPortable}) {
      for (const Activation* act : {&clip, &sigmoid}) {
        const fb::Activation kind = act->get()->kind();
        SCOPED_TRACE(std::string(gemm_path_name(path)) + (kind == fb::Activation::CLIP ? " clip" : " sigmoid"));
        std::vector<double> want(sums.size());
        for (size_t i = 0; i < sums.size(); ++i) want[i] = activate(sums[i], kind, -0.3f, 0.4f);
        std::vector<float> outs[2];
        for (int run = 0; run < 2; ++run) {
          const ConvLanesShape shape{cg, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.dh, g.dh, g.pad, g.pad, oh, ow, g.groups};
          // With groups, on two threads, a block of scratch a thread.
          const int64_t blocks = g.groups > 1 && run == 1 ? shape.scratch_blocks() : 1;
          const int64_t input_floats = blocks * shape.input_floats();
          const int64_t product_floats = blocks * conv_lanes_product_floats(mg, n);
          std::vector<float> input(static_cast<size_t>(input_floats) + 64, kSentinel);
          std::vector<float> product(static_cast<size_t>(product_floats) + 64, kSentinel);
          std::vector<float>& out = outs[run];
          out.assign(static_cast<size_t>(g.m * n) + 16, kSentinel);
          ConvLanes conv;
          GemmIm2col& im = conv.geometry;
          // clang-format off
          im.x = x.data(); im.channels = cg; im.h = g.h; im.w = g.w; im.kh = g.kh; im.kw = g.kw;
          im.sh = g.sh; im.sw = g.sw; im.dh = g.dh; im.dw = g.dh; im.pt = g.pad; im.pl = g.pad; im.oh = oh; im.ow = ow;
          // clang-format on
          conv.m = mg;
          conv.groups = g.groups;
          conv.input_blocks = conv.product_blocks = blocks;
          conv.packed_weights = packed.data();
          conv.bias = bias.data();
          conv.y = out.data();
          conv.activation = act->get();
          conv.input = input.data();
          conv.product = product.data();
          if (run == 1) set_parallel_min_work(1);
          conv_lanes(conv, path, run == 0 ? nullptr : &pool);
          set_parallel_min_work(-1);
          // Rounding is relative to the sums before the activation (both
          // activations move values by no more than their change).
          for (size_t i = 0; i < want.size(); ++i) ASSERT_LE(std::fabs(out[i] - want[i]), 1e-5 * scale) << "at " << i;
          for (size_t i = static_cast<size_t>(g.m * n); i < out.size(); ++i) ASSERT_EQ(out[i], kSentinel);
          for (size_t i = static_cast<size_t>(input_floats); i < input.size(); ++i) {
            ASSERT_EQ(input[i], kSentinel) << "input scratch overrun";
          }
          for (size_t i = static_cast<size_t>(product_floats); i < product.size(); ++i) {
            ASSERT_EQ(product[i], kSentinel) << "product overrun";
          }
        }
        EXPECT_EQ(outs[0], outs[1]) << "two threads changed the bits";
      }
    }
  }
}

// Where the planner takes ConvLanes: small planes not filling whole
// 16-lane panels, enough channels, one group or large groups.
TEST(ConvLanesTest, FitsSmallPlanesAndStridedKernels) {
  EXPECT_TRUE(conv_lanes_fits(512, 49));
  EXPECT_TRUE(conv_lanes_fits(16, 2));
  EXPECT_FALSE(conv_lanes_fits(512, 64));   // four whole panels
  EXPECT_FALSE(conv_lanes_fits(512, 196));  // 14 x 14: the panels are 94% full
  EXPECT_FALSE(conv_lanes_fits(8, 49));     // too few channels for the lanes
  EXPECT_FALSE(conv_lanes_fits(512, 1));    // one position: the matrix-vector product
  // Groups: 1x1s of large groups only; kernels of several taps on any
  // plane, save 3x3s of stride 1 on planes of more than 64 positions with
  // groups under 32 channels (grouped_conv.h's direct kernel), and groups
  // of 8 channels or fewer (in or out).
  EXPECT_TRUE(conv_lanes_fits_groups(1, 3, 64, 49));
  EXPECT_TRUE(conv_lanes_fits_groups(32, 64, 64, 49));
  EXPECT_FALSE(conv_lanes_fits_groups(32, 32, 32, 49));
  EXPECT_FALSE(conv_lanes_fits_groups(64, 64, 8, 49));
  EXPECT_TRUE(conv_lanes_fits_groups(32, 32, 32, 49, 3, 3));    // ResNeXt's layer4
  EXPECT_TRUE(conv_lanes_fits_groups(32, 32, 32, 3136, 3, 3));  // 32 a group, any plane
  EXPECT_TRUE(conv_lanes_fits_groups(32, 16, 16, 49, 3, 3));
  EXPECT_FALSE(conv_lanes_fits_groups(32, 16, 16, 196, 3, 3));       // layer3: direct
  EXPECT_FALSE(conv_lanes_fits_groups(32, 16, 16, 784, 3, 3));       // direct
  EXPECT_TRUE(conv_lanes_fits_groups(32, 16, 16, 784, 3, 3, 2, 2));  // strided
  EXPECT_TRUE(conv_lanes_fits_groups(32, 16, 16, 784, 5, 5));        // not 3x3
  EXPECT_FALSE(conv_lanes_fits_groups(32, 8, 8, 49, 3, 3));          // layer2's 8 a group
  EXPECT_FALSE(conv_lanes_fits_groups(32, 16, 8, 49, 3, 3));
  // Strided kernels of several taps whose product stays in L2: ResNet-50's
  // 3x3 stride 2 on 28 x 28 and 14 x 14, not its 1x1 stride-2 shortcuts
  // nor its 7x7 first layer (112 x 112 x 64: 3.2 MB); patches (stride at
  // least the kernel) whatever their product: Swin's 4x4 stride-4 stem.
  EXPECT_TRUE(conv_lanes_fits(128, 784, 3, 3, 2, 2));
  EXPECT_TRUE(conv_lanes_fits(256, 196, 3, 3, 2, 2));
  EXPECT_FALSE(conv_lanes_fits(128, 784, 3, 3, 1, 1));  // stride 1
  EXPECT_FALSE(conv_lanes_fits(512, 784, 1, 1, 2, 2));
  EXPECT_FALSE(conv_lanes_fits(64, 12544, 7, 7, 2, 2));
  EXPECT_FALSE(conv_lanes_fits(8, 784, 3, 3, 2, 2));
  EXPECT_TRUE(conv_lanes_fits(96, 3136, 4, 4, 4, 4));
  EXPECT_FALSE(conv_lanes_fits(96, 3136, 4, 4, 2, 2));  // overlapping, 1.2 MB
  // The scratch: a small plane's packed block, else the padded image and a
  // block's offsets; nothing padded where the kernel reads no padding.
  const ConvLanesShape small{512, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 7, 7};
  EXPECT_TRUE(small.packs_positions());
  EXPECT_EQ(small.input_floats(), kGemmKc * 64);
  const ConvLanesShape strided{128, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 28, 28};
  EXPECT_FALSE(strided.packs_positions());
  EXPECT_EQ(strided.hp(), 57);  // the bottom padding is never read
  EXPECT_EQ(strided.input_floats(), 128 * 57 * 57 + kGemmKc);
  const ConvLanesShape unpadded{24, 20, 20, 1, 1, 2, 2, 1, 1, 0, 0, 10, 10};
  EXPECT_FALSE(unpadded.reads_padding());
  EXPECT_EQ(unpadded.input_floats(), kGemmKc);
}

TEST(Depthwise3x3Test, MatchesDirectConvolution) {
  for (GemmPath path : {GemmPath::kAuto, GemmPath::kAvx2, GemmPath::kPortable}) {
    for (int64_t stride : {1, 2}) {
      for (int64_t pad : {0, 1, 2}) {
        // Rows shorter than, as long as and longer than one 16-lane strip,
        // and rows whose last strip is partial (the AVX2 kernel stores
        // such a strip whole but in the last row: its lanes past a row
        // land in the next one or, in rows narrower than 8, the next
        // several, and are written again after).
        // clang-format off
        for (const auto& [h, w] : {std::pair<int64_t, int64_t>{5, 4}, {7, 7}, {14, 14}, {9, 13}, {20, 37}, {8, 64},
                                   {3, 16}, {6, 17}, {4, 31}, {11, 32}, {2, 33}, {1, 1}, {12, 56}, {10, 3},
                                   {6, 9}, {28, 28}, {5, 2}}) {
          // clang-format on
          const int64_t oh = (h + 2 * pad - 3) / stride + 1, ow = (w + 2 * pad - 3) / stride + 1;
          if (oh <= 0 || ow <= 0) continue;
          const std::vector<float> x = values(static_cast<size_t>(h * w), 9);
          const std::vector<float> k = values(9, 10);
          std::vector<float> out(static_cast<size_t>(oh * ow) + 16, kSentinel);
          depthwise3x3(x.data(), h, w, k.data(), 0.25f, stride, pad, pad, out.data(), oh, ow, nullptr, path);
          std::vector<double> want(static_cast<size_t>(oh * ow));
          for (int64_t oy = 0; oy < oh; ++oy) {
            for (int64_t ox = 0; ox < ow; ++ox) {
              double sum = 0.25;
              for (int64_t ky = 0; ky < 3; ++ky) {
                for (int64_t kx = 0; kx < 3; ++kx) {
                  const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                  if (iy >= 0 && iy < h && ix >= 0 && ix < w) {
                    sum +=
                        static_cast<double>(k[static_cast<size_t>(ky * 3 + kx)]) * x[static_cast<size_t>(iy * w + ix)];
                  }
                }
              }
              want[static_cast<size_t>(oy * ow + ox)] = sum;
            }
          }
          SCOPED_TRACE(testing::Message() << "stride " << stride << " pad " << pad << " " << h << "x" << w);
          expect_close(want, out.data(), oh, ow, ow);
          for (size_t i = static_cast<size_t>(oh * ow); i < out.size(); ++i) ASSERT_EQ(out[i], kSentinel);
        }
      }
    }
  }
}

// The direct stride-2 convolution of first layers against the definition,
// on the processor's best path and on AVX2: kernels of 1, 3 and 7, odd and
// even sizes, rows shorter and longer than a 16- and 32-column tile,
// asymmetric pads, output channels not a multiple of the six-row tile,
// bias and a clamp; and paths without a kernel, leaving the output
// untouched.
TEST(DirectConvS2Test, MatchesDefinitionOrDeclines) {
  struct Geometry {
    int64_t c, h, w, m, kh, kw, pt, pl, pb, pr;
  };
  const Activation clip(fb::Activation::CLIP, -0.3f, 0.4f);
  std::vector<Geometry> geometries = {
      Geometry{3, 17, 17, 8, 3, 3, 1, 1, 1, 1}, Geometry{1, 9, 70, 13, 7, 7, 3, 3, 3, 3},
      Geometry{4, 12, 33, 6, 3, 5, 2, 0, 0, 2}, Geometry{2, 6, 6, 5, 1, 1, 0, 0, 0, 0},
      Geometry{3, 30, 2, 7, 3, 3, 1, 1, 1, 1}, Geometry{3, 24, 24, 32, 3, 3, 0, 0, 1, 1},
      // ResNet's first layer on a few rows: 112 outputs a row, the last 16
      // in 12x16 tiles on AVX-512, 64 channels (the last pair of panels
      // four rows short).
      Geometry{3, 9, 223, 64, 7, 7, 3, 3, 3, 3}};
  // Widths around the 8- and 16-column steps (odd and even, 1 to 66),
  // left pads 0 to 2 (even and odd: the parity split starts either way).
  for (int64_t w : {1, 2, 3, 5, 8, 15, 16, 17, 31, 32, 33, 34, 47, 63, 64, 66}) {
    for (int64_t pad : {0, 1, 2}) geometries.push_back(Geometry{3, 5, w, 7, 3, 3, pad, pad, pad, 2 - pad});
  }
  for (const GemmPath path : {GemmPath::kAuto, GemmPath::kAvx2}) {
    for (const Geometry& g : geometries) {
      const int64_t oh = (g.h + g.pt + g.pb - g.kh) / 2 + 1, ow = (g.w + g.pl + g.pr - g.kw) / 2 + 1;
      const int64_t k = g.c * g.kh * g.kw;
      const std::vector<float> x = values(static_cast<size_t>(g.c * g.h * g.w), 14);
      const std::vector<float> wt = values(static_cast<size_t>(g.m * k), 15);
      const std::vector<float> bias = values(static_cast<size_t>(g.m), 16);
      std::vector<float> packed(static_cast<size_t>(gemm_prepacked_a_floats(g.m, k)));
      gemm_prepack_a(g.m, k, wt.data(), packed.data());
      std::vector<float> out(static_cast<size_t>(g.m * oh * ow) + 16, kSentinel);
      DirectConvS2 conv;
      // clang-format off
      conv.c = g.c; conv.h = g.h; conv.w = g.w; conv.kh = g.kh; conv.kw = g.kw; conv.pt = g.pt; conv.pl = g.pl;
      conv.m = g.m; conv.oh = oh; conv.ow = ow;
      conv.x = x.data(); conv.packed_weights = packed.data(); conv.bias = bias.data(); conv.y = out.data();
      // clang-format on
      conv.activation = clip.get();
      SCOPED_TRACE(testing::Message() << "c" << g.c << " " << g.h << "x" << g.w << " k" << g.kh << "x" << g.kw);
      SCOPED_TRACE(path == GemmPath::kAuto ? "best path" : "AVX2");
      // Every geometry here fits the kernels' buffers.
#if KILN_X86
      const bool has_kernel = path == GemmPath::kAuto ? x86::has_avx512f() || x86::has_avx2_fma() : x86::has_avx2_fma();
#elif KILN_NEON
      const bool has_kernel = path == GemmPath::kAuto && neon::enabled();
#else
      const bool has_kernel = false;
#endif
      ASSERT_EQ(conv_s2_direct(conv, path), has_kernel);
      if (!has_kernel) {
        // No kernel for this processor: nothing written.
        for (float v : out) ASSERT_EQ(v, kSentinel);
        continue;
      }
      std::vector<double> want(static_cast<size_t>(g.m * oh * ow));
      for (int64_t i = 0; i < g.m; ++i) {
        for (int64_t oy = 0; oy < oh; ++oy) {
          for (int64_t ox = 0; ox < ow; ++ox) {
            double sum = bias[static_cast<size_t>(i)];
            for (int64_t ci = 0; ci < g.c; ++ci) {
              for (int64_t ky = 0; ky < g.kh; ++ky) {
                for (int64_t kx = 0; kx < g.kw; ++kx) {
                  const int64_t iy = oy * 2 - g.pt + ky, ix = ox * 2 - g.pl + kx;
                  if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                  sum += static_cast<double>(wt[static_cast<size_t>(((i * g.c + ci) * g.kh + ky) * g.kw + kx)]) *
                         x[static_cast<size_t>((ci * g.h + iy) * g.w + ix)];
                }
              }
            }
            want[static_cast<size_t>((i * oh + oy) * ow + ox)] = activate(sum, fb::Activation::CLIP, -0.3f, 0.4f);
          }
        }
      }
      expect_close(want, out.data(), g.m * oh, ow, ow);
      for (size_t i = static_cast<size_t>(g.m * oh * ow); i < out.size(); ++i) ASSERT_EQ(out[i], kSentinel);
    }
  }
  // The portable path has no direct kernel.
  DirectConvS2 conv;
  EXPECT_FALSE(conv_s2_direct(conv, GemmPath::kPortable));
}

#if KILN_X86
// The two-panel AVX-512 tile against the one-panel kernel on each panel,
// bit for bit: every row count, depths around the unrolled step, B in
// place (a row stride past the two panels) and C strided; accumulation,
// then the row and column biases with a clamp.
TEST(MicroKernelAvx512Test, TwoPanelsAreTheOnePanelTileTwice) {
  if (!x86::has_avx512f()) GTEST_SKIP() << "the AVX-512 path is off (processor or KILN_ISA)";
  const int64_t ldb = 2 * kGemmNr + 5, ldc = 2 * kGemmNr + 3;
  for (int64_t kc : {1, 2, 3, 7, 64, 257}) {
    for (int64_t mr = 1; mr <= kGemmMr; ++mr) {
      for (int mode = 0; mode < 2; ++mode) {  // accumulate; biases + clamp
        SCOPED_TRACE("kc " + std::to_string(kc) + " mr " + std::to_string(mr) + " mode " + std::to_string(mode));
        const std::vector<float> a = values(static_cast<size_t>(kc * kGemmMr), 51);
        const std::vector<float> b = values(static_cast<size_t>(kc * ldb), 52);
        const std::vector<float> row_bias = values(kGemmMr, 53);
        const std::vector<float> col_bias = values(2 * kGemmNr, 54);
        std::vector<float> want = values(static_cast<size_t>(kGemmMr * ldc), 55), got(want);
        const bool accumulate = mode == 0;
        const float* rb = accumulate ? nullptr : row_bias.data();
        for (int64_t half = 0; half < 2; ++half) {
          x86::micro_kernel_avx512(kc, a.data(), b.data() + half * kGemmNr, ldb, want.data() + half * kGemmNr, ldc, mr,
                                   kGemmNr, accumulate, rb, accumulate ? nullptr : col_bias.data() + half * kGemmNr,
                                   !accumulate, -0.5f, 0.6f);
        }
        x86::micro_kernel_avx512_x2(kc, a.data(), b.data(), b.data() + kGemmNr, ldb, got.data(), ldc, mr, accumulate,
                                    rb, accumulate ? nullptr : col_bias.data(), !accumulate, -0.5f, 0.6f);
        ASSERT_EQ(want, got);
      }
    }
  }
}

// The two-row-panel AVX-512 tile (12 x 16) against the one-panel kernel on
// each A panel, bit for bit: every row count from 7 to 12, full, half and
// narrower panels (the 256-bit path at 8 columns or fewer), depths around
// the unrolled step, B in place (a row stride past the panel) and C
// strided; accumulation, then the row and column biases with a clamp.
TEST(MicroKernelAvx512Test, TwoRowPanelsAreTheOnePanelTileTwice) {
  if (!x86::has_avx512f()) GTEST_SKIP() << "the AVX-512 path is off (processor or KILN_ISA)";
  const int64_t ldb = kGemmNr + 5, ldc = kGemmNr + 3;
  for (int64_t kc : {1, 2, 3, 7, 64, 257}) {
    for (int64_t nr : {1, 5, 8, 9, 16}) {
      for (int64_t mr = kGemmMr + 1; mr <= 2 * kGemmMr; ++mr) {
        for (int mode = 0; mode < 2; ++mode) {  // accumulate; biases + clamp
          SCOPED_TRACE("kc " + std::to_string(kc) + " nr " + std::to_string(nr) + " mr " + std::to_string(mr) +
                       " mode " + std::to_string(mode));
          const std::vector<float> a0 = values(static_cast<size_t>(kc * kGemmMr), 61);
          const std::vector<float> a1 = values(static_cast<size_t>(kc * kGemmMr), 62);
          const std::vector<float> b = values(static_cast<size_t>(kc * ldb), 63);
          const std::vector<float> row_bias = values(2 * kGemmMr, 64);
          const std::vector<float> col_bias = values(kGemmNr, 65);
          std::vector<float> want = values(static_cast<size_t>(2 * kGemmMr * ldc), 66), got(want);
          const bool accumulate = mode == 0;
          const float* cb = accumulate ? nullptr : col_bias.data();
          for (int64_t half = 0; half < 2; ++half) {
            const float* rb = accumulate ? nullptr : row_bias.data() + half * kGemmMr;
            x86::micro_kernel_avx512(kc, (half == 0 ? a0 : a1).data(), b.data(), ldb,
                                     want.data() + half * kGemmMr * ldc, ldc, half == 0 ? kGemmMr : mr - kGemmMr, nr,
                                     accumulate, rb, cb, !accumulate, -0.5f, 0.6f);
          }
          x86::micro_kernel_avx512_rows2(kc, a0.data(), a1.data(), b.data(), ldb, got.data(), ldc, mr, nr, accumulate,
                                         accumulate ? nullptr : row_bias.data(), cb, !accumulate, -0.5f, 0.6f);
          ASSERT_EQ(want, got);
        }
      }
    }
  }
}

TEST(MaxPoolAvx2Test, MatchesDirectMaximumWithPaddingAndNaN) {
  if (!x86::has_avx2_fma()) GTEST_SKIP() << "the AVX2 path is off (processor or KILN_ISA)";
  // ceil: the output size rounded up (ceil_mode), the last window past the
  // bottom and right edges. Windows of one to five rows and columns; planes
  // narrower than a vector, a multiple of it, and squeezenet's 111 x 111.
  for (int64_t stride : {1, 2}) {
    // clang-format off
    for (const auto& [kh, kw, pad] : {std::tuple<int64_t, int64_t, int64_t>{3, 3, 1}, {2, 2, 0}, {3, 2, 1}, {4, 4, 2},
                                      {3, 3, 0}, {5, 5, 2}, {1, 1, 0}, {1, 3, 0}, {5, 2, 1}}) {
      // clang-format on
      for (const auto& [h, w] : {std::pair<int64_t, int64_t>{7, 7}, {12, 37}, {30, 9}, {3, 5}, {16, 16}, {111, 111}}) {
        for (bool ceil : {false, true}) {
          if (h + 2 * pad < kh || w + 2 * pad < kw) continue;
          int64_t oh = (h + 2 * pad - kh + (ceil ? stride - 1 : 0)) / stride + 1;
          int64_t ow = (w + 2 * pad - kw + (ceil ? stride - 1 : 0)) / stride + 1;
          // As PyTorch: the last window starts inside the input or the top/left padding.
          if (ceil && (oh - 1) * stride >= h + pad) --oh;
          if (ceil && (ow - 1) * stride >= w + pad) --ow;
          std::vector<float> x = values(static_cast<size_t>(h * w), 13);
          // NaNs in some rows and columns (the first, an inner and the last
          // column), the other rows free of them.
          x[static_cast<size_t>(w + 2)] = std::nanf("");
          if (h > 5) x[static_cast<size_t>(5 * w)] = std::nanf("");
          if (h > 9) x[static_cast<size_t>(10 * w - 1)] = std::nanf("");
          std::vector<float> out(static_cast<size_t>(oh * ow) + 16, kSentinel);
          ASSERT_TRUE(x86::max_pool_avx2(x.data(), h, w, kh, kw, stride, pad, pad, out.data(), oh, ow));
          row_checks::check_max_pool_plane(x, h, w, kh, kw, stride, pad, out.data(), oh, ow,
                                           "stride " + std::to_string(stride) + " window " + std::to_string(kh) + "x" +
                                               std::to_string(kw) + " pad " + std::to_string(pad) + " plane " +
                                               std::to_string(h) + "x" + std::to_string(w) + (ceil ? " ceil" : ""));
          for (size_t i = static_cast<size_t>(oh * ow); i < out.size(); ++i) ASSERT_EQ(out[i], kSentinel);
        }
      }
    }
  }
}
#endif

// 8-bit max pooling of one plane (a QDQ model's MaxPool on its bytes), on
// the active path: the AVX2 kernel for one stride of 1 or 2 without
// dilation where the path has AVX2, else the separable rows or the window
// by window loop. Against the direct maximum over the real taps, for
// uint8 and int8 (whose padding must not win even over -128), and nothing
// written past the plane.
template <typename T>
void check_max_pool_8bit(const PoolGeometry& g, uint32_t seed, const std::string& what) {
  std::vector<T> x(static_cast<size_t>(g.h * g.w));
  uint32_t state = seed;
  for (T& v : x) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<T>(state >> 24);
  }
  // The type's lowest value on a border, to catch padding that wins ties.
  x[0] = static_cast<T>(static_cast<T>(-1) > 0 ? 0 : -128);
  const T sentinel = static_cast<T>(0x5A);
  std::vector<T> out(static_cast<size_t>(g.oh * g.ow) + 64, sentinel);
  max_pool_8bit_plane(g, x.data(), out.data());
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      int want = 1000;
      for (int64_t ky = 0; ky < g.kh; ++ky) {
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const int64_t iy = oy * g.sh - g.pt + ky * g.dh, ix = ox * g.sw - g.pl + kx * g.dw;
          if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
          const int v = x[static_cast<size_t>(iy * g.w + ix)];
          want = want == 1000 || v > want ? v : want;
        }
      }
      ASSERT_NE(want, 1000) << what << ": a window without a real tap";
      ASSERT_EQ(static_cast<int>(out[static_cast<size_t>(oy * g.ow + ox)]), want) << what << " at " << oy << ", " << ox;
    }
  }
  for (size_t i = static_cast<size_t>(g.oh * g.ow); i < out.size(); ++i) ASSERT_EQ(out[i], sentinel) << what;
}

TEST(MaxPool8bitTest, MatchesDirectMaximumOnEveryGeometry) {
  uint32_t seed = 1;
  for (int64_t stride : {1, 2, 3}) {
    for (int64_t dilation : {1, 2}) {
      // clang-format off
      for (const auto& [kh, kw, pad] : {std::tuple<int64_t, int64_t, int64_t>{3, 3, 1}, {2, 2, 0}, {3, 2, 1},
                                        {4, 4, 2}, {3, 3, 0}, {5, 5, 2}, {1, 1, 0}, {1, 3, 0}, {5, 2, 1}}) {
        // clang-format on
        // Planes narrower than 8, 16 and 32 bytes, googlenet's 28, 56 and
        // 112, and rows wider than two vectors with tails of every size.
        for (const auto& [h, w] : {std::pair<int64_t, int64_t>{7, 7},
                                   {12, 37},
                                   {30, 9},
                                   {3, 5},
                                   {28, 28},
                                   {16, 16},
                                   {56, 56},
                                   {13, 112},
                                   {9, 75},
                                   {111, 111}}) {
          for (bool ceil : {false, true}) {
            const int64_t ekh = (kh - 1) * dilation + 1, ekw = (kw - 1) * dilation + 1;
            if (h + 2 * pad < ekh || w + 2 * pad < ekw) continue;
            int64_t oh = (h + 2 * pad - ekh + (ceil ? stride - 1 : 0)) / stride + 1;
            int64_t ow = (w + 2 * pad - ekw + (ceil ? stride - 1 : 0)) / stride + 1;
            if (ceil && (oh - 1) * stride >= h + pad) --oh;
            if (ceil && (ow - 1) * stride >= w + pad) --ow;
            const PoolGeometry g{1, h, w, oh, ow, kh, kw, stride, stride, dilation, dilation, pad, pad, pad, pad};
            const std::string what = "stride " + std::to_string(stride) + " dilation " + std::to_string(dilation) +
                                     " window " + std::to_string(kh) + "x" + std::to_string(kw) + " pad " +
                                     std::to_string(pad) + " plane " + std::to_string(h) + "x" + std::to_string(w) +
                                     (ceil ? " ceil" : "");
            check_max_pool_8bit<uint8_t>(g, ++seed, "uint8 " + what);
            check_max_pool_8bit<int8_t>(g, ++seed, "int8 " + what);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::kernels
