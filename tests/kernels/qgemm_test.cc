// The int8 product (kernels/cpu/src/qgemm.h): every inner loop this
// processor has (portable, AVX2's exact vpmaddwd split, AVX-512 VNNI's
// vpdpbusd, AArch64's vmull/vpadal and sdot; AVX2's vpmaddubsw loop for
// panels with no byte above 127) against a plain int64 loop,
// over shapes around the tile sizes (m around 8, columns around 16, k not a
// multiple of 4) and the extreme
// operands that would saturate vpmaddubsw (255 x -128 pairs); the epilogue
// (weight zero points, folded bias, fixed-point requantization, clamping,
// strided stores); packing of rows and of im2col columns; and the
// multiplier's fixed-point split and rounding.

#include "qgemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kiln/kernels/isa.h"

namespace kiln::kernels {
namespace {

uint32_t next(uint32_t* s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

struct Operands {
  int64_t m, n, k;
  std::vector<uint8_t> x;  // n x k, row per column
  std::vector<int8_t> w;   // m x kp
};

Operands make(int64_t m, int64_t n, int64_t k, uint32_t seed, bool extreme) {
  Operands o{m, n, k, {}, {}};
  const int64_t kp = qgemm_kp(k);
  o.x.resize(static_cast<size_t>(n * k));
  o.w.assign(static_cast<size_t>(m * kp), 0);
  uint32_t s = seed;
  for (auto& v : o.x) v = extreme ? 255 : static_cast<uint8_t>(next(&s));
  for (int64_t c = 0; c < m; ++c) {
    for (int64_t kk = 0; kk < k; ++kk) {
      o.w[static_cast<size_t>(c * kp + kk)] = extreme ? (kk % 3 == 2 ? 127 : -128) : static_cast<int8_t>(next(&s));
    }
  }
  return o;
}

// The int32 sums, exact, in int64.
int64_t reference_sum(const Operands& o, int64_t c, int64_t p) {
  int64_t acc = 0;
  for (int64_t kk = 0; kk < o.k; ++kk) {
    acc += int64_t{o.x[static_cast<size_t>(p * o.k + kk)]} * o.w[static_cast<size_t>(c * qgemm_kp(o.k) + kk)];
  }
  return acc;
}

std::vector<QGemmTileFn> tiles_here() {
  std::vector<QGemmTileFn> out = {qgemm_tile_portable};
#if KILN_X86
  if (processor_has(Isa::kAvx2)) out.push_back(qgemm_tile_avx2);
  if (processor_has(Isa::kAvx512) && processor_has_avx512_vnni()) out.push_back(qgemm_tile_avx512_vnni);
#endif
#if KILN_NEON
  out.push_back(qgemm_tile_neon);
  if (processor_has_dotprod()) out.push_back(qgemm_tile_neon_dot);
#endif
  return out;
}

// The switch picks the Arm inner loops: sdot where the processor has the
// dot-product extension (the arm64 tests run under qemu-aarch64 -cpu max,
// which has it, and say so with KILN_EXPECT_DOTPROD=1), vmull/vpadal where
// not, the portable loop with KILN_ISA=scalar.
TEST(QGemm, ArmInnerLoopIsSelected) {
#if KILN_NEON
  const char* expect_dotprod = std::getenv("KILN_EXPECT_DOTPROD");
  if (expect_dotprod != nullptr && expect_dotprod[0] == '1') {
    EXPECT_TRUE(processor_has_dotprod());
  }
  EXPECT_EQ(qgemm_tile_for(Isa::kNeon), processor_has_dotprod() ? qgemm_tile_neon_dot : qgemm_tile_neon);
  EXPECT_EQ(qgemm_tile_for(Isa::kScalar), qgemm_tile_portable);
#else
  GTEST_SKIP() << "not an AArch64 build";
#endif
}

// Every inner loop, int32 output with a bias and weight zero points.
TEST(QGemm, Int32SumsMatchOnEveryInnerLoop) {
  const int64_t shapes[][3] = {{1, 1, 1},    {8, 16, 4},   {7, 15, 3},   {9, 17, 5},
                               {16, 33, 64}, {3, 40, 147}, {24, 5, 1152}};
  for (const auto& shape : shapes) {
    for (bool extreme : {false, true}) {
      const Operands o = make(shape[0], shape[1], shape[2], 7 + static_cast<uint32_t>(shape[2]), extreme);
      std::vector<uint8_t> packed(static_cast<size_t>(qgemm_packed_x_bytes(o.k, o.n)), 0xEE);
      std::vector<int32_t> sums(static_cast<size_t>(o.n));
      qgemm_pack_rows(o.x.data(), o.k, o.n, o.k, false, packed.data(), sums.data());
      std::vector<int32_t> bias(static_cast<size_t>(o.m)), w_zp(static_cast<size_t>(o.m));
      for (int64_t c = 0; c < o.m; ++c) {
        bias[static_cast<size_t>(c)] = static_cast<int32_t>(1000 * c - 77);
        w_zp[static_cast<size_t>(c)] = static_cast<int32_t>(c % 3) - 1;
      }
      for (QGemmTileFn tile : tiles_here()) {
        std::vector<int32_t> y(static_cast<size_t>(o.m * o.n + 1), 12345);
        QGemmProblem p;
        // clang-format off
        p.m = o.m; p.n = o.n; p.k = o.k;
        p.w = o.w.data(); p.x = packed.data(); p.x_sums = sums.data();
        p.bias = bias.data(); p.w_zp = w_zp.data();
        p.y_dtype = DType::INT32; p.y = y.data();
        p.y_channel_stride = o.n; p.y_column_stride = 1;
        // clang-format on
        qgemm(p, tile);
        for (int64_t c = 0; c < o.m; ++c) {
          for (int64_t col = 0; col < o.n; ++col) {
            int64_t colsum = 0;
            for (int64_t kk = 0; kk < o.k; ++kk) colsum += o.x[static_cast<size_t>(col * o.k + kk)];
            const int64_t want =
                reference_sum(o, c, col) + bias[static_cast<size_t>(c)] - w_zp[static_cast<size_t>(c)] * colsum;
            ASSERT_EQ(y[static_cast<size_t>(c * o.n + col)], want)
                << "tile " << reinterpret_cast<const void*>(tile) << " m=" << o.m << " n=" << o.n << " k=" << o.k
                << " extreme=" << extreme << " at " << c << "," << col;
          }
        }
        EXPECT_EQ(y.back(), 12345) << "wrote past the output";
      }
    }
  }
}

// One tile on every inner loop against int64 sums, on panels that take
// AVX2's vpmaddubsw loop (every byte <= 127) and panels that do not (one
// byte above 127 anywhere in an otherwise small panel), with weight rows at
// -128 and 127 (the pair sums' extremes, -32512 and 32258) and random ones,
// every mr, short and long reductions.
TEST(QGemm, SmallAndLargeActivationPanelsMatchOnEveryTile) {
  const int64_t kps[] = {4, 8, 12, 64, 148, 1152};
  for (int64_t kp : kps) {
    const int64_t bytes = kp * kQGemmNr;
    // Panels: random 0..127, all 127, then one byte above 127 (128 or 255)
    // at the first, a middle and the last position of a small panel, then
    // random 0..255.
    std::vector<std::vector<uint8_t>> panels;
    uint32_t s = 11 + static_cast<uint32_t>(kp);
    std::vector<uint8_t> small(static_cast<size_t>(bytes));
    for (auto& v : small) v = static_cast<uint8_t>(next(&s) & 0x7F);
    panels.push_back(small);
    panels.emplace_back(static_cast<size_t>(bytes), 127);
    for (int64_t at : {int64_t{0}, bytes / 2 + 5, bytes - 1}) {
      for (uint8_t big : {uint8_t{128}, uint8_t{255}}) {
        std::vector<uint8_t> one = small;
        one[static_cast<size_t>(at)] = big;
        panels.push_back(one);
      }
    }
    std::vector<uint8_t> any(static_cast<size_t>(bytes));
    for (auto& v : any) v = static_cast<uint8_t>(next(&s));
    panels.push_back(any);
    // Eight weight rows: all -128, all 127, alternating pairs of them, and
    // random rows (those last with -128 and 127 in the tail).
    std::vector<int8_t> w(static_cast<size_t>(kQGemmMr * kp));
    for (int64_t r = 0; r < kQGemmMr; ++r) {
      for (int64_t kk = 0; kk < kp; ++kk) {
        int8_t v = static_cast<int8_t>(next(&s));
        if (r == 0) v = -128;
        if (r == 1) v = 127;
        if (r == 2) v = (kk / 2) % 2 == 0 ? int8_t{-128} : int8_t{127};
        if (r >= 3 && kk >= kp - 3) v = (kk + r) % 2 == 0 ? int8_t{-128} : int8_t{127};
        w[static_cast<size_t>(r * kp + kk)] = v;
      }
    }
    for (size_t pi = 0; pi < panels.size(); ++pi) {
      const std::vector<uint8_t>& panel = panels[pi];
      for (int64_t mr = 1; mr <= kQGemmMr; ++mr) {
        for (QGemmTileFn tile : tiles_here()) {
          int32_t acc[kQGemmMr][kQGemmNr];
          for (auto& row : acc) {
            for (auto& v : row) v = 12345;
          }
          tile(kp, w.data(), kp, mr, panel.data(), acc);
          for (int64_t r = 0; r < kQGemmMr; ++r) {
            for (int64_t i = 0; i < kQGemmNr; ++i) {
              int64_t want = 12345;
              if (r < mr) {
                want = 0;
                for (int64_t kk = 0; kk < kp; ++kk) {
                  want += int64_t{panel[static_cast<size_t>((kk / 4) * 64 + i * 4 + kk % 4)]} *
                          w[static_cast<size_t>(r * kp + kk)];
                }
              }
              ASSERT_EQ(acc[r][i], want) << "tile " << reinterpret_cast<const void*>(tile) << " kp=" << kp << " panel "
                                         << pi << " mr=" << mr << " at " << r << "," << i;
            }
          }
        }
      }
    }
  }
}

// Through the packers: activations 0..127 (reduced range) with one byte of
// 200 in the middle panel only, so its neighbours take the vpmaddubsw loop
// and it does not; rows and channel-major packing, both epilogues.
TEST(QGemm, ReducedRangeActivationsThroughThePackers) {
  const int64_t m = 11, n = 40, k = 75;
  Operands o = make(m, n, k, 5, false);
  for (auto& v : o.x) v &= 0x7F;
  o.x[static_cast<size_t>(20 * k + 37)] = 200;
  for (int64_t kk = 0; kk < k; ++kk) o.w[static_cast<size_t>(kk)] = -128;
  for (int64_t kk = 0; kk < k; ++kk) o.w[static_cast<size_t>(qgemm_kp(k) + kk)] = 127;
  std::vector<uint8_t> by_channel(static_cast<size_t>(k * n));
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t col = 0; col < n; ++col)
      by_channel[static_cast<size_t>(kk * n + col)] = o.x[static_cast<size_t>(col * k + kk)];
  }
  const size_t bytes = static_cast<size_t>(qgemm_packed_x_bytes(k, n));
  std::vector<uint8_t> rows(bytes), columns(bytes);
  qgemm_pack_rows(o.x.data(), k, n, k, false, rows.data(), nullptr);
  qgemm_pack_columns(by_channel.data(), n, n, k, false, columns.data(), nullptr);
  std::vector<int32_t> bias(static_cast<size_t>(m), 0);
  for (const std::vector<uint8_t>* packed : {&rows, &columns}) {
    for (QGemmTileFn tile : tiles_here()) {
      for (int64_t channel_stride : {int64_t{1}, n}) {
        std::vector<int32_t> y(static_cast<size_t>(m * n + 1), 12345);
        QGemmProblem p;
        // clang-format off
        p.m = m; p.n = n; p.k = k;
        p.w = o.w.data(); p.x = packed->data(); p.bias = bias.data();
        p.y_dtype = DType::INT32; p.y = y.data();
        // clang-format on
        p.y_channel_stride = channel_stride == 1 ? 1 : n;
        p.y_column_stride = channel_stride == 1 ? m : 1;
        qgemm(p, tile);
        for (int64_t c = 0; c < m; ++c) {
          for (int64_t col = 0; col < n; ++col) {
            ASSERT_EQ(y[static_cast<size_t>(c * p.y_channel_stride + col * p.y_column_stride)],
                      reference_sum(o, c, col))
                << "tile " << reinterpret_cast<const void*>(tile) << " at " << c << "," << col;
          }
        }
        EXPECT_EQ(y.back(), 12345);
      }
    }
  }
}

// The matrix-vector rows (qgemm_dot_rows, GemmInt8 with one column) on
// every path against int64 sums: x all <= 127 (AVX2's vpmaddubsw loop),
// with one byte above 127 in the vector part or in the tail, and random;
// rows of -128, of 127 and random; kp on and off multiples of 16 and 32.
// Each also read in place: the vector's first len <= kp bytes in a buffer
// of exactly len (ASan reports a read past it; the weights past len are the
// packing's zeros), as uint8 and as int8 flipped by 0x80 in the loop.
TEST(QGemm, DotRowsMatchOnEveryPathForSmallAndLargeVectors) {
  const Isa before = active_isa();
  for (int64_t kp : {4, 16, 28, 32, 36, 64, 100, 1152}) {
    uint32_t s = 3 + static_cast<uint32_t>(kp);
    std::vector<std::vector<uint8_t>> xs;
    std::vector<uint8_t> small(static_cast<size_t>(kp));
    for (auto& v : small) v = static_cast<uint8_t>(next(&s) & 0x7F);
    xs.push_back(small);
    xs.emplace_back(static_cast<size_t>(kp), 127);
    for (int64_t at : {int64_t{0}, kp - 1}) {
      std::vector<uint8_t> one = small;
      one[static_cast<size_t>(at)] = 255;
      xs.push_back(one);
    }
    std::vector<uint8_t> any(static_cast<size_t>(kp));
    for (auto& v : any) v = static_cast<uint8_t>(next(&s));
    xs.push_back(any);
    const int64_t rows = 5;
    std::vector<int8_t> w(static_cast<size_t>(rows * kp));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t kk = 0; kk < kp; ++kk) {
        int8_t v = static_cast<int8_t>(next(&s));
        if (r == 0) v = -128;
        if (r == 1) v = 127;
        if (r == 2) v = kk % 2 == 0 ? int8_t{-128} : int8_t{127};
        w[static_cast<size_t>(r * kp + kk)] = v;
      }
    }
    for (size_t xi = 0; xi < xs.size(); ++xi) {
      for (int64_t len : {kp, kp - 1, kp - 2, kp - 3}) {
        if (len < 1) continue;
        std::vector<int8_t> wl = w;  // zeros past len, as packed
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t kk = len; kk < kp; ++kk) wl[static_cast<size_t>(r * kp + kk)] = 0;
        }
        const std::vector<uint8_t> x(xs[xi].begin(), xs[xi].begin() + len);
        for (uint8_t flip : {uint8_t{0}, uint8_t{0x80}}) {
          for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
            if (!processor_has(isa)) continue;
            std::vector<int32_t> out(static_cast<size_t>(rows + 1), 12345);
            qgemm_dot_rows(kp, len, wl.data(), rows, x.data(), flip, out.data(), isa);
            for (int64_t r = 0; r < rows; ++r) {
              int64_t want = 0;
              for (int64_t kk = 0; kk < len; ++kk) {
                want += int64_t{static_cast<uint8_t>(x[static_cast<size_t>(kk)] ^ flip)} *
                        wl[static_cast<size_t>(r * kp + kk)];
              }
              ASSERT_EQ(out[static_cast<size_t>(r)], want) << isa_name(isa) << " kp=" << kp << " len=" << len
                                                           << " flip " << int{flip} << " x " << xi << " row " << r;
            }
            EXPECT_EQ(out.back(), 12345) << "wrote past the rows";
          }
        }
      }
    }
  }
  ASSERT_EQ(active_isa(), before);
}

