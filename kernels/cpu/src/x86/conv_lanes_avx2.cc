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

}  // namespace

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
