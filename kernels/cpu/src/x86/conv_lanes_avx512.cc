// ConvLanes' register tile with AVX-512 (conv_lanes.cc): up to 8 output
// positions by 32 output channels, sixteen 512-bit accumulators, per step
// of k two loads of weights and one broadcast per position. Carries
// KILN_AVX512 (isa_switch.h); called only after has_avx512f() said yes.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>

#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {

namespace {

// R positions by 16 (Two: 32) channels; the loops over R unroll, so the
// accumulators stay in registers. Table: step s at koff[s], else at s * ps
// (a 1x1 kernel: one image plane a step, without the table's load).
template <int R, bool Two, bool Table>
KILN_AVX512 void lanes_tile(int64_t kc, const float* const* pos, const int32_t* koff, int64_t ps, const float* w0,
                            const float* w1, float* ct, int64_t ldct, bool accumulate, const LanesPrefetch& pf) {
  __m512 c0[R], c1[R];
  const float* p[R];
  for (int r = 0; r < R; ++r) {
    c0[r] = _mm512_setzero_ps();
    c1[r] = _mm512_setzero_ps();
    p[r] = pos[r];
  }
  const float* line = pf.lines;
  int64_t due = 0;
  for (int64_t s = 0; s < kc; ++s) {
    due += pf.count;
    for (; due >= kc; due -= kc, line += 16) __builtin_prefetch(line, 0, 3);
    const __m512 b0 = _mm512_loadu_ps(w0 + s * 16);
    const __m512 b1 = Two ? _mm512_loadu_ps(w1 + s * 16) : b0;
    const int64_t at = Table ? koff[s] : s * ps;
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(p[r][at]);
      c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
      if (Two) c1[r] = _mm512_fmadd_ps(a, b1, c1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* row = ct + r * ldct;
    if (accumulate) {
      c0[r] = _mm512_add_ps(c0[r], _mm512_loadu_ps(row));
      if (Two) c1[r] = _mm512_add_ps(c1[r], _mm512_loadu_ps(row + 16));
    }
    _mm512_storeu_ps(row, c0[r]);
    if (Two) _mm512_storeu_ps(row + 16, c1[r]);
  }
}

template <bool Two, bool Table>
KILN_AVX512 void lanes_rows(int64_t kc, const float* const* pos, const int32_t* koff, int64_t ps, int64_t rows,
                            const float* w0, const float* w1, float* ct, int64_t ldct, bool accumulate,
                            const LanesPrefetch& pf) {
  switch (rows) {
    case 1: lanes_tile<1, Two, Table>(kc, pos, koff, ps, w0, w1, ct, ldct, accumulate, pf); break;
    case 2: lanes_tile<2, Two, Table>(kc, pos, koff, ps, w0, w1, ct, ldct, accumulate, pf); break;
    case 3: lanes_tile<3, Two, Table>(kc, pos, koff, ps, w0, w1, ct, ldct, accumulate, pf); break;
    case 4: lanes_tile<4, Two, Table>(kc, pos, koff, ps, w0, w1, ct, ldct, accumulate, pf); break;
    case 5: lanes_tile<5, Two, Table>(kc, pos, koff, ps, w0, w1, ct, ldct, accumulate, pf); break;
    case 6: lanes_tile<6, Two, Table>(kc, pos, koff, ps, w0, w1, ct, ldct, accumulate, pf); break;
    case 7: lanes_tile<7, Two, Table>(kc, pos, koff, ps, w0, w1, ct, ldct, accumulate, pf); break;
    default: lanes_tile<8, Two, Table>(kc, pos, koff, ps, w0, w1, ct, ldct, accumulate, pf); break;
  }
}

}  // namespace

KILN_AVX512 void conv_lanes_tile_avx512(int64_t kc, const float* const* pos, const int32_t* koff, int64_t ps,
                                        int64_t rows, const float* w0, const float* w1, float* ct, int64_t ldct,
                                        bool accumulate, const LanesPrefetch& pf) {
  if (koff != nullptr) {
    if (w1 != nullptr) {
      lanes_rows<true, true>(kc, pos, koff, ps, rows, w0, w1, ct, ldct, accumulate, pf);
    } else {
      lanes_rows<false, true>(kc, pos, koff, ps, rows, w0, w1, ct, ldct, accumulate, pf);
    }
  } else if (w1 != nullptr) {
    lanes_rows<true, false>(kc, pos, koff, ps, rows, w0, w1, ct, ldct, accumulate, pf);
  } else {
    lanes_rows<false, false>(kc, pos, koff, ps, rows, w0, w1, ct, ldct, accumulate, pf);
  }
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