#if KILN_X86
// ChannelAffineInt8's AVX2 row against its definition, one fused
// multiply-add rounded once, then half to even: with a = 5/7 (in float) and
// b = -300.5, 245 a + b is -125.4999924, so -125; a multiply rounded before
// the add (to 175) would land on the tie -125.5 and round to -126. Random
// rows besides, with bounds, zero points and both output types.
TEST(QGemm, ChannelAffineRowIsOneFusedMultiplyAdd) {
  if (!processor_has(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  const auto reference = [](uint8_t x, uint8_t flip, int32_t x_zp, float a, float b, int32_t y_zp, int32_t lo,
                            int32_t hi) {
    float f = fmaf(static_cast<float>(static_cast<int32_t>(x ^ flip) - x_zp), a, b);
    f = std::min(std::max(f, -kChannelAffineLimit), kChannelAffineLimit);
    return std::min(hi, std::max(lo, static_cast<int32_t>(std::nearbyint(f)) + y_zp));
  };
  std::vector<uint8_t> x(64), y(64);
  for (int i = 0; i < 64; ++i) x[i] = static_cast<uint8_t>(i % 2 == 0 ? 245 : (i * 37) % 256);
  channel_affine_row_avx2(x.data(), 64, 0, 0, 5.f / 7.f, -300.5f, 200, 0, 255, true, y.data());
  EXPECT_EQ(y[0], 200 - 125);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[i], reference(x[i], 0, 0, 5.f / 7.f, -300.5f, 200, 0, 255)) << i;
  srand(5);
  for (int trial = 0; trial < 200; ++trial) {
    const uint8_t flip = trial % 2 ? 0x80 : 0;
    const bool y_unsigned = trial % 3 != 0;
    const float a = static_cast<float>(rand() % 2001 - 1000) / 997.f,
                b = static_cast<float>(rand() % 4001 - 2000) / 31.f;
    const int32_t x_zp = rand() % 256, low = y_unsigned ? 0 : -128;
    const int32_t y_zp = low + rand() % 256, lo = low + rand() % 64, hi = low + 255 - rand() % 64;
    for (auto& v : x) v = static_cast<uint8_t>(rand() % 256);
    channel_affine_row_avx2(x.data(), 64, flip, x_zp, a, b, y_zp, lo, hi, y_unsigned, y.data());
    for (int i = 0; i < 64; ++i) {
      const int32_t want = reference(x[i], flip, x_zp, a, b, y_zp, lo, hi);
      ASSERT_EQ(y_unsigned ? int32_t{y[i]} : int32_t{static_cast<int8_t>(y[i])}, want) << "trial " << trial << " " << i;
    }
  }
}
#endif

// The ISA switch picks the inner loop: each path the processor has gives
// the same bits as the portable one, requantized, into a transposed
// (matrix-product) output.
// Three channel tiles: the first has a channel whose shift is below 32 (so
// the whole tile takes the scalar epilogue), the second eight channels side
// by side (x86's requantize_columns_avx2), the third five.
TEST(QGemm, EveryIsaPathRequantizesAlike) {
  const Operands o = make(21, 37, 75, 3, false);
  std::vector<uint8_t> packed(static_cast<size_t>(qgemm_packed_x_bytes(o.k, o.n)));
  qgemm_pack_rows(o.x.data(), o.k, o.n, o.k, false, packed.data(), nullptr);
  std::vector<int32_t> bias(21, -40000), multiplier(21), shift(21);
  for (int64_t c = 0; c < 21; ++c) {
    ASSERT_TRUE(qgemm_quantize_multiplier(c == 2 ? 0.7 : 0.0003 * (c + 1), &multiplier[static_cast<size_t>(c)],
                                          &shift[static_cast<size_t>(c)]));
  }
  ASSERT_LT(shift[2], 32);
  std::vector<std::vector<int8_t>> results;
  const Isa before = active_isa();
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (!processor_has(isa)) continue;
    ASSERT_EQ(set_isa(isa), Error::kOk);
    std::vector<int8_t> y(static_cast<size_t>(o.m * o.n));
    QGemmProblem p;
    // clang-format off
    p.m = o.m; p.n = o.n; p.k = o.k;
    p.w = o.w.data(); p.x = packed.data(); p.bias = bias.data();
    p.multiplier = multiplier.data(); p.shift = shift.data();
    p.y_zp = -3; p.y_min = -100; p.y_max = 90;
    p.y_dtype = DType::INT8; p.y = y.data();
    p.y_channel_stride = 1; p.y_column_stride = o.m;
    p.isa = active_isa();
    // clang-format on
    qgemm(p, qgemm_tile_for(active_isa()));
    for (int64_t c = 0; c < o.m; ++c) {
      for (int64_t col = 0; col < o.n; ++col) {
        const double real = std::ldexp(double(multiplier[static_cast<size_t>(c)]), -shift[static_cast<size_t>(c)]);
        const double exact = double(reference_sum(o, c, col) - 40000) * real;
        const double want = std::min(90.0, std::max(-100.0, std::floor(exact + 0.5) - 3));
        ASSERT_EQ(y[static_cast<size_t>(col * o.m + c)], want) << isa_name(isa) << " at " << c << "," << col;
      }
    }
    results.push_back(y);
  }
  ASSERT_EQ(set_isa(before), Error::kOk);
  for (size_t i = 1; i < results.size(); ++i) EXPECT_EQ(results[i], results[0]);
}

