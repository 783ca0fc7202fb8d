// The stride-2 convolution of first layers straight from the image
// (gemm.h's DirectConvS2) with AVX-512: the parity-split rows of
// conv_s2_taps (conv_s2_avx2.cc) through the micro-kernel's 6x32 tile.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>

#include "kiln/kernels/gemm_blocking.h"
#include "x86/avx512_helpers.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {

namespace {

// The last `cols` (at most 16) outputs of a row from column ox: two
// six-row panels of weights at a time by one 16-column strip, twelve
// accumulators (the 6x16 tile alone keeps six FMAs in flight, too few).
// Each output is the same chain of FMAs as in the 6x32 tile.
KILN_AVX512 void tail_12x16(const float* const* tap, int64_t k, const float* packed_weights, int64_t m,
                            const float* bias, float* yrow, int64_t plane, int64_t ox, int64_t cols, bool clamp,
                            __m512 vlo, __m512 vhi) {
  const __m512 zero = _mm512_setzero_ps();
  const __mmask16 mask = first_lanes(cols);
  for (int64_t i0 = 0; i0 < m; i0 += 2 * kGemmMr) {
    const int64_t mr = m - i0 < 2 * kGemmMr ? m - i0 : 2 * kGemmMr;
    const float* a0 = packed_weights + i0 * k;
    const float* a1 = mr > kGemmMr ? a0 + kGemmMr * k : a0;  // no second panel: its rows are not stored
    __m512 acc[2 * kGemmMr];
#pragma GCC unroll 12
    for (int i = 0; i < 2 * kGemmMr; ++i) acc[i] = zero;
    for (int64_t p = 0; p < k; ++p, a0 += kGemmMr, a1 += kGemmMr) {
      const __m512 b = _mm512_loadu_ps(tap[p] + ox);
#pragma GCC unroll 6
      for (int i = 0; i < kGemmMr; ++i) {
        acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(a0[i]), b, acc[i]);
        acc[kGemmMr + i] = _mm512_fmadd_ps(_mm512_set1_ps(a1[i]), b, acc[kGemmMr + i]);
      }
    }
    __m512 out[2 * kGemmMr];
#pragma GCC unroll 12
    for (int i = 0; i < 2 * kGemmMr; ++i) out[i] = acc[i];
    for (int64_t i = 0; i < mr; ++i) {
      const float b = bias != nullptr ? bias[i0 + i] : 0.f;
      store_row16(yrow + (i0 + i) * plane + ox, out[i], mask, false, b, zero, clamp, vlo, vhi);
    }
  }
}

}  // namespace

// A stride-2 convolution read straight from the image. Per output row,
// every input row it reads (channel c, kernel row ky) is copied once into a
// zero-padded buffer split into even and odd columns, so tap (c, ky, kx) of
// 16 consecutive outputs is one plain load; the taps then go through the
// micro-kernel's 6x32 tile against the packed weights (six output channels
// by two 16-column strips), no im2col panel.
KILN_AVX512 bool conv_s2_avx512(const float* x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t pt,
                                int64_t pl, const float* packed_weights, int64_t m, const float* bias, float* y,
                                int64_t oh, int64_t ow, int64_t oy0, int64_t oy1, bool clamp, float lo, float hi) {
  const int64_t k = c * kh * kw;
  const int64_t strips = (ow + 15) / 16 * 16;       // outputs computed per row, whole strips
  const int64_t half = strips + (kw + 1) / 2 + 16;  // floats of one even or odd column buffer
  constexpr int64_t kBufferFloats = 12288;          // 48 KiB of stack
  constexpr int64_t kMaxTaps = 256;
  if (k > kMaxTaps || c * kh * 2 * half > kBufferFloats || pl < 0 || pt < 0) return false;
  // Strips of 32 outputs up to the last 16 or fewer, which take 12x16
  // tiles instead (ResNet's 112-wide rows: a 32-column tile over the last
  // 16 did one multiply-add in eight for nothing).
  const int64_t wide = ow % 32 != 0 && ow % 32 <= 16 ? ow / 32 * 32 : ow;
  alignas(64) float buffer[kBufferFloats];
  const float* tap[kMaxTaps];
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi), zero = _mm512_setzero_ps();
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    conv_s2_taps(x, c, h, w, kh, kw, pt, pl, oy, half, buffer, tap);
    float* yrow = y + oy * ow;
    for (int64_t i0 = 0; i0 < m; i0 += kGemmMr) {
      const int64_t mr = m - i0 < kGemmMr ? m - i0 : kGemmMr;
      const float* a_panel = packed_weights + i0 * k;
      for (int64_t ox = 0; ox < wide; ox += 32) {
        __m512 acc[kGemmMr][2];
        for (auto& row : acc) row[0] = row[1] = zero;
        const float* a = a_panel;
        for (int64_t p = 0; p < k; ++p, a += kGemmMr) {
          fma_step_6x32(a, _mm512_loadu_ps(tap[p] + ox), _mm512_loadu_ps(tap[p] + ox + 16), acc);
        }
        const __mmask16 m0 = first_lanes(ow - ox), m1 = first_lanes(ow - ox - 16);
        const Tile6x32 done = tile_out_6x32(acc);
        for (int64_t i = 0; i < mr; ++i) {
          float* out = yrow + (i0 + i) * oh * ow + ox;
          const float b = bias != nullptr ? bias[i0 + i] : 0.f;
          store_row16(out, done.v[i][0], m0, false, b, zero, clamp, vlo, vhi);
          if (m1 != 0) store_row16(out + 16, done.v[i][1], m1, false, b, zero, clamp, vlo, vhi);
        }
      }
    }
    if (wide < ow) tail_12x16(tap, k, packed_weights, m, bias, yrow, oh * ow, wide, ow - wide, clamp, vlo, vhi);
  }
  return true;
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
