// The int8 matrix product behind every quantized linear kernel (ConvInt8,
// GemmInt8; kernels/cpu/src/qlinear.cc), and what the planner must
// prepare for it: packed weights, the folded int32 bias and the fixed-point
// requantization. Shared by the kernels and the planner, so the layout has
// one definition. Header-only for the planner's side, no state.
//
// The product. One output channel c (a row of weights) and one output
// position p (a column: an im2col column of a convolution, a row of A of a
// matrix product) give
//
//   acc[c][p] = sum_{k<K} x[p][k] * w[c][k]            (int32, exact)
//             + bias[c]                                 (folded, below)
//             - w_zp[c] * sum_{k<K} x[p][k]             (only when w_zp != 0)
//   y[c][p]   = clamp(requantize(acc, multiplier[c], shift[c]) + y_zp,
//                     y_min, y_max)                     (uint8/int8 output)
//   y[c][p]   = acc                                     (int32 output)
//
// Operand domains. Activations x are uint8 inside the product: int8
// activations are flipped (x ^ 0x80 == x + 128) when packed and their zero
// point moved by 128. Weights are int8: uint8 weights are stored as w - 128
// with their zero point moved by 128 (w - zp is unchanged). This is the
// unsigned x signed product that x86's vpdpbusd computes, and that SMLAD
// (after SXTB16/UXTB16) and NEON's sdot/udot can compute as well.
//
// Zero points folded into the bias, planned once (qgemm_fold_bias):
//   sum_k (x - x_zp)(w - w_zp) = sum_k x w - x_zp sum_k w - w_zp sum_k x
//                                + K x_zp w_zp
//   bias[c] = model_bias[c] - x_zp * sum_k w[c][k] + K * x_zp * w_zp[c]
// The remaining w_zp[c] * sum_k x[p][k] depends on the data; the kernel
// computes the column sums only when some w_zp is not zero (per-channel int8
// weights, what PyTorch and ONNX Runtime produce, have zero points of 0).
//
// Requantization (TFLM/CMSIS-NN style fixed point, one rounding): the real
// multiplier x_scale * w_scale[c] / y_scale is m * 2^-s with m in
// [2^30, 2^31) (int32) and s in [1, 62]:
//   requantize(acc, m, s) = (acc * m + 2^(s-1)) >> s     (64-bit product,
//                                                         arithmetic shift)
// i.e. round half up of the exact product acc * m / 2^s. ONNX Runtime
// computes float(acc) * float(multiplier) and rounds half to even. The two
// agree except where the exact value lies within the float32 rounding of
// the multiplier (relative 2^-24; m itself is exact to 2^-31) of a half, or
// exactly on a half with an even neighbour below: at most 1 LSB apart, and
// only on such near-ties.
//
// Packed layouts (ISA independent; every inner loop reads the same bytes):
//
//   weights   int8 [groups][channels per group][kp]  kp = K rounded up to
//             4, zero-padded; one output channel's K values contiguous.
//
//   activations (packed at run time into scratch), uint8, in panels of
//             kQGemmNr columns:
//     panel j: [kp / 4][kQGemmNr][4]   = column p = j*16 + i, k = 4*q + r at
//              panel_base + q * 64 + i * 4 + r; missing columns are 0.
//     So one 64-byte row of a panel holds four consecutive k of 16 columns:
//     one zmm for vpdpbusd, two ymm for AVX2, four 128-bit vectors for
//     NEON's sdot/udot; a Cortex-M inner loop reads 4 bytes (one column's
//     k..k+3) and one word of weights per SMLAD pair.
//
// A new inner loop (NEON, Cortex-M) implements one function with the
// signature of QGemmTileFn (kernels/cpu/src/qgemm.h): the int32 tile of
// up to kQGemmMr channels x kQGemmNr columns over the whole of kp; the
// epilogue (zero-point correction, requantization, clamping, store) is
// shared.

#ifndef KILN_KERNELS_QGEMM_H_
#define KILN_KERNELS_QGEMM_H_

#include <math.h>
#include <stdint.h>