// A convolution's output layout (channel planes, column stride 1): the
// epilogue requantizes runs of up to 128 columns per channel (shorter for
// long reductions, so the run's panels stay in L1). Several runs and a
// partial one, channel counts off the tile, long and short reductions: the
// exact rounding on every path, nothing written past the planes. Also with
// 7-bit data but for one byte in every third panel: the AVX2 tiles of a
// run (which write its rows themselves) take vpmaddubsw or the exact split
// panel by panel. Column counts that leave a last panel of at most 8
// columns (17, 129, 1) take VNNI's 256-bit tile for it where the processor
// has AVX512VL.
TEST(QGemm, PlaneOutputsRequantizeInRuns) {
  const int64_t shapes[][3] = {{13, 300, 75}, {9, 17, 5}, {8, 129, 1100}, {3, 16, 2000}, {20, 1, 12}};
  const Isa before = active_isa();
  for (const auto& shape : shapes) {
    for (bool mixed : {false, true}) {
      Operands o = make(shape[0], shape[1], shape[2], 11, false);
      if (mixed) {
        for (auto& v : o.x) v &= 0x7F;
        for (int64_t col = kQGemmNr; col < o.n; col += 3 * kQGemmNr)
          o.x[static_cast<size_t>(col * o.k + o.k / 2)] = 200;
      }
      std::vector<uint8_t> packed(static_cast<size_t>(qgemm_packed_x_bytes(o.k, o.n)));
      qgemm_pack_rows(o.x.data(), o.k, o.n, o.k, false, packed.data(), nullptr);
      std::vector<int32_t> bias(static_cast<size_t>(o.m)), multiplier(static_cast<size_t>(o.m)),
          shift(static_cast<size_t>(o.m));
      for (int64_t c = 0; c < o.m; ++c) {
        bias[static_cast<size_t>(c)] = static_cast<int32_t>(300 * c - 2000);
        ASSERT_TRUE(qgemm_quantize_multiplier(0.0004 / (1 + o.k / 64) * (c + 1), &multiplier[static_cast<size_t>(c)],
                                              &shift[static_cast<size_t>(c)]));
      }
      for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
        if (!processor_has(isa)) continue;
        ASSERT_EQ(set_isa(isa), Error::kOk);
        std::vector<uint8_t> y(static_cast<size_t>(o.m * o.n + 1), 0xA5);
        QGemmProblem p;
        // clang-format off
        p.m = o.m; p.n = o.n; p.k = o.k;
        p.w = o.w.data(); p.x = packed.data(); p.bias = bias.data();
        p.multiplier = multiplier.data(); p.shift = shift.data();
        p.y_zp = 120; p.y_min = 5; p.y_max = 250;
        p.y_dtype = DType::UINT8; p.y = y.data();
        p.y_channel_stride = o.n; p.y_column_stride = 1;
        // clang-format on
        p.isa = isa;
        qgemm(p, qgemm_tile_for(isa));
        for (int64_t c = 0; c < o.m; ++c) {
          for (int64_t col = 0; col < o.n; ++col) {
            const double real = std::ldexp(double(multiplier[static_cast<size_t>(c)]), -shift[static_cast<size_t>(c)]);
            const double exact = double(reference_sum(o, c, col) + bias[static_cast<size_t>(c)]) * real;
            const double want = std::min(250.0, std::max(5.0, std::floor(exact + 0.5) + 120));
            ASSERT_EQ(y[static_cast<size_t>(c * o.n + col)], want)
                << isa_name(isa) << (mixed ? " mixed" : "") << " m=" << o.m << " n=" << o.n << " k=" << o.k << " at "
                << c << "," << col;
          }
        }
        EXPECT_EQ(y.back(), 0xA5) << "wrote past the planes";
      }
    }
  }
  ASSERT_EQ(set_isa(before), Error::kOk);
}

