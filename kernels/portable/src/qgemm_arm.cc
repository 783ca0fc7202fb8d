// The int8 product's inner loops for Arm (QGemmTileFn, qgemm.h): Cortex-M
// with the DSP extension (SMLAD on SXTB16/UXTB16-widened halfwords) and
// AArch64 (sdot with the dot-product extension, vmull/vpadal without).
// Each gives the exact int32 sums of the portable loop on the same packed
// bytes (kiln/kernels/qgemm.h): panel row q holds k = 4q..4q+3 of 16
// columns, 4 bytes per column; a weight row holds 4 bytes per q.

#include <string.h>

#include "qgemm.h"

#if KILN_QGEMM_DSP
#include <arm_acle.h>
#endif
#if KILN_QGEMM_NEON
#include <arm_neon.h>
#if defined(__linux__)
#include <sys/auxv.h>
#endif
#endif

namespace kiln {
namespace kernels {

#if KILN_QGEMM_DSP

namespace {

inline uint32_t load_word(const void* p) {
  uint32_t v;
  memcpy(&v, p, sizeof(v));  // one LDR: Cortex-M4/M7 load unaligned words
  return v;
}

// SXTB16 / UXTB16 of the word rotated right by 8 (bytes 1 and 3), in one
// instruction: arm_acle.h of GCC 12 has no __ror, and GCC does not fold a
// rotate written in C into the extend's operand.
inline int32_t sxtb16_ror8(uint32_t x) {
  int32_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
  return r;
}
inline int32_t uxtb16_ror8(uint32_t x) {
  int32_t r;
  __asm__("uxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
  return r;
}

// One channel x four consecutive columns over the panel's kp / 4 rows. A
// word of four uint8 activations x3..x0 splits into the halfword pairs
// (x2, x0) = UXTB16(x) and (x3, x1) = UXTB16(x ror 8); the weights
// likewise with SXTB16. SMLAD adds both halfword products to the sum: two
// k per instruction, exact (each 16 x 16 product is |x w| <= 255 * 128,
// and the sum stays inside int32 for kp <= kQGemmMaxK). Eleven live
// registers: four sums, two weight pairs, an activation pair, three
// pointers; not inlined, so the caller's 64-bit loop state does not push
// one of them to the stack.
__attribute__((noinline)) void tile_1x4(uint32_t rows, const int8_t* w, const uint8_t* x, int32_t* out) {
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (; rows != 0; --rows, x += 4 * kQGemmNr, w += 4) {
    const uint32_t wv = load_word(w);
    const int32_t w_even = static_cast<int32_t>(__sxtb16(wv)), w_odd = sxtb16_ror8(wv);
    uint32_t xv = load_word(x);
    s0 = __smlad(static_cast<int32_t>(__uxtb16(xv)), w_even, s0);
    s0 = __smlad(uxtb16_ror8(xv), w_odd, s0);
    xv = load_word(x + 4);
    s1 = __smlad(static_cast<int32_t>(__uxtb16(xv)), w_even, s1);
    s1 = __smlad(uxtb16_ror8(xv), w_odd, s1);
    xv = load_word(x + 8);
    s2 = __smlad(static_cast<int32_t>(__uxtb16(xv)), w_even, s2);
    s2 = __smlad(uxtb16_ror8(xv), w_odd, s2);
    xv = load_word(x + 12);
    s3 = __smlad(static_cast<int32_t>(__uxtb16(xv)), w_even, s3);
    s3 = __smlad(uxtb16_ror8(xv), w_odd, s3);
  }
  out[0] = s0;
  out[1] = s1;
  out[2] = s2;
  out[3] = s3;
}

}  // namespace

void qgemm_tile_dsp(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                    int32_t acc[kQGemmMr][kQGemmNr]) {
  const uint32_t rows = static_cast<uint32_t>(kp / 4);
  for (int64_t r = 0; r < mr; ++r) {
    for (int64_t i = 0; i < kQGemmNr; i += 4) tile_1x4(rows, w + r * ldw, panel + i * 4, &acc[r][i]);
  }
}

#endif  // KILN_QGEMM_DSP

#if KILN_QGEMM_NEON

// The dot-product extension for one function (the rest of the build stays
// on the base architecture). GCC declares vdotq_s32 for a function with the
// target attribute; clang before 16 only when the whole file is built for
// it, so there sdot is written as one instruction of inline assembly.
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)
#define KILN_TARGET_DOTPROD __attribute__((target("dotprod")))
#define KILN_SDOT_ASM 1
#elif defined(__clang__)
#define KILN_TARGET_DOTPROD
#define KILN_SDOT_ASM 0
#else
#define KILN_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#define KILN_SDOT_ASM 0
#endif

namespace {

// acc[i] += sum_{j<4} a[4i + j] * b[4i + j], signed bytes (sdot).
KILN_TARGET_DOTPROD inline int32x4_t sdot(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if KILN_SDOT_ASM
  __asm__("sdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(b));
  return acc;
#else
  return vdotq_s32(acc, a, b);
#endif
}

// sum_k w[k] over one weight row (kp bytes), for the 128 * sum(w) that the
// signed loops add back (below).
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
// == x - 128, so sum x w = sum (x ^ 0x80) w + 128 sum w. Both loops below
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
inline int8x16_t load_flipped(const uint8_t* p) {
  return vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p), vdupq_n_u8(0x80)));
}

}  // namespace

