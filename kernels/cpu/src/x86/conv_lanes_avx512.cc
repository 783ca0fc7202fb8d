// ConvLanes' register tile with AVX-512 (conv_lanes.cc): up to 8 output
// positions by 32 output channels, sixteen 512-bit accumulators, per step
// of k two loads of weights and one broadcast per position. Carries
// KILN_AVX512 (isa_switch.h); called only after has_avx512f() said yes.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>

#include "x86/avx512_helpers.h"
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

// 128-bit lanes of a and b: 0x88 the even ones (a's 0 and 2, then b's),
// 0xDD the odd ones. (The masked form: GCC 12 warns about the unmasked
// one's undefined source.)
template <int kImm>
KILN_AVX512 inline __m512 lanes(__m512 a, __m512 b) {
  return _mm512_mask_shuffle_f32x4(a, 0xFFFF, a, b, kImm);
}

// The 16 x 16 block at r (rows ld floats apart; rows past `rows` read as
// zero) transposed: out[j][i] = r[i][j].
KILN_AVX512 inline void transpose16(const float* r, int64_t ld, int64_t rows, __m512 (&out)[16]) {
  // The rows (t), pairs of them interleaved (u), then four rows' element e
  // of each 128-bit lane gathered: t[4i + e], lane L, holds column 4L + e of
  // rows 4i..4i+3; last, the lanes of four such vectors put together.
  __m512 t[16], u[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) t[i] = i < rows ? _mm512_loadu_ps(r + i * ld) : _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    u[i] = _mm512_mask_unpacklo_ps(t[i], 0xFFFF, t[i], t[i + 1]);
    u[i + 1] = _mm512_mask_unpackhi_ps(t[i], 0xFFFF, t[i], t[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    t[i] = _mm512_mask_shuffle_ps(u[i], 0xFFFF, u[i], u[i + 2], 0x44);
    t[i + 1] = _mm512_mask_shuffle_ps(u[i], 0xFFFF, u[i], u[i + 2], 0xEE);
    t[i + 2] = _mm512_mask_shuffle_ps(u[i + 1], 0xFFFF, u[i + 1], u[i + 3], 0x44);
    t[i + 3] = _mm512_mask_shuffle_ps(u[i + 1], 0xFFFF, u[i + 1], u[i + 3], 0xEE);
  }
  // Column 4L + e: lane L of t[e], t[4 + e], t[8 + e], t[12 + e].
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    const __m512 even0 = lanes<0x88>(t[e], t[4 + e]), odd0 = lanes<0xDD>(t[e], t[4 + e]);
    const __m512 even1 = lanes<0x88>(t[8 + e], t[12 + e]), odd1 = lanes<0xDD>(t[8 + e], t[12 + e]);
    out[e] = lanes<0x88>(even0, even1);
    out[8 + e] = lanes<0xDD>(even0, even1);
    out[4 + e] = lanes<0x88>(odd0, odd1);
    out[12 + e] = lanes<0xDD>(odd0, odd1);
  }
}

}  // namespace

KILN_AVX512 void conv_lanes_write_avx512(const float* product, int64_t ldp, int64_t positions, float* y, int64_t n,
                                         const float* bias, bool clamp, float lo, float hi) {
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (int64_t p0 = 0; p0 < positions; p0 += 16) {
    const int64_t rows = positions - p0 < 16 ? positions - p0 : 16;
    const __mmask16 mask = first_lanes(rows);
    __m512 col[16];
    transpose16(product + p0 * ldp, ldp, rows, col);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      __m512 v = bias != nullptr ? _mm512_add_ps(col[j], _mm512_set1_ps(bias[j])) : col[j];
      if (clamp) v = clamp16(v, vlo, vhi);
      _mm512_mask_storeu_ps(y + j * n + p0, mask, v);
    }
  }
}

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