// Columns stored channel by channel (a 1x1 convolution's input) pack as
// the same matrix stored column by column does, flipped or not, tails
// included.
TEST(QGemm, PackColumnsMatchesPackRows) {
  for (int64_t n : {1, 15, 16, 17, 50}) {
    for (int64_t k : {1, 3, 4, 9}) {
      for (bool flip : {false, true}) {
        uint32_t seed = static_cast<uint32_t>(n * 31 + k);
        std::vector<uint8_t> by_channel(static_cast<size_t>(k * n)), by_column(static_cast<size_t>(k * n));
        for (int64_t kk = 0; kk < k; ++kk) {
          for (int64_t p = 0; p < n; ++p) {
            const uint8_t v = static_cast<uint8_t>(next(&seed));
            by_channel[static_cast<size_t>(kk * n + p)] = v;
            by_column[static_cast<size_t>(p * k + kk)] = v;
          }
        }
        const size_t bytes = static_cast<size_t>(qgemm_packed_x_bytes(k, n));
        std::vector<uint8_t> want(bytes, 0xEE), got(bytes, 0xEE);
        std::vector<int32_t> want_sums(static_cast<size_t>(n)), got_sums(static_cast<size_t>(n));
        qgemm_pack_rows(by_column.data(), k, n, k, flip, want.data(), want_sums.data());
        qgemm_pack_columns(by_channel.data(), n, n, k, flip, got.data(), got_sums.data());
        ASSERT_EQ(got, want) << "n=" << n << " k=" << k << " flip=" << flip;
        ASSERT_EQ(got_sums, want_sums);
      }
    }
  }
}

