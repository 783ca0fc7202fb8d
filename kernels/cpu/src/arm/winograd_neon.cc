// The NEON transforms of the Winograd F(2x2, 3x3) convolution
// (winograd.cc): the input tiles' B^T d B and the products' A^T m A, four
// tiles a vector.

#include "isa_switch.h"

#if KILN_NEON

#include <arm_neon.h>
#include <stdint.h>

#include "arm/neon.h"
#include "arm/neon_helpers.h"

namespace kiln {
namespace kernels {
namespace neon {

// Four consecutive tiles (t_first .. t_first + count - 1, tw tiles per row)
// of one channel: the 4x4 patches (outside the image reads 0), B^T d B on
// vectors (lane q: tile q), V_xi stored to out + xi * stride_xi.
void winograd_input(const float* image, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t tw, int64_t t_first,
                    int64_t count, float* out, int64_t stride_xi) {
  float32x4_t d[4][4];
  const int64_t tx = t_first % tw, r0 = 2 * (t_first / tw) - pt, c0 = 2 * tx - pl;
  if (count == 4 && tx + 4 <= tw) {
    // Four tiles side by side in one tile row: each input row's 10 columns
    // under them, split into even and odd lanes (tap columns 0 and 1 from
    // the first 8 floats, 2 and 3 from the 8 two further on).
    for (int i = 0; i < 4; ++i) {
      if (r0 + i < 0 || r0 + i >= h) {
        for (int j = 0; j < 4; ++j) d[i][j] = vdupq_n_f32(0.f);
        continue;
      }
      const float* row = image + (r0 + i) * w;
      float window[10];
      const float* src = window;
      if (c0 >= 0 && c0 + 10 <= w) {
        src = row + c0;
      } else {
        for (int64_t q = 0; q < 10; ++q) window[q] = c0 + q >= 0 && c0 + q < w ? row[c0 + q] : 0.f;
      }
      const float32x4x2_t lo = vld2q_f32(src), hi = vld2q_f32(src + 2);
      d[i][0] = lo.val[0];
      d[i][1] = lo.val[1];
      d[i][2] = hi.val[0];
      d[i][3] = hi.val[1];
    }
  } else {
    float patch[4][4][4] = {};  // [i][j][tile]
    for (int64_t q = 0; q < count; ++q) {
      const int64_t t = t_first + q;
      const int64_t y0 = 2 * (t / tw) - pt, x0 = 2 * (t % tw) - pl;
      for (int64_t i = 0; i < 4; ++i) {
        for (int64_t j = 0; j < 4; ++j) {
          const int64_t iy = y0 + i, ix = x0 + j;
          patch[i][j][q] = iy >= 0 && iy < h && ix >= 0 && ix < w ? image[iy * w + ix] : 0.f;
        }
      }
    }
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) d[i][j] = vld1q_f32(patch[i][j]);
    }
  }
  float32x4_t r[4][4];
  for (int j = 0; j < 4; ++j) {
    r[0][j] = vsubq_f32(d[0][j], d[2][j]);
    r[1][j] = vaddq_f32(d[1][j], d[2][j]);
    r[2][j] = vsubq_f32(d[2][j], d[1][j]);
    r[3][j] = vsubq_f32(d[1][j], d[3][j]);
  }
  for (int i = 0; i < 4; ++i) {
    vst1q_f32(out + (i * 4 + 0) * stride_xi, vsubq_f32(r[i][0], r[i][2]));
    vst1q_f32(out + (i * 4 + 1) * stride_xi, vaddq_f32(r[i][1], r[i][2]));
    vst1q_f32(out + (i * 4 + 2) * stride_xi, vsubq_f32(r[i][2], r[i][1]));
    vst1q_f32(out + (i * 4 + 3) * stride_xi, vsubq_f32(r[i][1], r[i][3]));
  }
}

// Up to four consecutive tiles of one output channel: products M_xi at
// prod + xi * stride_xi (lane q: tile q), A^T m A plus the bias, clamped
// when `clamp`, written inside the plane.
void winograd_output(const float* prod, int64_t stride_xi, int64_t t_first, int64_t count, int64_t tw, float bias,
                     float* plane, int64_t oh, int64_t ow, bool clamp, float lo, float hi) {
  float32x4_t m[4][4];
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      const float* src = prod + (i * 4 + j) * stride_xi;
      if (count == 4) {
        m[i][j] = vld1q_f32(src);
      } else {
        float lanes[4] = {};
        for (int64_t q = 0; q < count; ++q) lanes[q] = src[q];
        m[i][j] = vld1q_f32(lanes);
      }
    }
  }
  float32x4_t s[2][4];
  for (int j = 0; j < 4; ++j) {
    s[0][j] = vaddq_f32(vaddq_f32(m[0][j], m[1][j]), m[2][j]);
    s[1][j] = vsubq_f32(vsubq_f32(m[1][j], m[2][j]), m[3][j]);
  }
  const float32x4_t vb = vdupq_n_f32(bias), vlo = vdupq_n_f32(lo), vhi = vdupq_n_f32(hi);
  float32x4x2_t y[2];
  for (int i = 0; i < 2; ++i) {
    y[i].val[0] = vaddq_f32(vaddq_f32(vaddq_f32(s[i][0], s[i][1]), s[i][2]), vb);
    y[i].val[1] = vaddq_f32(vsubq_f32(vsubq_f32(s[i][1], s[i][2]), s[i][3]), vb);
    if (clamp) {
      y[i].val[0] = clamp4(y[i].val[0], vlo, vhi);
      y[i].val[1] = clamp4(y[i].val[1], vlo, vhi);
    }
  }
  const int64_t ty = t_first / tw, tx = t_first % tw;
  if (count == 4 && tx + 4 <= tw && 2 * ty + 1 < oh && 2 * (tx + 4) <= ow) {
    // Four whole tiles side by side: each output row is 8 pixels, the two
    // columns of every tile interleaved.
    for (int i = 0; i < 2; ++i) vst2q_f32(plane + (2 * ty + i) * ow + 2 * tx, y[i]);
    return;
  }
  float v[2][2][4];
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) vst1q_f32(v[i][j], y[i].val[j]);
  }
  for (int64_t q = 0; q < count; ++q) {
    const int64_t t = t_first + q;
    const int64_t oy = 2 * (t / tw), ox = 2 * (t % tw);
    for (int64_t i = 0; i < 2 && oy + i < oh; ++i) {
      for (int64_t j = 0; j < 2 && ox + j < ow; ++j) plane[(oy + i) * ow + ox + j] = v[i][j][q];
    }
  }
}

}  // namespace neon
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_NEON
