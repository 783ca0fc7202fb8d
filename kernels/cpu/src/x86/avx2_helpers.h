// Inline AVX2+FMA helpers that several x86/*_avx2.cc files share: the
// clamp of a finished vector, the even/odd split of 16 floats and the
// store of a vector's first n floats. Each carries KILN_AVX2; only files of
// the AVX2 path include this. Internal.

#ifndef KILN_KERNELS_CPU_SRC_X86_AVX2_HELPERS_H_
#define KILN_KERNELS_CPU_SRC_X86_AVX2_HELPERS_H_

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "isa_switch.h"

namespace kiln {
namespace kernels {
namespace x86 {

// max(lo, v) then min(hi, v): NaN in v passes through (the second operand
// wins on NaN).
KILN_AVX2 inline __m256 clamp8(__m256 v, __m256 lo, __m256 hi) { return _mm256_min_ps(hi, _mm256_max_ps(lo, v)); }

// Even and odd elements of the 16 floats at p: {p[0], p[2], .., p[14]} and
// {p[1], p[3], .., p[15]}.
KILN_AVX2 inline void deinterleave(const float* p, __m256* even, __m256* odd) {
  const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
  // shuffle_ps works per 128-bit half: [a0 a2 b0 b2 | a4 a6 b4 b6]; the
  // 64-bit permute puts the halves in order.
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

// The first n (1 to 8) floats of v to p.
KILN_AVX2 inline void store8(float* p, int64_t n, __m256 v) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  alignas(32) float buf[8];
  _mm256_store_ps(buf, v);
  memcpy(p, buf, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_X86_AVX2_HELPERS_H_
