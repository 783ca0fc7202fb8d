// AArch64 Advanced SIMD (NEON) versions of the portable kernels' hot loops
// (declared in neon.h): the packed GEMM's 6x16 micro-kernel and the
// one-row product, the depthwise 3x3 convolution, the stride-2 direct
// convolution of first layers, the Winograd F(2x2, 3x3) transforms, max
// pooling, the ReLU/Clip clamp, and the Softmax and LayerNormalization rows
// with a vector e^x. Four floats per register, 32 registers: the 6x16 tile
// takes 24, a row of B 4, a column of A 2.
//
// Each function keeps the numerics of the portable loop it replaces where
// the order of operations allows (NaN propagation in clamps and maxima,
// LayerNormalization's statistics in double); sums are reassociated, as on
// x86, so results agree within rounding, not bit for bit.

#include "neon.h"

#if KILN_NEON

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kiln/kernels/gemm_blocking.h"

namespace kiln {
namespace kernels {
namespace neon {

namespace {

// max(lo, v) then min(hi, v); FMAX/FMIN return NaN when either operand is
// NaN, so NaN in v passes through (the portable clamp's rule).
inline float32x4_t clamp4(float32x4_t v, float32x4_t lo, float32x4_t hi) { return vminq_f32(hi, vmaxq_f32(lo, v)); }

inline float clamp1(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Finishes kVectors * 4 columns of one row of the tile: adds C
// (accumulate) or the row's and columns' bias, clamps, stores the first nr.
template <int kVectors>
inline void store_row(float* row, const float32x4_t* v, int64_t nr, bool accumulate, float bias, const float* col_bias,
                      bool clamp, float lo, float hi) {
  if (nr == 4 * kVectors) {
    const float32x4_t vb = vdupq_n_f32(bias), vlo = vdupq_n_f32(lo), vhi = vdupq_n_f32(hi);
    for (int j = 0; j < kVectors; ++j) {
      float32x4_t x = v[j];
      if (accumulate) {
        x = vaddq_f32(x, vld1q_f32(row + 4 * j));
      } else {
        x = vaddq_f32(x, col_bias != nullptr ? vaddq_f32(vb, vld1q_f32(col_bias + 4 * j)) : vb);
      }
      if (clamp) x = clamp4(x, vlo, vhi);
      vst1q_f32(row + 4 * j, x);
    }
    return;
  }
  float tmp[4 * kVectors];
  for (int j = 0; j < kVectors; ++j) vst1q_f32(tmp + 4 * j, v[j]);
  for (int64_t j = 0; j < nr; ++j) {
    float x = tmp[j] + (accumulate ? row[j] : bias + (col_bias != nullptr ? col_bias[j] : 0.f));
    if (clamp) x = clamp1(x, lo, hi);
    row[j] = x;
  }
}

// The tile's first kVectors * 4 columns: per step of k, kVectors loads of
// B, one load of A's six values (as four and two lanes) and 6 * kVectors
// FMAs by lane.
template <int kVectors>
inline void tile(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mr, int64_t nr,
                 bool accumulate, const float* row_bias, const float* col_bias, bool clamp, float lo, float hi) {
  float32x4_t acc[6][kVectors];
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < kVectors; ++j) acc[i][j] = vdupq_n_f32(0.f);
  }
  for (int64_t p = 0; p < kc; ++p) {
    float32x4_t bv[kVectors];
    for (int j = 0; j < kVectors; ++j) bv[j] = vld1q_f32(b + 4 * j);
    const float32x4_t a0 = vld1q_f32(a);
    const float32x2_t a1 = vld1_f32(a + 4);
    for (int j = 0; j < kVectors; ++j) {
      acc[0][j] = vfmaq_laneq_f32(acc[0][j], bv[j], a0, 0);
      acc[1][j] = vfmaq_laneq_f32(acc[1][j], bv[j], a0, 1);
      acc[2][j] = vfmaq_laneq_f32(acc[2][j], bv[j], a0, 2);
      acc[3][j] = vfmaq_laneq_f32(acc[3][j], bv[j], a0, 3);
      acc[4][j] = vfmaq_lane_f32(acc[4][j], bv[j], a1, 0);
      acc[5][j] = vfmaq_lane_f32(acc[5][j], bv[j], a1, 1);
    }
    a += kGemmMr;
    b += ldb;
  }
  for (int64_t i = 0; i < mr; ++i) {
    store_row<kVectors>(c + i * ldc, acc[i], nr, accumulate, row_bias != nullptr ? row_bias[i] : 0.f, col_bias, clamp,
                        lo, hi);
  }
}

}  // namespace

// A tile at most 4 or 8 columns wide (the last panel of a 7x7 image's 49
// columns holds one) multiplies only the columns it has.
void micro_kernel(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mr,
                  int64_t nr, bool accumulate, const float* row_bias, const float* col_bias, bool clamp, float lo,
                  float hi) {
  static_assert(kGemmMr == 6 && kGemmNr == 16, "the NEON micro-kernel computes 6x16 tiles");
  if (nr <= 4) {
    tile<1>(kc, a, b, ldb, c, ldc, mr, nr, accumulate, row_bias, col_bias, clamp, lo, hi);
  } else if (nr <= 8) {
    tile<2>(kc, a, b, ldb, c, ldc, mr, nr, accumulate, row_bias, col_bias, clamp, lo, hi);
  } else {
    tile<4>(kc, a, b, ldb, c, ldc, mr, nr, accumulate, row_bias, col_bias, clamp, lo, hi);
  }
}

void gemv(int64_t n, int64_t k, const float* a, const float* b, int64_t ldb, bool trans_b, float* out) {
  if (trans_b) {
    for (int64_t j = 0; j < n; ++j) {
      const float* bj = b + j * ldb;
      float32x4_t s0 = vdupq_n_f32(0.f), s1 = s0, s2 = s0, s3 = s0;
      int64_t p = 0;
      for (; p + 16 <= k; p += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + p), vld1q_f32(bj + p));
        s1 = vfmaq_f32(s1, vld1q_f32(a + p + 4), vld1q_f32(bj + p + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + p + 8), vld1q_f32(bj + p + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + p + 12), vld1q_f32(bj + p + 12));
      }
      for (; p + 4 <= k; p += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + p), vld1q_f32(bj + p));
      float sum = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
      for (; p < k; ++p) sum += a[p] * bj[p];
      out[j] = sum;
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) out[j] = 0.f;
  for (int64_t p = 0; p < k; ++p) {
    const float32x4_t av = vdupq_n_f32(a[p]);
    const float* bp = b + p * ldb;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) vst1q_f32(out + j, vfmaq_f32(vld1q_f32(out + j), av, vld1q_f32(bp + j)));
    for (; j < n; ++j) out[j] += a[p] * bp[j];
  }
}

