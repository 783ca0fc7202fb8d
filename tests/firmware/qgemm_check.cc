// The int8 product's Cortex-M inner loop, checked on the core: the loop the
// ISA switch picks on this image (SMLAD with the DSP extension, which
// Cortex-M4 and M7 have) must be that one, and must give the exact int32
// sums of a plain int64 loop and of the portable loop over shapes around
// the tile sizes (channels around 8, columns around 16, k not a multiple
// of 4), with random and extreme operands (255 x -128 and 255 x 127), and
// the same requantized int8 outputs through the shared epilogue; and the
// matrix-vector rows (qgemm_dot_rows: a one-row product's weight rows
// against one vector) likewise. Exits 0 only when every value agrees.

#include <stdint.h>
#include <string.h>

#include "kiln/kernels/isa.h"
#include "kiln/platform/mps2.h"
#include "kiln/platform/platform.h"
#include "qgemm.h"

namespace {

using namespace kiln::kernels;

constexpr int64_t kMaxM = 24, kMaxN = 40, kMaxK = 600;

uint8_t g_x[kMaxN * kMaxK];
int8_t g_w[kMaxM * kMaxK];
alignas(16) uint8_t g_packed[kMaxK * 48];
int32_t g_sums[kMaxN];
int32_t g_dots[kMaxM];
int32_t g_bias[kMaxM], g_wzp[kMaxM], g_mult[kMaxM], g_shift[kMaxM];
int32_t g_y[2][kMaxM * kMaxN];
int8_t g_q[2][kMaxM * kMaxN];

uint32_t next(uint32_t* s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

int failures = 0;

void fill(int64_t m, int64_t n, int64_t k, uint32_t seed, bool extreme) {
  const int64_t kp = qgemm_kp(k);
  uint32_t s = seed;
  for (int64_t i = 0; i < n * k; ++i) g_x[i] = extreme ? 255 : static_cast<uint8_t>(next(&s));
  memset(g_w, 0, sizeof(g_w));
  for (int64_t c = 0; c < m; ++c) {
    for (int64_t kk = 0; kk < k; ++kk) {
      g_w[c * kp + kk] = extreme ? (kk % 3 == 2 ? 127 : -128) : static_cast<int8_t>(next(&s));
    }
    g_bias[c] = static_cast<int32_t>(1000 * c - 77);
    g_wzp[c] = static_cast<int32_t>(c % 3) - 1;
    qgemm_quantize_multiplier(0.00002 * static_cast<double>(c + 1), &g_mult[c], &g_shift[c]);
  }
}

void run(int64_t m, int64_t n, int64_t k, QGemmTileFn tile, int which) {
  QGemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.w = g_w;
  p.x = g_packed;
  p.x_sums = g_sums;
  p.bias = g_bias;
  p.w_zp = g_wzp;
  p.y_dtype = kiln::DType::INT32;
  p.y = g_y[which];
  p.y_channel_stride = n;
  p.y_column_stride = 1;
  qgemm(p, tile);
  // Requantized into a matrix product's layout, no weight zero points.
  p.w_zp = nullptr;
  p.multiplier = g_mult;
  p.shift = g_shift;
  p.y_zp = -3;
  p.y_min = -128;
  p.y_max = 127;
  p.y_dtype = kiln::DType::INT8;
  p.y = g_q[which];
  p.y_channel_stride = 1;
  p.y_column_stride = m;
  qgemm(p, tile);
}

void check(int64_t m, int64_t n, int64_t k, bool extreme, QGemmTileFn tile) {
  fill(m, n, k, 7 + static_cast<uint32_t>(k), extreme);
  qgemm_pack_rows(g_x, k, n, k, false, g_packed, g_sums);
  run(m, n, k, tile, 0);
  run(m, n, k, qgemm_tile_portable, 1);
  const int64_t kp = qgemm_kp(k);
  int bad = 0;
  for (int64_t c = 0; c < m; ++c) {
    for (int64_t col = 0; col < n; ++col) {
      int64_t want = g_bias[c], colsum = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        want += int64_t{g_x[col * k + kk]} * g_w[c * kp + kk];
        colsum += g_x[col * k + kk];
      }
      want -= g_wzp[c] * colsum;
      const int32_t got = g_y[0][c * n + col];
      if (got != want || g_y[1][c * n + col] != want || g_q[0][col * m + c] != g_q[1][col * m + c]) {
        if (bad++ < 3) {
          kiln_mps2_printf(
              "  m=%d n=%d k=%d extreme=%d at %d,%d: inner loop %ld, portable %ld, int64 %ld; "
              "int8 %d vs %d\n",
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), extreme ? 1 : 0, static_cast<int>(c),
              static_cast<int>(col), static_cast<long>(got), static_cast<long>(g_y[1][c * n + col]),
              static_cast<long>(want), g_q[0][col * m + c], g_q[1][col * m + c]);
        }
      }
    }
  }
  // The last column read in place (k bytes, as uint8 and as int8 flipped
  // in the loop) through the matrix-vector rows of this ISA.
  const uint8_t* column = g_x + (n - 1) * k;
  for (uint8_t flip : {uint8_t{0}, uint8_t{0x80}}) {
    qgemm_dot_rows(kp, k, g_w, m, column, flip, g_dots, active_isa());
    for (int64_t c = 0; c < m; ++c) {
      int64_t want = 0;
      for (int64_t kk = 0; kk < k; ++kk) want += int64_t{static_cast<uint8_t>(column[kk] ^ flip)} * g_w[c * kp + kk];
      if (g_dots[c] != want && bad++ < 3) {
        kiln_mps2_printf("  m=%d k=%d extreme=%d flip %d row %d: dot rows %ld, int64 %ld\n", static_cast<int>(m),
                         static_cast<int>(k), extreme ? 1 : 0, static_cast<int>(flip), static_cast<int>(c),
                         static_cast<long>(g_dots[c]), static_cast<long>(want));
      }
    }
  }
  failures += bad;
  kiln_mps2_printf("m=%2d n=%2d k=%3d %-7s %s\n", static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                   extreme ? "extreme" : "random", bad == 0 ? "ok" : "MISMATCH");
}

}  // namespace