// im2col packing: padding takes the zero point, int8 inputs are flipped,
// the column sums include the padding.
TEST(QGemm, Im2colPacksWindowsPaddingAndFlip) {
  // {c, h, w, kh, kw, sh, sw, pt, pl}: small windows; rows copied in 16-byte
  // moves (37 wide) or whole (100 wide); stride 2 over rows wide enough for
  // the 16-at-a-time even-byte path, with its scalar tail and padding; and
  // stride-1 "same" convolutions (one shifted copy of the plane, edges
  // padded afterwards) over several 256-column passes, 5x5 windows and a
  // plane narrower than the window.
  const int64_t shapes[][9] = {
      {2, 5, 4, 3, 2, 2, 1, 1, 1},   {2, 3, 37, 3, 3, 1, 1, 1, 1}, {1, 2, 100, 1, 3, 1, 1, 0, 2},
      {2, 4, 70, 3, 3, 2, 2, 1, 1},  {1, 3, 67, 2, 5, 1, 2, 0, 2}, {3, 3, 33, 3, 3, 1, 2, 1, 0},
      {1, 12, 30, 3, 3, 1, 1, 1, 1}, {2, 6, 9, 5, 5, 1, 1, 2, 2},  {1, 2, 3, 5, 5, 1, 1, 2, 2}};
  for (const auto& s : shapes) {
    const int64_t c = s[0], h = s[1], w = s[2], kh = s[3], kw = s[4], sh = s[5], sw = s[6], pt = s[7], pl = s[8];
    const int64_t oh = (h + 2 * pt - kh) / sh + 1, ow = (w + 2 * pl - kw) / sw + 1;
    std::vector<int8_t> x(static_cast<size_t>(c * h * w));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int8_t>(int(i * 37) % 256 - 128);
    QIm2col g;
    g.x = reinterpret_cast<const uint8_t*>(x.data());
    // clang-format off
    g.channels = c; g.h = h; g.w = w; g.kh = kh; g.kw = kw; g.sh = sh; g.sw = sw; g.pt = pt; g.pl = pl;
    g.oh = oh; g.ow = ow; g.flip = true; g.pad = 131;
    // clang-format on
    const int64_t k = c * kh * kw, kp = qgemm_kp(k), n = oh * ow;
    std::vector<uint8_t> packed(static_cast<size_t>(qgemm_packed_x_bytes(k, n)));
    std::vector<int32_t> sums(static_cast<size_t>(n));
    qgemm_pack_im2col(g, packed.data(), sums.data());
    for (int64_t col = 0; col < n; ++col) {
      const int64_t oy = col / ow, ox = col % ow;
      int32_t sum = 0;
      for (int64_t kk = 0; kk < kp; ++kk) {
        int want = 0;
        if (kk < k) {
          const int64_t ch = kk / (kh * kw), ky = kk / kw % kh, kx = kk % kw;
          const int64_t iy = oy * sh - pt + ky, ix = ox * sw - pl + kx;
          want = iy >= 0 && iy < h && ix >= 0 && ix < w ? x[static_cast<size_t>((ch * h + iy) * w + ix)] + 128 : 131;
        }
        sum += want;
        const size_t at =
            static_cast<size_t>((col / kQGemmNr) * kp * kQGemmNr + (kk / 4) * 64 + (col % kQGemmNr) * 4 + kk % 4);
        ASSERT_EQ(packed[at], want) << "w " << w << " sw " << sw << " column " << col << " k " << kk;
      }
      EXPECT_EQ(sums[static_cast<size_t>(col)], sum);
    }
  }
}