void copy_stride2(const float* src, int64_t count, int64_t avail, float* dst) {
  int64_t q = 0;
  for (; q + 4 <= count && 2 * q + 8 <= avail; q += 4) vst1q_f32(dst + q, vld2q_f32(src + 2 * q).val[0]);
  for (; q < count; ++q) dst[q] = src[2 * q];
}

void clamp(float* data, int64_t n, float lo, float hi, bool relu) {
  const float32x4_t vlo = vdupq_n_f32(lo), vhi = vdupq_n_f32(hi);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(data + i);
    // ReLU keeps x where x > lo, else lo (NaN compares false: lo).
    vst1q_f32(data + i, relu ? vbslq_f32(vcgtq_f32(v, vlo), v, vlo) : clamp4(v, vlo, vhi));
  }
  for (; i < n; ++i) {
    const float x = data[i];
    data[i] = relu ? (x > lo ? x : lo) : clamp1(x, lo, hi);
  }
}

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

// Rows copied into -inf-padded buffers (a ring, each row once; padding never
// wins a maximum), then four outputs per step take the maximum of plain
// (stride 1) or even-column (stride 2) loads. FMAX returns NaN when either
// operand is NaN, so a NaN in a window makes its output NaN, as in the
// portable kernel.
bool max_pool(const float* in, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride, int64_t pt, int64_t pl,
              float* out, int64_t oh, int64_t ow) {
  constexpr int64_t kRows = 4;
  constexpr int64_t kRowFloats = 1024;
  const int64_t span = (ow + 4) * stride + kw + 8;
  if (span > kRowFloats || kh > kRows || (stride != 1 && stride != 2) || pl < 0 || pl >= span) return false;
  alignas(16) float ring[kRows + 1][kRowFloats];  // window rows, and a row of -inf
  int64_t ring_row[kRows] = {-1, -1, -1, -1};
  const float minus_inf = -__builtin_inff();
  for (int64_t q = 0; q < span; ++q) ring[kRows][q] = minus_inf;
  for (int64_t oy = 0; oy < oh; ++oy) {
    const float* rows[kRows];
    for (int64_t ky = 0; ky < kh; ++ky) {
      const int64_t iy = oy * stride - pt + ky;
      if (iy < 0 || iy >= h) {
        rows[ky] = ring[kRows];
        continue;
      }
      float* buf = ring[iy % kh];
      if (ring_row[iy % kh] != iy) {
        const int64_t copied = w < span - pl ? w : span - pl;
        for (int64_t q = 0; q < pl; ++q) buf[q] = minus_inf;
        memcpy(buf + pl, in + iy * w, static_cast<size_t>(copied) * sizeof(float));
        for (int64_t q = pl + copied; q < span; ++q) buf[q] = minus_inf;
        ring_row[iy % kh] = iy;
      }
      rows[ky] = buf;
    }
    float* orow = out + oy * ow;
    for (int64_t ox = 0; ox < ow; ox += 4) {
      const int64_t q = ox * stride;
      float32x4_t acc = vdupq_n_f32(minus_inf);
      for (int64_t ky = 0; ky < kh; ++ky) {
        for (int64_t kx = 0; kx < kw; ++kx) {
          const float32x4_t v = stride == 1 ? vld1q_f32(rows[ky] + q + kx) : vld2q_f32(rows[ky] + q + kx).val[0];
          acc = vmaxq_f32(acc, v);
        }
      }
      if (ox + 4 <= ow) {
        vst1q_f32(orow + ox, acc);
      } else {
        float tmp[4];
        vst1q_f32(tmp, acc);
        for (int64_t j = 0; ox + j < ow; ++j) orow[ox + j] = tmp[j];
      }
    }
  }
  return true;
}

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