namespace kiln {
namespace kernels {

constexpr int64_t kQGemmMr = 8;   // channels per register tile
constexpr int64_t kQGemmNr = 16;  // columns per panel and register tile
constexpr int64_t kQGemmKAlign = 4;
// The longest reduction: keeps sum_k x w (|x w| <= 255 * 128) and the folded
// bias inside int32.
constexpr int64_t kQGemmMaxK = 65536;

// Narrow weights: every weight in [-64, 64], as ONNX Runtime's
// quantize_static writes them with reduce_range ("7-bit" weights). Then any
// two uint8 x int8 products sum to at most 255 * 64 * 2 = 32640 in
// magnitude, inside int16, so AVX2's vpmaddubsw is exact for every
// activation (with full-range weights it is exact only for activations up
// to 127; kernels/cpu/src/x86/qgemm_avx2.cc). The planner states it per
// kernel (ConvInt8's and GemmInt8's last integer), and the kernel checks the
// weights against it when the program loads.
constexpr int32_t kQGemmNarrowWeight = 64;
inline bool qgemm_weights_narrow(const int8_t* w, int64_t n) {
  // Branch-free per byte: (w + 64) as unsigned is at most 128 exactly inside.
  uint32_t outside = 0;
  for (int64_t i = 0; i < n; ++i) {
    outside |= static_cast<uint32_t>(static_cast<uint8_t>(w[i] + kQGemmNarrowWeight) > 2 * kQGemmNarrowWeight);
  }
  return outside == 0;
}

constexpr int64_t qgemm_round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }
constexpr int64_t qgemm_kp(int64_t k) { return qgemm_round_up(k, kQGemmKAlign); }
// Bytes of packed activations for `n` columns of length `k`.
constexpr int64_t qgemm_packed_x_bytes(int64_t k, int64_t n) { return qgemm_kp(k) * qgemm_round_up(n, kQGemmNr); }

// MatMulInt8 (two activations, kernels/cpu/src/qlinear.cc): its longest
// reduction, which keeps its per-column terms (at most 255 * 128 * k)
// inside int32, and its scratch: A's panels for m columns, then B's n int8
// rows, then five int32 terms per column of B or row of A, each part
// 64-byte aligned.
constexpr int64_t kQGemmMatMulMaxK = 4096;
constexpr int64_t qgemm_matmul_rows_offset(int64_t m, int64_t k) {
  return qgemm_round_up(qgemm_packed_x_bytes(k, m), 64);
}
constexpr int64_t qgemm_matmul_ints_offset(int64_t m, int64_t n, int64_t k) {
  return qgemm_matmul_rows_offset(m, k) + qgemm_round_up(n * qgemm_kp(k), 64);
}
constexpr int64_t qgemm_matmul_scratch_bytes(int64_t m, int64_t n, int64_t k) {
  return qgemm_matmul_ints_offset(m, n, k) + (4 * n + m) * 4;
}

// The direct convolution of x86 (kernels/cpu/src/qgemm.h,
// qgemm_conv_direct): the input of one image, four channels interleaved per
// stride phase, then at least one tile's channels of weights in its step
// order, and with a column stride one padded row. The least scratch it
// runs in (more lets it reorder more channels' weights at once), or -1
// where it cannot run (more steps than its offset table holds).
constexpr int64_t kQGemmDirectMaxSteps = 1152;
constexpr int64_t qgemm_conv_direct_bytes(int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh,
                                          int64_t sw, int64_t pt, int64_t pl, int64_t pb, int64_t pr) {
  return (c + 3) / 4 * kh * kw > kQGemmDirectMaxSteps
             ? -1
             : (c + 3) / 4 * sh * sw * ((pt + h + pb + sh - 1) / sh) * ((pl + w + pr + sw - 1) / sw) * 4 + 64 +
                   kQGemmMr * ((c + 3) / 4 * kh * kw) * 4 + (sw > 1 ? (pl + w + pr + sw - 1) / sw * sw * 4 : 0);
}
// Whether it is taken: at most 1.5 times im2col's multiply-adds (its
// channels are padded to a multiple of 4, and it computes the columns past
// each output row of the phase planes: a 1-channel 10x4 window over a
// 5-wide plane would do 5.5 times as many).
constexpr bool qgemm_conv_direct_pays(int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                                      int64_t dh, int64_t dw, int64_t pt, int64_t pl, int64_t pb, int64_t pr) {
  return 2 *
             qgemm_round_up(((pt + h + pb - dh * (kh - 1) - 1) / sh) * ((pl + w + pr + sw - 1) / sw) +
                                (pl + w + pr - dw * (kw - 1) - 1) / sw + 1,
                            kQGemmNr) *
             ((c + 3) / 4 * 4 * kh * kw) <=
         3 *
             qgemm_round_up(((pt + h + pb - dh * (kh - 1) - 1) / sh + 1) * ((pl + w + pr - dw * (kw - 1) - 1) / sw + 1),
                            kQGemmNr) *
             qgemm_kp(c * kh * kw);
}

// Splits a real multiplier (> 0) into m * 2^-s as above. Returns false when
// it is 2^30 or more (not representable); one below 2^-32 gives m = 0 (every
// output is the zero point, as the exact product rounds to 0 for any int32
// accumulator).
inline bool qgemm_quantize_multiplier(double real, int32_t* out_multiplier, int32_t* out_shift) {
  if (!(real > 0)) {
    *out_multiplier = 0;
    *out_shift = 1;
    return real == 0;
  }
  int exponent = 0;
  const double fraction = frexp(real, &exponent);  // real = fraction * 2^exponent, fraction in [0.5, 1)
  int64_t m = static_cast<int64_t>(llround(fraction * 2147483648.0));
  if (m == (int64_t{1} << 31)) {
    m /= 2;
    ++exponent;
  }
  const int shift = 31 - exponent;
  if (shift < 1) return false;
  if (shift > 62) {
    *out_multiplier = 0;
    *out_shift = 1;
    return true;
  }
  *out_multiplier = static_cast<int32_t>(m);
  *out_shift = shift;
  return true;
}

// (acc * m + 2^(s-1)) >> s, in 64 bits (s in [1, 62]; acc inside int32:
// the kernels saturate it there first).
inline int64_t qgemm_requantize(int64_t acc, int32_t multiplier, int32_t shift) {
  return (acc * multiplier + (int64_t{1} << (shift - 1))) >> shift;
}

// The average pools' rounding (AvgPoolInt8): round half to even of acc *
// m / 2^s, as QuantizeLinear rounds the float average of the QDQ model. A
// 2x2 average of one scale lands on a half in one window of four, so half
// up would bias it (DenseNet-121's transitions: the mean distance from the
// QDQ model's outputs half again as large). A tie is a remainder of
// exactly 2^(s-1); the parity of the floor decides it.
inline int64_t qgemm_requantize_even(int64_t acc, int32_t multiplier, int32_t shift) {
  const int64_t x = acc * multiplier;
  return (x + (int64_t{1} << (shift - 1)) - 1 + ((x >> shift) & 1)) >> shift;
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_QGEMM_H_
