// The int8 product's tile with base Advanced SIMD (qgemm.h): vmull_s8 and
// vpadalq_s16, the exact int32 sums of the portable loop on the same packed
// bytes (kiln/kernels/qgemm.h): panel row q holds k = 4q..4q+3 of 16
// columns, 4 bytes per column; a weight row holds 4 bytes per q.

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

// Base Advanced SIMD: vmull_s8 multiplies two columns' 4 k bytes by the
// channel's 4 weights (repeated) into 8 int16 products (|p| <= 2^14);
// vpadalq_s16 adds adjacent pairs into int32 lanes (column c, k 0-1 and
// 2-3); the pairs are folded once at the end. Two channels per pass, 16
// named accumulators.
void qgemm_tile_neon(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                     int32_t acc[kQGemmMr][kQGemmNr]) {
  for (int64_t r0 = 0; r0 < mr; r0 += 2) {
    const int64_t rows = mr - r0 < 2 ? mr - r0 : 2;
    const int8_t* w0 = w + r0 * ldw;
    const int8_t* w1 = w + (r0 + rows - 1) * ldw;
    int32x4_t a0 = vdupq_n_s32(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    int32x4_t b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0, b6 = a0, b7 = a0;
    const uint8_t* row = panel;
    for (int64_t k = 0; k < kp; k += 4, row += 4 * kQGemmNr) {
      const int8x16_t x0 = load_flipped(row), x1 = load_flipped(row + 16), x2 = load_flipped(row + 32),
                      x3 = load_flipped(row + 48);
      const int8x8_t u = vget_low_s8(broadcast_word(w0 + k)), v = vget_low_s8(broadcast_word(w1 + k));
      a0 = vpadalq_s16(a0, vmull_s8(vget_low_s8(x0), u));
      a1 = vpadalq_s16(a1, vmull_s8(vget_high_s8(x0), u));
      a2 = vpadalq_s16(a2, vmull_s8(vget_low_s8(x1), u));
      a3 = vpadalq_s16(a3, vmull_s8(vget_high_s8(x1), u));
      a4 = vpadalq_s16(a4, vmull_s8(vget_low_s8(x2), u));
      a5 = vpadalq_s16(a5, vmull_s8(vget_high_s8(x2), u));
      a6 = vpadalq_s16(a6, vmull_s8(vget_low_s8(x3), u));
      a7 = vpadalq_s16(a7, vmull_s8(vget_high_s8(x3), u));
      b0 = vpadalq_s16(b0, vmull_s8(vget_low_s8(x0), v));
      b1 = vpadalq_s16(b1, vmull_s8(vget_high_s8(x0), v));
      b2 = vpadalq_s16(b2, vmull_s8(vget_low_s8(x1), v));
      b3 = vpadalq_s16(b3, vmull_s8(vget_high_s8(x1), v));
      b4 = vpadalq_s16(b4, vmull_s8(vget_low_s8(x2), v));
      b5 = vpadalq_s16(b5, vmull_s8(vget_high_s8(x2), v));
      b6 = vpadalq_s16(b6, vmull_s8(vget_low_s8(x3), v));
      b7 = vpadalq_s16(b7, vmull_s8(vget_high_s8(x3), v));
    }
    // a[2j] = (column 4j: k 0-1, k 2-3; column 4j+1: ...), a[2j+1] for
    // columns 4j+2, 4j+3: one pairwise add gives columns 4j..4j+3.
    const int32x4_t sums[2][8] = {{a0, a1, a2, a3, a4, a5, a6, a7}, {b0, b1, b2, b3, b4, b5, b6, b7}};
    const int8_t* rows_w[2] = {w0, w1};
    for (int64_t r = 0; r < rows; ++r) {
      const int32x4_t correction = vdupq_n_s32(128 * row_sum(rows_w[r], kp));
      for (int j = 0; j < 4; ++j) {
        vst1q_s32(&acc[r0 + r][4 * j], vaddq_s32(vpaddq_s32(sums[r][2 * j], sums[r][2 * j + 1]), correction));
      }
    }
  }
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_NEON
