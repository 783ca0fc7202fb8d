// The int8 product's tile with the AArch64 dot-product extension
// (qgemm.h; sdot, Armv8.2 and later: Cortex-A55/A75, Apple M1, Neoverse N1
// and on), the exact int32 sums of the portable loop. Each function carries
// KILN_NEON_DOT (isa_switch.h); qgemm_tile_for() takes it only where
// processor_has_dotprod(), the base NEON tile (arm/qgemm_neon.cc) otherwise.

#include "isa_switch.h"

#if KILN_NEON

#include <arm_neon.h>

#include "arm/qgemm_neon.h"
#include "qgemm.h"

namespace kiln {
namespace kernels {

using neon::broadcast_word;
using neon::load_flipped;
using neon::row_sum;

namespace {

// acc[i] += sum_{j<4} a[4i + j] * b[4i + j], signed bytes (sdot).
KILN_NEON_DOT inline int32x4_t sdot(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if KILN_SDOT_ASM
  __asm__("sdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(b));
  return acc;
#else
  return vdotq_s32(acc, a, b);
#endif
}

}  // namespace

// Dot-product extension: sdot adds, per 32-bit lane (one column), the
// four products of its 4 k bytes with the channel's 4 weights broadcast to
// every lane. Four channels x 16 columns = 16 accumulators per pass, named
// one by one so they stay in registers (an array indexed in a loop lands on
// the stack at -O2).
KILN_NEON_DOT void qgemm_tile_neon_dot(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                                       int32_t acc[kQGemmMr][kQGemmNr]) {
  for (int64_t r0 = 0; r0 < mr; r0 += 4) {
    const int64_t rows = mr - r0 < 4 ? mr - r0 : 4;
    // Rows past mr repeat the last one (never stored): the loop stays fixed.
    const int8_t* w0 = w + r0 * ldw;
    const int8_t* w1 = w + (r0 + (rows > 1 ? 1 : 0)) * ldw;
    const int8_t* w2 = w + (r0 + (rows > 2 ? 2 : rows - 1)) * ldw;
    const int8_t* w3 = w + (r0 + rows - 1) * ldw;
    int32x4_t s00 = vdupq_n_s32(0), s01 = s00, s02 = s00, s03 = s00, s10 = s00, s11 = s00, s12 = s00, s13 = s00,
              s20 = s00, s21 = s00, s22 = s00, s23 = s00, s30 = s00, s31 = s00, s32 = s00, s33 = s00;
    const uint8_t* row = panel;
    for (int64_t k = 0; k < kp; k += 4, row += 4 * kQGemmNr) {
      const int8x16_t x0 = load_flipped(row), x1 = load_flipped(row + 16), x2 = load_flipped(row + 32),
                      x3 = load_flipped(row + 48);
      int8x16_t wv = broadcast_word(w0 + k);
      s00 = sdot(s00, x0, wv);
      s01 = sdot(s01, x1, wv);
      s02 = sdot(s02, x2, wv);
      s03 = sdot(s03, x3, wv);
      wv = broadcast_word(w1 + k);
      s10 = sdot(s10, x0, wv);
      s11 = sdot(s11, x1, wv);
      s12 = sdot(s12, x2, wv);
      s13 = sdot(s13, x3, wv);
      wv = broadcast_word(w2 + k);
      s20 = sdot(s20, x0, wv);
      s21 = sdot(s21, x1, wv);
      s22 = sdot(s22, x2, wv);
      s23 = sdot(s23, x3, wv);
      wv = broadcast_word(w3 + k);
      s30 = sdot(s30, x0, wv);
      s31 = sdot(s31, x1, wv);
      s32 = sdot(s32, x2, wv);
      s33 = sdot(s33, x3, wv);
    }
    const int32x4_t sums[4][4] = {
        {s00, s01, s02, s03}, {s10, s11, s12, s13}, {s20, s21, s22, s23}, {s30, s31, s32, s33}};
    const int8_t* rows_w[4] = {w0, w1, w2, w3};
    for (int64_t r = 0; r < rows; ++r) {
      const int32x4_t correction = vdupq_n_s32(128 * row_sum(rows_w[r], kp));
      for (int j = 0; j < 4; ++j) vst1q_s32(&acc[r0 + r][4 * j], vaddq_s32(sums[r][j], correction));
    }
  }
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_NEON
