// Inline NEON helpers that several arm/*_neon.cc float files share: the
// clamps and the finishing store of a row of the 6x16 tile (the GEMM
// micro-kernel and the stride-2 convolution). Internal.

#ifndef KILN_KERNELS_CPU_SRC_ARM_NEON_HELPERS_H_
#define KILN_KERNELS_CPU_SRC_ARM_NEON_HELPERS_H_

#include <arm_neon.h>
#include <stdint.h>

namespace kiln {
namespace kernels {
namespace neon {

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

}  // namespace neon
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_ARM_NEON_HELPERS_H_
