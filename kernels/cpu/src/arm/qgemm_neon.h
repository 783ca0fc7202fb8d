// What the int8 tiles of arm/qgemm_neon.cc and arm/qgemm_neon_dot.cc
// share: loads of panel bytes flipped to int8, weight words broadcast to
// every lane, and the row sums that undo the flip. Internal.

#ifndef KILN_KERNELS_CPU_SRC_ARM_QGEMM_NEON_H_
#define KILN_KERNELS_CPU_SRC_ARM_QGEMM_NEON_H_

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

namespace kiln {
namespace kernels {
namespace neon {

// sum_k w[k] over one weight row (kp bytes), for the 128 * sum(w) that the
// signed tiles add back (load_flipped).
inline int32_t row_sum(const int8_t* w, int64_t kp) {
  int32_t sum = 0;
  int64_t k = 0;
  for (; k + 16 <= kp; k += 16) sum += vaddlvq_s8(vld1q_s8(w + k));
  for (; k < kp; ++k) sum += w[k];
  return sum;
}

inline int8x16_t broadcast_word(const int8_t* p) {
  int32_t v;
  memcpy(&v, p, sizeof(v));
  return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

// The panel row's 16 bytes of columns 4j..4j+3, flipped to int8: x ^ 0x80
// == x - 128, so sum x w = sum (x ^ 0x80) w + 128 sum w. Both tiles
// multiply signed bytes (sdot, smull) and add 128 * row_sum() at the end:
// exact, and the padded k (w = 0) and missing columns (x = 0) contribute
// nothing either way.
//
// Why sdot and not usdot, which multiplies the unsigned activations by the
// signed weights directly: usdot needs the int8 matrix-multiply extension
// (Armv8.6, Cortex-A510/A710/X2 and later), sdot only the dot-product one
// (Cortex-A55/A75 and later, Apple M1, Neoverse N1), so sdot runs on far
// more arm64 processors. The flip costs one EOR per 16 activation bytes
// (shared by four channels) and 128 * sum(w) per channel and tile, kp / 16
// vector adds beside the channel's kp / 4 x 4 sdot. Folding the correction
// into the planned bias instead would tie the packed program to this loop;
// the layout is shared by every ISA path (kiln/kernels/qgemm.h).
inline int8x16_t load_flipped(const uint8_t* p) { return vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p), vdupq_n_u8(0x80))); }

}  // namespace neon
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_ARM_QGEMM_NEON_H_
