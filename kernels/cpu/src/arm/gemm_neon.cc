// The packed GEMM's NEON paths (gemm.cc): the 6x16 micro-kernel, the
// one-row product and the stride-2 copy of im2col packing. Four floats per
// register, 32 registers: the 6x16 tile takes 24, a row of B 4, a column of
// A 2. Sums are reassociated, as on x86, so results agree with the plain
// loops within rounding, not bit for bit.

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

namespace {

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

}  // namespace neon
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_NEON