namespace {

// e^x for four lanes, within 2 ulp of expf where the result is a normal
// float: x = n ln 2 + r, |r| <= ln 2 / 2 (ln 2 in two parts, so r is exact),
// e^r by Cephes' degree-6 polynomial, times 2^n in the exponent field.
// Below -87.34 the result is 0; +inf and NaN come back as themselves;
// large finite x saturates at e^88.38 (norm_x86.cc's exp8, lane for lane).
inline float32x4_t exp4(float32x4_t x) {
  const float32x4_t hi = vdupq_n_f32(88.3762626647949f);
  const float32x4_t lo = vdupq_n_f32(-87.3365447504f);
  const uint32x4_t underflow = vcltq_f32(x, lo);
  const uint32x4_t is_inf = vceqq_f32(x, vdupq_n_f32(__builtin_inff()));
  const uint32x4_t is_nan = vmvnq_u32(vceqq_f32(x, x));
  float32x4_t v = vbslq_f32(is_nan, x, vminq_f32(hi, vmaxq_f32(lo, x)));
  const float32x4_t n = vrndnq_f32(vmulq_f32(v, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(v, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.f)), p, vmulq_f32(r, r));
  // 2^n: n + 127 in the exponent field; n = 128 (not a float's exponent)
  // is taken as 2 * 2^127.
  const int32x4_t ni = vcvtq_s32_f32(n);
  const uint32x4_t top = vcgtq_s32(ni, vdupq_n_s32(127));
  const int32x4_t e = vsubq_s32(ni, vreinterpretq_s32_u32(vandq_u32(top, vdupq_n_u32(1))));
  const float32x4_t scale = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(e, vdupq_n_s32(127)), 23));
  float32x4_t result = vmulq_f32(p, scale);
  result = vbslq_f32(top, vaddq_f32(result, result), result);
  result = vbslq_f32(is_inf, x, result);
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(result), underflow));
}

}  // namespace

