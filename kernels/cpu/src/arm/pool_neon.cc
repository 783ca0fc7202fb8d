// Max pooling of one plane with NEON (pool.cc).

#include "isa_switch.h"

#if KILN_NEON

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "arm/neon.h"

namespace kiln {
namespace kernels {
namespace neon {

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

}  // namespace neon
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_NEON
