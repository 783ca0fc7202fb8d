// Inline AVX-512 helpers that several x86/*_avx512.cc files share: the
// clamp and store of a finished row of 16, the first n lanes as a mask, and
// the 6x32 tile of the micro-kernel, which the stride-2 convolution runs
// too. Each carries KILN_AVX512; only files of the AVX-512 path include
// this. Internal.

#ifndef KILN_KERNELS_CPU_SRC_X86_AVX512_HELPERS_H_
#define KILN_KERNELS_CPU_SRC_X86_AVX512_HELPERS_H_

#include <immintrin.h>
#include <stdint.h>

#include "isa_switch.h"
#include "kiln/kernels/gemm_blocking.h"

namespace kiln {
namespace kernels {
namespace x86 {

// max(lo, v) then min(hi, v), as clamp8 (NaN passes through). The masked
// forms: GCC 12 warns about the unmasked ones' undefined source.
KILN_AVX512 inline __m512 clamp16(__m512 v, __m512 lo, __m512 hi) {
  return _mm512_mask_min_ps(v, 0xFFFF, hi, _mm512_mask_max_ps(v, 0xFFFF, lo, v));
}

KILN_AVX512 inline void store_row16(float* row, __m512 v, __mmask16 mask, bool accumulate, float bias, __m512 col,
                                    bool clamp, __m512 lo, __m512 hi) {
  v = _mm512_add_ps(v, accumulate ? _mm512_maskz_loadu_ps(mask, row) : _mm512_add_ps(_mm512_set1_ps(bias), col));
  if (clamp) v = clamp16(v, lo, hi);
  _mm512_mask_storeu_ps(row, mask, v);
}

// The first n lanes (none for n <= 0, all for n >= 16).
KILN_AVX512 inline __mmask16 first_lanes(int64_t n) {
  const int64_t c = n < 0 ? 0 : (n > 16 ? 16 : n);
  return static_cast<__mmask16>((1u << c) - 1);
}

// One step of k for a 6x32 tile: A's six values broadcast against two
// 16-float vectors of B, twelve FMAs into c (always inlined with constant
// indices, so the accumulators stay in registers). The two-panel
// micro-kernel and the stride-2 convolution share it.
KILN_AVX512 __attribute__((always_inline)) inline void fma_step_6x32(const float* a, __m512 b0, __m512 b1,
                                                                     __m512 (&c)[kGemmMr][2]) {
  static_assert(kGemmMr == 6, "six rows of A a step");
#pragma GCC unroll 6
  for (int i = 0; i < kGemmMr; ++i) {
    const __m512 av = _mm512_set1_ps(a[i]);
    c[i][0] = _mm512_fmadd_ps(av, b0, c[i][0]);
    c[i][1] = _mm512_fmadd_ps(av, b1, c[i][1]);
  }
}

// The tile's accumulators copied out with constant indices, so that
// stores indexed by a run-time row count leave the loop's registers alone.
struct Tile6x32 {
  __m512 v[kGemmMr][2];
};
KILN_AVX512 __attribute__((always_inline)) inline Tile6x32 tile_out_6x32(const __m512 (&c)[kGemmMr][2]) {
  Tile6x32 t;
#pragma GCC unroll 6
  for (int i = 0; i < kGemmMr; ++i) {
    t.v[i][0] = c[i][0];
    t.v[i][1] = c[i][1];
  }
  return t;
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_X86_AVX512_HELPERS_H_
