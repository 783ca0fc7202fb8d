// ConvLanes' register tile with AVX2 and FMA (conv_lanes.cc): up to 6
// output positions by 16 output channels, twelve 256-bit accumulators, per
// step of k two loads of weights and one broadcast per position. Carries
// KILN_AVX2 (isa_switch.h); called only after has_avx2_fma() said yes.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>

#include "x86/avx2_helpers.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {

namespace {

// R positions by 16 channels. The accumulators are named, not an array:
// GCC kept an array of twelve in registers but also stored it to the stack
// on every step of k.
#define KILN_LANES_ROW(i)                            \
  if (R > i) {                                       \
    const __m256 a = _mm256_broadcast_ss(p##i + at); \
    lo##i = _mm256_fmadd_ps(a, b0, lo##i);           \
    hi##i = _mm256_fmadd_ps(a, b1, hi##i);           \
  }
#define KILN_LANES_STORE(i)                                   \
  if (R > i) {                                                \
    float* row = ct + i * ldct;                               \
    if (accumulate) {                                         \
      lo##i = _mm256_add_ps(lo##i, _mm256_loadu_ps(row));     \
      hi##i = _mm256_add_ps(hi##i, _mm256_loadu_ps(row + 8)); \
    }                                                         \
    _mm256_storeu_ps(row, lo##i);                             \
    _mm256_storeu_ps(row + 8, hi##i);                         \
  }
// Table: step s at koff[s], else at s * ps (as the AVX-512 tile).
template <int R, bool Table>
KILN_AVX2 void lanes_tile(int64_t kc, const float* const* pos, const int32_t* koff, int64_t ps, const float* w,
                          float* ct, int64_t ldct, bool accumulate, const LanesPrefetch& pf) {
  __m256 lo0 = _mm256_setzero_ps(), lo1 = lo0, lo2 = lo0, lo3 = lo0, lo4 = lo0, lo5 = lo0;
  __m256 hi0 = lo0, hi1 = lo0, hi2 = lo0, hi3 = lo0, hi4 = lo0, hi5 = lo0;
  const float* p0 = pos[0];
  const float* p1 = R > 1 ? pos[1] : p0;
  const float* p2 = R > 2 ? pos[2] : p0;
  const float* p3 = R > 3 ? pos[3] : p0;
  const float* p4 = R > 4 ? pos[4] : p0;
  const float* p5 = R > 5 ? pos[5] : p0;
  const float* line = pf.lines;
  int64_t due = 0;
  for (int64_t s = 0; s < kc; ++s) {
    due += pf.count;
    for (; due >= kc; due -= kc, line += 16) __builtin_prefetch(line, 0, 3);
    const __m256 b0 = _mm256_loadu_ps(w + s * 16);
    const __m256 b1 = _mm256_loadu_ps(w + s * 16 + 8);
    const int64_t at = Table ? koff[s] : s * ps;
    KILN_LANES_ROW(0)
    KILN_LANES_ROW(1)
    KILN_LANES_ROW(2)
    KILN_LANES_ROW(3)
    KILN_LANES_ROW(4)
    KILN_LANES_ROW(5)
  }
  KILN_LANES_STORE(0)
  KILN_LANES_STORE(1)
  KILN_LANES_STORE(2)
  KILN_LANES_STORE(3)
  KILN_LANES_STORE(4)
  KILN_LANES_STORE(5)
}
#undef KILN_LANES_ROW
#undef KILN_LANES_STORE

template <bool Table>
KILN_AVX2 void lanes_rows(int64_t kc, const float* const* pos, const int32_t* koff, int64_t ps, int64_t rows,
                          const float* w, float* ct, int64_t ldct, bool accumulate, const LanesPrefetch& pf) {
  switch (rows) {
    case 1: lanes_tile<1, Table>(kc, pos, koff, ps, w, ct, ldct, accumulate, pf); break;
    case 2: lanes_tile<2, Table>(kc, pos, koff, ps, w, ct, ldct, accumulate, pf); break;
    case 3: lanes_tile<3, Table>(kc, pos, koff, ps, w, ct, ldct, accumulate, pf); break;
    case 4: lanes_tile<4, Table>(kc, pos, koff, ps, w, ct, ldct, accumulate, pf); break;
    case 5: lanes_tile<5, Table>(kc, pos, koff, ps, w, ct, ldct, accumulate, pf); break;
    default: lanes_tile<6, Table>(kc, pos, koff, ps, w, ct, ldct, accumulate, pf); break;
  }
}

// The 8 x 8 block at r (rows ld floats apart; rows past `rows` read as
// zero) transposed: out[j][i] = r[i][j].
KILN_AVX2 inline void transpose8(const float* r, int64_t ld, int64_t rows, __m256 (&out)[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) t[i] = i < rows ? _mm256_loadu_ps(r + i * ld) : _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    u[i] = _mm256_unpacklo_ps(t[i], t[i + 1]);
    u[i + 1] = _mm256_unpackhi_ps(t[i], t[i + 1]);
  }
  // t[4i + e], 128-bit half L: column 4L + e of rows 4i..4i+3.
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    t[i] = _mm256_shuffle_ps(u[i], u[i + 2], 0x44);
    t[i + 1] = _mm256_shuffle_ps(u[i], u[i + 2], 0xEE);
    t[i + 2] = _mm256_shuffle_ps(u[i + 1], u[i + 3], 0x44);
    t[i + 3] = _mm256_shuffle_ps(u[i + 1], u[i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    out[e] = _mm256_permute2f128_ps(t[e], t[4 + e], 0x20);
    out[4 + e] = _mm256_permute2f128_ps(t[e], t[4 + e], 0x31);
  }
}

}  // namespace

KILN_AVX2 void conv_lanes_write_avx2(const float* product, int64_t ldp, int64_t positions, float* y, int64_t n,
                                     const float* bias, bool clamp, float lo, float hi) {
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  for (int64_t half = 0; half < 16; half += 8) {
    for (int64_t p0 = 0; p0 < positions; p0 += 8) {
      const int64_t rows = positions - p0 < 8 ? positions - p0 : 8;
      __m256 col[8];
      transpose8(product + p0 * ldp + half, ldp, rows, col);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        __m256 v = bias != nullptr ? _mm256_add_ps(col[j], _mm256_set1_ps(bias[half + j])) : col[j];
        if (clamp) v = clamp8(v, vlo, vhi);
        store8(y + (half + j) * n + p0, rows, v);
      }
    }
  }
}

KILN_AVX2 void conv_lanes_tile_avx2(int64_t kc, const float* const* pos, const int32_t* koff, int64_t ps, int64_t rows,
                                    const float* w0, const float* w1, float* ct, int64_t ldct, bool accumulate,
                                    const LanesPrefetch& pf) {
  static_cast<void>(w1);  // one panel a tile
  if (koff != nullptr) {
    lanes_rows<true>(kc, pos, koff, ps, rows, w0, ct, ldct, accumulate, pf);
  } else {
    lanes_rows<false>(kc, pos, koff, ps, rows, w0, ct, ldct, accumulate, pf);
  }
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
