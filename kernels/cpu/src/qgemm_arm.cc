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

// One weight row against a contiguous activation vector (the matrix-vector
// product's rows, qgemm_dot_rows): the same halfword pairs as tile_1x4,
// both operands one word a step, two sums to halve the dependency chain.
__attribute__((noinline)) int32_t dot_row(uint32_t words, const int8_t* w, const uint8_t* x) {
  int32_t s0 = 0, s1 = 0;
  for (; words != 0; --words, x += 4, w += 4) {
    const uint32_t wv = load_word(w), xv = load_word(x);
    s0 = __smlad(static_cast<int32_t>(__uxtb16(xv)), static_cast<int32_t>(__sxtb16(wv)), s0);
    s1 = __smlad(uxtb16_ror8(xv), sxtb16_ror8(wv), s1);
  }
  return s0 + s1;
}

// dot_row of int8 x, each byte XORed with 0x80 into the uint8 domain as it
// is loaded (a copy of the loop, so dot_row keeps its registers).
__attribute__((noinline)) int32_t dot_row_flipped(uint32_t words, const int8_t* w, const uint8_t* x) {
  int32_t s0 = 0, s1 = 0;
  for (; words != 0; --words, x += 4, w += 4) {
    const uint32_t wv = load_word(w), xv = load_word(x) ^ 0x80808080u;
    s0 = __smlad(static_cast<int32_t>(__uxtb16(xv)), static_cast<int32_t>(__sxtb16(wv)), s0);
    s1 = __smlad(uxtb16_ror8(xv), sxtb16_ror8(wv), s1);
  }
  return s0 + s1;
}

}  // namespace

void qgemm_dot_rows_dsp(int64_t kp, int64_t len, const int8_t* w, int64_t rows, const uint8_t* x, uint8_t flip,
                        int32_t* out) {
  const uint32_t words = static_cast<uint32_t>(len / 4);
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* wr = w + r * kp;
    int32_t sum = flip != 0 ? dot_row_flipped(words, wr, x) : dot_row(words, wr, x);
    for (int64_t k = 4 * static_cast<int64_t>(words); k < len; ++k) sum += static_cast<uint8_t>(x[k] ^ flip) * wr[k];
    out[r] = sum;
  }
}

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
inline int8x16_t load_flipped(const uint8_t* p) { return vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p), vdupq_n_u8(0x80))); }

}  // namespace

// Dot-product extension: sdot adds, per 32-bit lane (one column), the
// four products of its 4 k bytes with the channel's 4 weights broadcast to
// every lane. Four channels x 16 columns = 16 accumulators per pass, named
// one by one so they stay in registers (an array indexed in a loop lands on
// the stack at -O2).
KILN_TARGET_DOTPROD void qgemm_tile_neon_dot(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
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
