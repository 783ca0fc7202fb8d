// The depthwise 3x3 of one channel with NEON (gemm.h's depthwise3x3), four
// outputs a vector, strides 1 and 2.

#include "isa_switch.h"

#if KILN_NEON

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "arm/neon.h"
#include "arm/neon_helpers.h"

namespace kiln {
namespace kernels {
namespace neon {

namespace {

// One output row, four outputs per step, from three zero-padded input rows
// (a row outside the image is all zeros): one accumulator per kernel row.
template <int kStride>
inline void depthwise_row(const float* r0, const float* r1, const float* r2, const float* w, float bias, float* orow,
                          int64_t ow, bool clamp, float lo, float hi) {
  const float32x4_t k012 = vld1q_f32(w), k345 = vld1q_f32(w + 3);
  const float32x4_t k678 = {w[6], w[7], w[8], 0.f};
  const float32x4_t vbias = vdupq_n_f32(bias), vlo = vdupq_n_f32(lo), vhi = vdupq_n_f32(hi);
  for (int64_t ox = 0; ox < ow; ox += 4) {
    const int64_t q = ox * kStride;
    float32x4_t acc0, acc1, acc2;
    if (kStride == 1) {
      acc0 = vfmaq_laneq_f32(vbias, vld1q_f32(r0 + q), k012, 0);
      acc1 = vmulq_laneq_f32(vld1q_f32(r1 + q), k345, 0);
      acc2 = vmulq_laneq_f32(vld1q_f32(r2 + q), k678, 0);
      acc0 = vfmaq_laneq_f32(acc0, vld1q_f32(r0 + q + 1), k012, 1);
      acc1 = vfmaq_laneq_f32(acc1, vld1q_f32(r1 + q + 1), k345, 1);
      acc2 = vfmaq_laneq_f32(acc2, vld1q_f32(r2 + q + 1), k678, 1);
      acc0 = vfmaq_laneq_f32(acc0, vld1q_f32(r0 + q + 2), k012, 2);
      acc1 = vfmaq_laneq_f32(acc1, vld1q_f32(r1 + q + 2), k345, 2);
      acc2 = vfmaq_laneq_f32(acc2, vld1q_f32(r2 + q + 2), k678, 2);
    } else {
      // Even and odd columns from q, and the even ones from q + 2.
      const float32x4x2_t a0 = vld2q_f32(r0 + q), a1 = vld2q_f32(r1 + q), a2 = vld2q_f32(r2 + q);
      acc0 = vfmaq_laneq_f32(vbias, a0.val[0], k012, 0);
      acc1 = vmulq_laneq_f32(a1.val[0], k345, 0);
      acc2 = vmulq_laneq_f32(a2.val[0], k678, 0);
      acc0 = vfmaq_laneq_f32(acc0, a0.val[1], k012, 1);
      acc1 = vfmaq_laneq_f32(acc1, a1.val[1], k345, 1);
      acc2 = vfmaq_laneq_f32(acc2, a2.val[1], k678, 1);
      acc0 = vfmaq_laneq_f32(acc0, vld2q_f32(r0 + q + 2).val[0], k012, 2);
      acc1 = vfmaq_laneq_f32(acc1, vld2q_f32(r1 + q + 2).val[0], k345, 2);
      acc2 = vfmaq_laneq_f32(acc2, vld2q_f32(r2 + q + 2).val[0], k678, 2);
    }
    float32x4_t acc = vaddq_f32(vaddq_f32(acc0, acc1), acc2);
    if (clamp) acc = clamp4(acc, vlo, vhi);
    if (ox + 4 <= ow) {
      vst1q_f32(orow + ox, acc);
    } else {
      float tmp[4];
      vst1q_f32(tmp, acc);
      for (int64_t j = 0; ox + j < ow; ++j) orow[ox + j] = tmp[j];
    }
  }
}

}  // namespace

// Input rows are copied, zero-padded, into a ring of three row buffers on
// the stack (each input row once; consecutive output rows share rows), so
// every vector loads plainly. Rows wider than the buffers are declined.
bool depthwise3x3(const float* in, int64_t h, int64_t w, const float* weights, float bias, int64_t stride, int64_t pt,
                  int64_t pl, float* out, int64_t oh, int64_t ow, bool clamp, float lo, float hi) {
  constexpr int64_t kRowFloats = 1024;
  // Padded row: column -pl at index 0, room for the last vector's reach
  // (stride 2 reads 8 floats from 2 past the vector's first column).
  const int64_t span = (ow + 4) * stride + 12;
  if ((stride != 1 && stride != 2) || span > kRowFloats || pl < 0 || pl >= span) return false;
  alignas(16) float ring[4][kRowFloats];  // three input rows and a row of zeros
  int64_t ring_row[3] = {-1, -1, -1};     // the input row each buffer holds
  memset(ring[3], 0, static_cast<size_t>(span) * sizeof(float));
  for (int64_t oy = 0; oy < oh; ++oy) {
    const float* rows[3];
    for (int64_t ky = 0; ky < 3; ++ky) {
      const int64_t iy = oy * stride - pt + ky;
      if (iy < 0 || iy >= h) {
        rows[ky] = ring[3];
        continue;
      }
      float* buf = ring[iy % 3];
      if (ring_row[iy % 3] != iy) {
        const int64_t copied = w < span - pl ? w : span - pl;
        memset(buf, 0, static_cast<size_t>(pl) * sizeof(float));
        memcpy(buf + pl, in + iy * w, static_cast<size_t>(copied) * sizeof(float));
        memset(buf + pl + copied, 0, static_cast<size_t>(span - pl - copied) * sizeof(float));
        ring_row[iy % 3] = iy;
      }
      rows[ky] = buf;
    }
    if (stride == 1) {
      depthwise_row<1>(rows[0], rows[1], rows[2], weights, bias, out + oy * ow, ow, clamp, lo, hi);
    } else {
      depthwise_row<2>(rows[0], rows[1], rows[2], weights, bias, out + oy * ow, ow, clamp, lo, hi);
    }
  }
  return true;
}

}  // namespace neon
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_NEON