int main() {
  const QGemmTileFn tile = qgemm_tile_for(active_isa());
#if KILN_CORTEXM_DSP
  const QGemmTileFn expected = qgemm_tile_dsp;
  const char* name = "dsp (SMLAD)";
#else
  const QGemmTileFn expected = qgemm_tile_portable;
  const char* name = "portable";
#endif
  kiln_mps2_printf("qgemm inner loop: %s\n", tile == expected ? name : "UNEXPECTED");
  if (tile != expected) return 1;
  const int64_t shapes[][3] = {{1, 1, 1},  {8, 16, 4},   {7, 15, 3},   {9, 17, 5},
                               {2, 33, 8}, {16, 33, 64}, {3, 40, 147}, {24, 5, 576}};
  for (const auto& s : shapes) {
    for (bool extreme : {false, true}) check(s[0], s[1], s[2], extreme, tile);
  }
  // Instructions of each loop on a pointwise-convolution-like product (24
  // channels, 40 columns, k = 64; each run() is the int32 and the int8
  // product, epilogues included; 40 instructions a tick with -icount
  // shift=0), for bench/RESULTS.md. Printed, not checked.
  fill(24, 40, 64, 1, false);
  qgemm_pack_rows(g_x, 64, 40, 64, false, g_packed, g_sums);
  uint64_t ticks[2];
  for (int which = 0; which < 2; ++which) {
    const uint64_t start = kiln_pal_ticks();
    for (int rep = 0; rep < 3; ++rep) run(24, 40, 64, which == 0 ? tile : qgemm_tile_portable, which);
    ticks[which] = kiln_pal_ticks() - start;
  }
  kiln_mps2_printf("24 x 40 x 64, 3 times: %s %llu ticks, portable %llu ticks\n", name,
                   static_cast<unsigned long long>(ticks[0]), static_cast<unsigned long long>(ticks[1]));
  kiln_mps2_printf("%s\n", failures == 0 ? "PASS: every sum matches" : "FAIL");
  return failures == 0 ? 0 : 1;
}