// Dot-product extension: sdot adds, per 32-bit lane (one column), the
// four products of its 4 k bytes with the channel's 4 weights broadcast to
// every lane. Four channels x 16 columns = 16 accumulators per pass.
KILN_TARGET_DOTPROD void qgemm_tile_neon_dot(int64_t kp, const int8_t* w,
                                                                             int64_t ldw, int64_t mr,
                                                                             const uint8_t* panel,
                                                                             int32_t acc[kQGemmMr][kQGemmNr]) {
  for (int64_t r0 = 0; r0 < mr; r0 += 4) {
    const int64_t rows = mr - r0 < 4 ? mr - r0 : 4;
    int32x4_t s[4][4];
    for (int r = 0; r < 4; ++r) {
      for (int j = 0; j < 4; ++j) s[r][j] = vdupq_n_s32(0);
    }
    // Rows past mr repeat the last one (never stored): the loop stays fixed.
    const int8_t* wr[4];
    for (int r = 0; r < 4; ++r) wr[r] = w + (r0 + (r < rows ? r : rows - 1)) * ldw;
    for (int64_t q = 0; q < kp / 4; ++q) {
      const uint8_t* row = panel + q * 4 * kQGemmNr;
      const int8x16_t x0 = load_flipped(row), x1 = load_flipped(row + 16), x2 = load_flipped(row + 32),
                      x3 = load_flipped(row + 48);
      for (int r = 0; r < 4; ++r) {
        const int8x16_t wv = broadcast_word(wr[r] + q * 4);
        s[r][0] = sdot(s[r][0], x0, wv);
        s[r][1] = sdot(s[r][1], x1, wv);
        s[r][2] = sdot(s[r][2], x2, wv);
        s[r][3] = sdot(s[r][3], x3, wv);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int32x4_t correction = vdupq_n_s32(128 * row_sum(wr[r], kp));
      for (int j = 0; j < 4; ++j) vst1q_s32(&acc[r0 + r][4 * j], vaddq_s32(s[r][j], correction));
    }
  }
}

// Base Advanced SIMD: vmull_s8 multiplies two columns' 4 k bytes by the
// channel's 4 weights (repeated) into 8 int16 products (|p| <= 2^14);
// vpadalq_s16 adds adjacent pairs into int32 lanes (column c, k 0-1 and
// 2-3); the pairs are folded once at the end. Two channels per pass.
void qgemm_tile_neon(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                     int32_t acc[kQGemmMr][kQGemmNr]) {
  for (int64_t r0 = 0; r0 < mr; r0 += 2) {
    const int64_t rows = mr - r0 < 2 ? mr - r0 : 2;
    int32x4_t s[2][8];
    for (int r = 0; r < 2; ++r) {
      for (int j = 0; j < 8; ++j) s[r][j] = vdupq_n_s32(0);
    }
    const int8_t* wr[2] = {w + r0 * ldw, w + (r0 + rows - 1) * ldw};
    for (int64_t q = 0; q < kp / 4; ++q) {
      const uint8_t* row = panel + q * 4 * kQGemmNr;
      int8x16_t x[4];
      for (int j = 0; j < 4; ++j) x[j] = load_flipped(row + 16 * j);
      for (int r = 0; r < 2; ++r) {
        const int8x8_t wv = vget_low_s8(broadcast_word(wr[r] + q * 4));
        for (int j = 0; j < 4; ++j) {
          s[r][2 * j] = vpadalq_s16(s[r][2 * j], vmull_s8(vget_low_s8(x[j]), wv));
          s[r][2 * j + 1] = vpadalq_s16(s[r][2 * j + 1], vmull_s8(vget_high_s8(x[j]), wv));
        }
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int32x4_t correction = vdupq_n_s32(128 * row_sum(wr[r], kp));
      // s[r][2j] = (c 4j: k01, k23, c 4j+1: k01, k23), s[r][2j+1] for
      // columns 4j+2, 4j+3: one pairwise add gives columns 4j..4j+3.
      for (int j = 0; j < 4; ++j) {
        vst1q_s32(&acc[r0 + r][4 * j], vaddq_s32(vpaddq_s32(s[r][2 * j], s[r][2 * j + 1]), correction));
      }
    }
  }
}

bool processor_has_dotprod() {
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}

#endif  // KILN_QGEMM_NEON

}  // namespace kernels
}  // namespace kiln