// The portable kernel's steps, four lanes at a time: the maximum,
// e^(x - max) stored and summed, then scaled by 1 / sum. A NaN anywhere
// makes the sum, and so every output, NaN.
void softmax_row(const float* in, int64_t n, float* out) {
  float32x4_t vmax = vdupq_n_f32(-__builtin_inff());
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vmax = vmaxq_f32(vmax, vld1q_f32(in + i));
  float max = vmaxvq_f32(vmax);
  for (int64_t j = i; j < n; ++j) max = in[j] > max || in[j] != in[j] ? in[j] : max;
  const float32x4_t vm = vdupq_n_f32(max);
  float32x4_t vsum = vdupq_n_f32(0.f);
  for (i = 0; i + 4 <= n; i += 4) {
    const float32x4_t e = exp4(vsubq_f32(vld1q_f32(in + i), vm));
    vst1q_f32(out + i, e);
    vsum = vaddq_f32(vsum, e);
  }
  if (i < n) {
    float lanes[4] = {};
    for (int64_t j = i; j < n; ++j) lanes[j - i] = in[j];
    // Lanes past the row are 0 - max before e^x: masked out of the sum.
    float e[4];
    vst1q_f32(e, exp4(vsubq_f32(vld1q_f32(lanes), vm)));
    for (int64_t j = i; j < n; ++j) {
      out[j] = e[j - i];
      lanes[j - i] = e[j - i];
    }
    for (int64_t j = n - i; j < 4; ++j) lanes[j] = 0.f;
    vsum = vaddq_f32(vsum, vld1q_f32(lanes));
  }
  const float32x4_t scale = vdupq_n_f32(1.f / vaddvq_f32(vsum));
  for (i = 0; i + 4 <= n; i += 4) vst1q_f32(out + i, vmulq_f32(vld1q_f32(out + i), scale));
  for (; i < n; ++i) out[i] *= vgetq_lane_f32(scale, 0);
}

// Mean and variance of one row accumulated in double (two lanes per
// vector), then y = (x - mean) * inv * scale (+ bias) in float.
void layer_norm_row(const float* in, int64_t n, const float* scale, const float* bias, double epsilon, float* out,
                    float* out_mean, float* out_inv) {
  float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(in + i);
    s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(v)));
    s1 = vaddq_f64(s1, vcvt_high_f64_f32(v));
  }
  double sum = vaddvq_f64(vaddq_f64(s0, s1));
  for (int64_t j = i; j < n; ++j) sum += in[j];
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  const float64x2_t vmean = vdupq_n_f64(mean);
  s0 = vdupq_n_f64(0.0);
  s1 = s0;
  for (i = 0; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(in + i);
    const float64x2_t d0 = vsubq_f64(vcvt_f64_f32(vget_low_f32(v)), vmean);
    const float64x2_t d1 = vsubq_f64(vcvt_high_f64_f32(v), vmean);
    s0 = vfmaq_f64(s0, d0, d0);
    s1 = vfmaq_f64(s1, d1, d1);
  }
  double squares = vaddvq_f64(vaddq_f64(s0, s1));
  for (int64_t j = i; j < n; ++j) {
    const double d = in[j] - mean;
    squares += d * d;
  }
  const double var = n > 0 ? squares / static_cast<double>(n) : 0.0;
  const float inv = static_cast<float>(1.0 / sqrt(var + epsilon));
  const float m = static_cast<float>(mean);
  const float32x4_t vm = vdupq_n_f32(m), vinv = vdupq_n_f32(inv);
  for (i = 0; i + 4 <= n; i += 4) {
    float32x4_t v = vmulq_f32(vmulq_f32(vsubq_f32(vld1q_f32(in + i), vm), vinv), vld1q_f32(scale + i));
    if (bias != nullptr) v = vaddq_f32(v, vld1q_f32(bias + i));
    vst1q_f32(out + i, v);
  }
  for (; i < n; ++i) {
    const float v = (in[i] - m) * inv * scale[i];
    out[i] = bias != nullptr ? v + bias[i] : v;
  }
  if (out_mean != nullptr) {
    *out_mean = m;
    *out_inv = inv;
  }
}

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