// The direct convolution (x86: the input interleaved four channels a byte
// into the strides' phase planes, the offsets tile reading it in place,
// columns over the phase planes' width) against im2col, the portable
// product and the scalar epilogue: the same bytes on every tile it has
// (AVX2 with and without vpmaddubsw, VNNI), for channel counts off the quad
// (1, 3, 5, 37), 3x3, 5x5, 3x5, 10x4, 1x3 and 1x1 windows, strides 1, 2
// and 3 (and unequal), asymmetric padding, dilation with and without
// stride, planes of one row or column and smaller than the window's reach,
// widths below, at and past 16, several column runs, output channels off
// the tile, int8 and uint8 inputs, 7-bit and full-range data, and scales
// that saturate part of the output. The scratch is exactly the least size
// (the weights reordered a tile of 8 channels at a time) or room for all
// of them, and nothing is written past the output planes.
TEST(QGemm, DirectConvolutionMatchesIm2colAndTheProduct) {
#if KILN_X86
  struct Case {
    int64_t c, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, m;
  };
  const Case cases[] = {
      {3, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 16},  {16, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 16},
      {5, 7, 17, 3, 3, 1, 1, 1, 1, 1, 2, 0, 1, 9},    {1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3},
      {37, 6, 5, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 13},   {4, 9, 40, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 8},
      {8, 1, 70, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1, 24},   {6, 11, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 5},
      {2, 20, 1, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0, 7},    {32, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 32},
      {3, 96, 96, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 8},   {16, 32, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 32},
      {16, 31, 33, 3, 3, 2, 2, 1, 1, 0, 1, 1, 0, 11}, {1, 49, 10, 10, 4, 2, 2, 1, 1, 4, 1, 5, 2, 64},
      {16, 32, 32, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 32}, {5, 17, 23, 3, 3, 3, 2, 2, 1, 2, 1, 2, 1, 6},
      {7, 13, 29, 3, 5, 2, 3, 1, 1, 0, 3, 2, 1, 9},   {4, 2, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4},
  };
  std::vector<QGemmTileOffsetsFn> tiles;
  if (processor_has(Isa::kAvx2)) tiles.push_back(qgemm_tile_offsets_avx2);
  if (processor_has(Isa::kAvx512) && processor_has_avx512_vnni()) tiles.push_back(qgemm_tile_offsets_vnni);
  if (tiles.empty()) GTEST_SKIP() << "no AVX2";
  for (const Case& cs : cases) {
    for (int variant = 0; variant < 3; ++variant) {
      // 0: uint8, full range; 1: uint8, every byte <= 127; 2: int8, full range.
      const bool flip = variant == 2;
      const uint8_t pad = variant == 1 ? 100 : 131;
      const int64_t taps = cs.kh * cs.kw, k = cs.c * taps, kp = qgemm_kp(k);
      const int64_t oh = (cs.h + cs.pt + cs.pb - (cs.kh - 1) * cs.dh - 1) / cs.sh + 1;
      const int64_t ow = (cs.w + cs.pl + cs.pr - (cs.kw - 1) * cs.dw - 1) / cs.sw + 1;
      ASSERT_GT(oh, 0);
      ASSERT_GT(ow, 0);
      uint32_t seed = static_cast<uint32_t>(cs.c * 31 + cs.w * 7 + variant);
      std::vector<uint8_t> x(static_cast<size_t>(cs.c * cs.h * cs.w));
      for (auto& v : x) v = static_cast<uint8_t>(variant == 1 ? next(&seed) % 128 : next(&seed));
      std::vector<int8_t> w(static_cast<size_t>(cs.m * kp), 0);
      for (int64_t o = 0; o < cs.m; ++o) {
        for (int64_t kk = 0; kk < k; ++kk) {
          w[static_cast<size_t>(o * kp + kk)] = o == 1 ? (kk % 2 ? 127 : -128) : static_cast<int8_t>(next(&seed));
        }
      }
      std::vector<int32_t> bias(static_cast<size_t>(cs.m)), multiplier(static_cast<size_t>(cs.m)),
          shift(static_cast<size_t>(cs.m));
      for (int64_t o = 0; o < cs.m; ++o) {
        bias[static_cast<size_t>(o)] = static_cast<int32_t>(500 * o - 3000);
        ASSERT_TRUE(qgemm_quantize_multiplier(0.02 / std::sqrt(double(k)) * (1 + o % 3),
                                              &multiplier[static_cast<size_t>(o)], &shift[static_cast<size_t>(o)]));
      }
      // The reference: im2col, the portable tile, the scalar epilogue.
      QIm2col g;
      // clang-format off
      g.x = x.data(); g.channels = cs.c; g.h = cs.h; g.w = cs.w; g.kh = cs.kh; g.kw = cs.kw; g.sh = cs.sh; g.sw = cs.sw;
      g.dh = cs.dh; g.dw = cs.dw; g.pt = cs.pt; g.pl = cs.pl; g.oh = oh; g.ow = ow; g.flip = flip; g.pad = pad;
      // clang-format on
      std::vector<uint8_t> packed(static_cast<size_t>(qgemm_packed_x_bytes(k, oh * ow)));
      qgemm_pack_im2col(g, packed.data(), nullptr);
      std::vector<uint8_t> want(static_cast<size_t>(cs.m * oh * ow));
      QGemmProblem p;
      // clang-format off
      p.m = cs.m; p.n = oh * ow; p.k = k;
      p.w = w.data(); p.x = packed.data(); p.bias = bias.data();
      p.multiplier = multiplier.data(); p.shift = shift.data();
      p.y_zp = 110; p.y_min = 3; p.y_max = 252;
      p.y_dtype = DType::UINT8; p.y = want.data();
      p.y_channel_stride = oh * ow; p.y_column_stride = 1;
      // clang-format on
      p.isa = Isa::kScalar;
      qgemm(p, qgemm_tile_portable);
      int64_t low = 0, high = 0;
      for (uint8_t v : want) {
        low += v == 3;
        high += v == 252;
      }
      if (want.size() >= 200) {
        EXPECT_GT(low, 0) << "c " << cs.c << " w " << cs.w;
        EXPECT_GT(high, 0) << "c " << cs.c << " w " << cs.w;
      }
      for (QGemmTileOffsetsFn tile : tiles) {
        QConvDirect d;
        // clang-format off
        d.x = x.data(); d.c = cs.c; d.h = cs.h; d.w = cs.w; d.kh = cs.kh; d.kw = cs.kw; d.sh = cs.sh; d.sw = cs.sw;
        d.dh = cs.dh; d.dw = cs.dw; d.pt = cs.pt; d.pl = cs.pl; d.pb = cs.pb; d.pr = cs.pr; d.oh = oh; d.ow = ow;
        d.flip = flip; d.pad = pad;
        d.m = cs.m; d.w8 = w.data(); d.bias = bias.data(); d.multiplier = multiplier.data(); d.shift = shift.data();
        d.y_zp = 110; d.y_min = 3; d.y_max = 252; d.y_dtype = DType::UINT8;
        // clang-format on
        d.isa = tile == qgemm_tile_offsets_vnni ? Isa::kAvx512 : Isa::kAvx2;
        const int64_t bytes = qgemm_conv_direct_bytes(d);
        ASSERT_GT(bytes, 0);
        // The least scratch (weights one tile of channels at a time), and
        // room for every channel's.
        for (int64_t extra : {int64_t{0}, cs.m * qgemm_kp(k) * 3}) {
          std::vector<uint8_t> scratch(static_cast<size_t>(bytes + extra), 0xEE);
          std::vector<uint8_t> got(want.size() + 1, 0xA5);
          d.y = got.data();
          qgemm_conv_direct(d, scratch.data(), bytes + extra, tile);
          EXPECT_EQ(got.back(), 0xA5) << "wrote past the planes";
          got.pop_back();
          ASSERT_EQ(got, want) << "c " << cs.c << " h " << cs.h << " w " << cs.w << " window " << cs.kh << "x" << cs.kw
                               << " stride " << cs.sh << "x" << cs.sw << " variant " << variant << " extra " << extra
                               << " tile " << (tile == qgemm_tile_offsets_vnni ? "vnni" : "avx2");
        }
      }
    }
  }
#else
  GTEST_SKIP() << "the direct convolution is x86 only";
#endif
}

