// The int8 product's inner loops for Cortex-M with the DSP extension
// (qgemm.h): SMLAD on SXTB16/UXTB16-widened halfwords, the exact int32
// sums of the portable loop on the same packed bytes (kiln/kernels/qgemm.h):
// panel row q holds k = 4q..4q+3 of 16 columns, 4 bytes per column; a
// weight row holds 4 bytes per q. Chosen whenever the image is built for
// such a core (KILN_CORTEXM_DSP, isa_switch.h).

#include "isa_switch.h"

#if KILN_CORTEXM_DSP

#include <arm_acle.h>
#include <string.h>

#include "qgemm.h"

namespace kiln {
namespace kernels {

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

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_CORTEXM_DSP
