// The stride-2 convolution of first layers straight from the image with
// NEON (gemm.h's DirectConvS2): parity-split rows, the micro-kernel's 6x16
// tile against the packed weights, no im2col panel.

#include "isa_switch.h"

#if KILN_NEON

#include <arm_neon.h>
#include <stdint.h>

#include "arm/neon.h"
#include "arm/neon_helpers.h"
#include "kiln/kernels/gemm_blocking.h"

namespace kiln {
namespace kernels {
namespace neon {

// Per output row, every input row it reads (channel c, kernel row ky) is
// copied once into a zero-padded buffer split into even and odd columns, so
// tap (c, ky, kx) of 16 consecutive outputs is four plain loads; the taps
// then go through the micro-kernel's 6x16 tile against the packed weights,
// with no im2col panel.
bool conv_s2(const float* x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t pt, int64_t pl,
             const float* packed_weights, int64_t m, const float* bias, float* y, int64_t oh, int64_t ow, int64_t oy0,
             int64_t oy1, bool clamp, float lo, float hi) {
  const int64_t k = c * kh * kw;
  const int64_t strips = (ow + 15) / 16 * 16;      // outputs computed per row, whole strips
  const int64_t half = strips + (kw + 1) / 2 + 4;  // floats of one even or odd column buffer
  constexpr int64_t kBufferFloats = 12288;         // 48 KiB of stack
  constexpr int64_t kMaxTaps = 256;
  if (k > kMaxTaps || c * kh * 2 * half > kBufferFloats || pl < 0 || pt < 0) return false;
  alignas(16) float buffer[kBufferFloats];
  const float* tap[kMaxTaps];
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    // Padded column q of input row (ci, ky) is column q - pl of the image.
    for (int64_t ci = 0; ci < c; ++ci) {
      for (int64_t ky = 0; ky < kh; ++ky) {
        float* even = buffer + (ci * kh + ky) * 2 * half;
        float* odd = even + half;
        const int64_t iy = oy * 2 - pt + ky;
        const float* row = x + (ci * h + iy) * w;
        const bool inside = iy >= 0 && iy < h;
        for (int64_t q = 0; q < half; ++q) {
          const int64_t e = 2 * q - pl, o = e + 1;
          even[q] = inside && e >= 0 && e < w ? row[e] : 0.f;
          odd[q] = inside && o >= 0 && o < w ? row[o] : 0.f;
        }
        for (int64_t kx = 0; kx < kw; ++kx) tap[(ci * kh + ky) * kw + kx] = (kx % 2 == 0 ? even : odd) + kx / 2;
      }
    }
    for (int64_t i0 = 0; i0 < m; i0 += kGemmMr) {
      const int64_t mr = m - i0 < kGemmMr ? m - i0 : kGemmMr;
      for (int64_t ox = 0; ox < ow; ox += 16) {
        const int64_t nr = ow - ox < 16 ? ow - ox : 16;
        float32x4_t acc[6][4];
        for (int i = 0; i < 6; ++i) {
          for (int j = 0; j < 4; ++j) acc[i][j] = vdupq_n_f32(0.f);
        }
        const float* a = packed_weights + i0 * k;
        for (int64_t p = 0; p < k; ++p, a += kGemmMr) {
          const float* t = tap[p] + ox;
          const float32x4_t b[4] = {vld1q_f32(t), vld1q_f32(t + 4), vld1q_f32(t + 8), vld1q_f32(t + 12)};
          const float32x4_t a0 = vld1q_f32(a);
          const float32x2_t a1 = vld1_f32(a + 4);
          for (int j = 0; j < 4; ++j) {
            acc[0][j] = vfmaq_laneq_f32(acc[0][j], b[j], a0, 0);
            acc[1][j] = vfmaq_laneq_f32(acc[1][j], b[j], a0, 1);
            acc[2][j] = vfmaq_laneq_f32(acc[2][j], b[j], a0, 2);
            acc[3][j] = vfmaq_laneq_f32(acc[3][j], b[j], a0, 3);
            acc[4][j] = vfmaq_lane_f32(acc[4][j], b[j], a1, 0);
            acc[5][j] = vfmaq_lane_f32(acc[5][j], b[j], a1, 1);
          }
        }
        for (int64_t i = 0; i < mr; ++i) {
          store_row<4>(y + ((i0 + i) * oh + oy) * ow + ox, acc[i], nr, false, bias != nullptr ? bias[i0 + i] : 0.f,
                       nullptr, clamp, lo, hi);
        }
      }
    }
  }
  return true;
}

}  // namespace neon
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_NEON