// AddInt8's AVX2 rows (64-bit lanes offset by 2^62, a logical shift)
// against the exact int64 formula: every byte value of a and b, signed and
// unsigned operands and outputs, shifts from 10 to 62, multipliers 0, 1,
// 2^31 - 1 and random, zero points at both ends, clamps inside the range;
// the tail past the last multiple of 8 left alone.
TEST(QGemm, AddInt8RowsMatchTheExactFormula) {
#if KILN_X86
  if (!processor_has(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  for (const int64_t n : {256 + 7, 16 + 8 + 5}) {
    std::vector<uint8_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    uint32_t seed = 5;
    for (int64_t i = 0; i < n; ++i) {
      a[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
      b[static_cast<size_t>(i)] = static_cast<uint8_t>(i % 3 == 0 ? 255 - i : next(&seed));
    }
    // The 16-bit split (shifts 17 to 46, multipliers below 2^31 - 2^15) and
    // the 64-bit lanes: low halves of 2^15 and more (0x4000C000), the
    // largest that splits (0x7FFF7FFF) and one just past it (0x7FFF8000).
    const int32_t multipliers[][2] = {{1 << 30, 1 << 30},      {INT32_MAX, 1},           {0, INT32_MAX},
                                      {1234567890, 987654321}, {0x4000C000, 0x7FFF7FFF}, {0x7FFF8000, 5}};
    int64_t checked = 0, clamped = 0;
    for (int32_t s : {10, 17, 30, 31, 32, 45, 62}) {
      for (const auto& mm : multipliers) {
        for (int signs = 0; signs < 8; ++signs) {
          const bool a_signed = signs & 1, b_signed = signs & 2, y_signed = signs & 4;
          const int32_t za = a_signed ? -128 : 255, zb = b_signed ? 127 : 0;
          const int32_t lo = y_signed ? -100 : 3, hi = y_signed ? 127 : 250, y_zp = y_signed ? -5 : 130;
          std::vector<uint8_t> y(static_cast<size_t>(n), 0xA5);
          add_int8_row_avx2(a.data(), b.data(), n, a_signed, b_signed, za, zb, mm[0], mm[1], s, y_zp, lo, hi, y_signed,
                            y.data());
          for (int64_t i = 0; i < n; ++i) {
            const uint8_t got = y[static_cast<size_t>(i)];
            if (i >= n - n % 8) {
              ASSERT_EQ(got, 0xA5) << "wrote the tail";
              continue;
            }
            const int64_t va = a_signed ? static_cast<int8_t>(a[static_cast<size_t>(i)]) : a[static_cast<size_t>(i)];
            const int64_t vb = b_signed ? static_cast<int8_t>(b[static_cast<size_t>(i)]) : b[static_cast<size_t>(i)];
            int64_t want = (((va - za) * mm[0] + (vb - zb) * mm[1] + (int64_t{1} << (s - 1))) >> s) + y_zp;
            clamped += want < lo || want > hi;
            want = std::min<int64_t>(hi, std::max<int64_t>(lo, want));
            const int64_t value = y_signed ? static_cast<int8_t>(got) : got;
            ASSERT_EQ(value, want) << "s " << s << " ma " << mm[0] << " mb " << mm[1] << " signs " << signs << " at "
                                   << i;
            ++checked;
          }
        }
      }
    }
    EXPECT_GT(clamped, 0);
    EXPECT_LT(clamped, checked);
  }
#else
  GTEST_SKIP() << "x86 only";
#endif
}

// The vector epilogue and the depthwise tap give the scalar loops' bits on
// every path this processor has (lengths around the vector widths, shifts
// 32..62, biases up to 2^30, both output dtypes).
TEST(QGemm, RequantizeRowAndDepthwiseTapAgreeAcrossPaths) {
  uint32_t seed = 99;
  for (int64_t n : {1, 7, 8, 9, 16, 31, 40}) {
    for (int32_t s : {32, 33, 40, 47, 62}) {
      std::vector<int32_t> acc(static_cast<size_t>(n));
      for (auto& v : acc) v = static_cast<int32_t>(next(&seed) % (1u << 28)) - (1 << 27);
      const int32_t bias = static_cast<int32_t>(next(&seed) % (1u << 24)) - (1 << 23);
      const int32_t m = (1 << 30) + static_cast<int32_t>(next(&seed) % (1u << 30));
      const int32_t mult_s = s - 20;  // outputs spread over the 8-bit range and beyond
      for (DType dtype : {DType::UINT8, DType::INT8}) {
        std::vector<uint8_t> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
        const int32_t lo = dtype == DType::UINT8 ? 0 : -128;
        qgemm_requantize_row(acc.data(), n, bias, m, mult_s < 32 ? s : mult_s, 5, lo, lo + 255, dtype, want.data(),
                             Isa::kScalar, true);
        for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
          if (!processor_has(isa)) continue;
          qgemm_requantize_row(acc.data(), n, bias, m, mult_s < 32 ? s : mult_s, 5, lo, lo + 255, dtype, got.data(),
                               isa, true);
          ASSERT_EQ(got, want) << isa_name(isa) << " n=" << n << " s=" << s;
        }
      }
    }
    std::vector<uint8_t> x(static_cast<size_t>(2 * n));
    for (auto& v : x) v = static_cast<uint8_t>(next(&seed));
    for (int64_t stride : {1, 2}) {
      std::vector<int32_t> want(static_cast<size_t>(n), 17), got(static_cast<size_t>(n), 17);
      qgemm_depthwise_tap(want.data(), x.data(), stride, n, -128, Isa::kScalar);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(want[static_cast<size_t>(i)], 17 - 128 * x[static_cast<size_t>(i * stride)]);
      for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
        if (!processor_has(isa)) continue;
        std::fill(got.begin(), got.end(), 17);
        qgemm_depthwise_tap(got.data(), x.data(), stride, n, -128, isa);
        ASSERT_EQ(got, want) << isa_name(isa) << " n=" << n << " stride " << stride;
      }
    }
  }
}

// A channel tile's rows at once (qgemm_requantize_rows: the avx512 path's
// masked 16-lane loop) give each row's scalar bits: lengths around the
// vector width, sums as large as a reduction of kQGemmVectorRequantMaxK
// bytes makes them with biases of 2^30, a tile with one row whose shift is
// below 32 (the whole tile then takes the per-row loops), both dtypes;
// nothing written between or past the rows.
TEST(QGemm, RequantizeRowsAgreeWithTheRowLoopOnEveryPath) {
  uint32_t seed = 7;
  const int64_t rows = 5, ld = 70, y_ld = 66;
  const int32_t limit = static_cast<int32_t>(kQGemmVectorRequantMaxK * 255 * 128);
  for (int64_t n : {1, 15, 16, 17, 33, 49, 64}) {
    for (bool low_shift : {false, true}) {
      std::vector<int32_t> acc(static_cast<size_t>(rows * ld)), bias(rows), m(rows), s(rows);
      const auto wide = [&seed] { return (next(&seed) << 8) ^ next(&seed); };  // 32 random bits
      for (auto& v : acc) v = static_cast<int32_t>(wide() % (2u * static_cast<uint32_t>(limit))) - limit;
      for (int64_t r = 0; r < rows; ++r) {
        bias[static_cast<size_t>(r)] = r == 0   ? (1 << 30)
                                       : r == 1 ? -(1 << 30)
                                                : static_cast<int32_t>(next(&seed) % 4000) - 2000;
        m[static_cast<size_t>(r)] = (1 << 30) + static_cast<int32_t>(wide() % (1u << 30));
        // Sums near 2^30 times m near 2^30.5, shifted by 52..56: outputs
        // spread over the 8-bit range and past it.
        s[static_cast<size_t>(r)] = low_shift && r == 3 ? 31 : 52 + static_cast<int32_t>(r);
      }
      acc[0] = limit;
      acc[1] = -limit;
      for (DType dtype : {DType::UINT8, DType::INT8}) {
        const int32_t lo = dtype == DType::UINT8 ? 3 : -120, hi = lo + 240;
        std::vector<uint8_t> want(static_cast<size_t>(rows * y_ld), 0x5A);
        for (int64_t r = 0; r < rows; ++r) {
          qgemm_requantize_row(acc.data() + r * ld, n, bias[static_cast<size_t>(r)], m[static_cast<size_t>(r)],
                               s[static_cast<size_t>(r)], -7, lo, hi, dtype, want.data() + r * y_ld, Isa::kScalar,
                               true);
        }
        for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
          if (!processor_has(isa)) continue;
          std::vector<uint8_t> got(static_cast<size_t>(rows * y_ld), 0x5A);
          qgemm_requantize_rows(acc.data(), ld, rows, n, bias.data(), m.data(), s.data(), -7, lo, hi, dtype, got.data(),
                                y_ld, isa, qgemm_vector_requant_k(kQGemmVectorRequantMaxK));
          ASSERT_EQ(got, want) << isa_name(isa) << " n=" << n << (low_shift ? " with a shift of 31" : "");
        }
        int64_t inside = 0;  // outputs strictly between the clamps
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t i = 0; i < n; ++i) {
            const int32_t v = dtype == DType::UINT8
                                  ? int32_t{want[static_cast<size_t>(r * y_ld + i)]}
                                  : int32_t{static_cast<int8_t>(want[static_cast<size_t>(r * y_ld + i)])};
            inside += v > lo && v < hi;
          }
        }
        if (n >= 16) {
          EXPECT_GT(inside, n / 2) << "n=" << n;
        }
      }
    }
  }
  EXPECT_FALSE(qgemm_vector_requant_k(kQGemmVectorRequantMaxK + 1));
}

