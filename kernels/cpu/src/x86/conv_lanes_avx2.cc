// ConvLanes' register tile with AVX2 and FMA (conv_lanes.cc): up to 6
// output positions by 16 output channels, twelve 256-bit accumulators, per
// step of k two loads of weights and one broadcast per position. Carries
// KILN_AVX2 (isa_switch.h); called only after has_avx2_fma() said yes.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>

#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {

namespace {

// R positions by 16 channels; the loops over R unroll, so the accumulators
// stay in registers.
template <int R>
KILN_AVX2 void lanes_tile(int64_t kc, const float* const* pos, int64_t ps, const float* w, float* ct, int64_t ldct,
                          bool accumulate) {
  __m256 c0[R], c1[R];
  const float* p[R];
  for (int r = 0; r < R; ++r) {
    c0[r] = _mm256_setzero_ps();
    c1[r] = _mm256_setzero_ps();
    p[r] = pos[r];
  }
  for (int64_t s = 0; s < kc; ++s) {
    const __m256 b0 = _mm256_loadu_ps(w + s * 16);
    const __m256 b1 = _mm256_loadu_ps(w + s * 16 + 8);
    const int64_t at = s * ps;
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(p[r] + at);
      c0[r] = _mm256_fmadd_ps(a, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(a, b1, c1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* row = ct + r * ldct;
    if (accumulate) {
      c0[r] = _mm256_add_ps(c0[r], _mm256_loadu_ps(row));
      c1[r] = _mm256_add_ps(c1[r], _mm256_loadu_ps(row + 8));
    }
    _mm256_storeu_ps(row, c0[r]);
    _mm256_storeu_ps(row + 8, c1[r]);
  }
}

}  // namespace

KILN_AVX2 void conv_lanes_tile_avx2(int64_t kc, const float* const* pos, int64_t ps, int64_t rows, const float* w0,
                                    const float* w1, float* ct, int64_t ldct, bool accumulate) {
  static_cast<void>(w1);  // one panel a tile
  switch (rows) {
    case 1: lanes_tile<1>(kc, pos, ps, w0, ct, ldct, accumulate); break;
    case 2: lanes_tile<2>(kc, pos, ps, w0, ct, ldct, accumulate); break;
    case 3: lanes_tile<3>(kc, pos, ps, w0, ct, ldct, accumulate); break;
    case 4: lanes_tile<4>(kc, pos, ps, w0, ct, ldct, accumulate); break;
    case 5: lanes_tile<5>(kc, pos, ps, w0, ct, ldct, accumulate); break;
    default: lanes_tile<6>(kc, pos, ps, w0, ct, ldct, accumulate); break;
  }
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