// m * 2^-s is the real multiplier to 2^-31 relative; the rounding is half
// up of the exact product; tiny multipliers give 0, huge ones are refused.
TEST(QGemm, FixedPointMultiplierAndRounding) {
  for (double real : {1e-9, 3.1e-5, 0.0045, 0.25, 0.5, 0.999999999, 1.0, 7.5, 1e6}) {
    int32_t m = 0, s = 0;
    ASSERT_TRUE(qgemm_quantize_multiplier(real, &m, &s)) << real;
    EXPECT_GE(m, int32_t{1} << 30);
    EXPECT_GE(s, 1);
    EXPECT_LE(s, 62);
    EXPECT_NEAR(std::ldexp(double(m), -s) / real, 1.0, std::ldexp(1.0, -30)) << real;
  }
  int32_t m = 1, s = 0;
  EXPECT_TRUE(qgemm_quantize_multiplier(1e-12, &m, &s));
  EXPECT_EQ(m, 0);
  EXPECT_FALSE(qgemm_quantize_multiplier(std::ldexp(1.0, 31), &m, &s));
  // 0.5 exactly: m = 2^30, s = 31. Ties go up: 3 * 0.5 = 1.5 -> 2, -1.5 -> -1.
  ASSERT_TRUE(qgemm_quantize_multiplier(0.5, &m, &s));
  EXPECT_EQ(qgemm_requantize(3, m, s), 2);
  EXPECT_EQ(qgemm_requantize(-3, m, s), -1);
  EXPECT_EQ(qgemm_requantize(-4, m, s), -2);
  EXPECT_EQ(qgemm_requantize(INT32_MAX, m, s), 1073741824);
  EXPECT_EQ(qgemm_requantize(INT32_MIN, m, s), -1073741824);
}

}  // namespace
}  // namespace kiln::kernels
