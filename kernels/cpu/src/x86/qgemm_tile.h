// What the int8 tiles of qgemm_avx2.cc and qgemm_vnni.cc share: the load
// of a weight word and where step q of a packed panel (or of a direct
// convolution's offsets) lies; and the AVX-512 requantization of 16 sums
// (the avx512 epilogue's and the VNNI depthwise kernel's). Internal.

#ifndef KILN_KERNELS_CPU_SRC_X86_QGEMM_TILE_H_
#define KILN_KERNELS_CPU_SRC_X86_QGEMM_TILE_H_

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "isa_switch.h"
#include "qgemm.h"

namespace kiln {
namespace kernels {
namespace x86 {

inline int32_t load_word(const int8_t* p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

// The 64 bytes of step q (four k of 16 columns): a packed panel's row q, or
// with offsets the 64 bytes at base + off[q] (qgemm_tile_offsets_avx2).
template <bool kOffsets>
inline const uint8_t* step_bytes(const uint8_t* base, const int32_t* off, int64_t q) {
  return kOffsets ? base + off[q] : base + q * 64;
}

#if KILN_X86
// One channel's requantization as vectors: bias, multiplier, the rounding
// term with the output's zero point in it (64-bit lanes), s - 32, and the
// output's bounds.
struct Requant16 {
  __m512i bias, m, round, lo, hi;
  __m128i rest;
};

__attribute__((target("avx512f"))) inline Requant16 requant16(int32_t bias, int32_t m, int32_t s, int32_t zp,
                                                              int32_t lo, int32_t hi) {
  Requant16 q;
  q.bias = _mm512_set1_epi32(bias);
  q.m = _mm512_set1_epi32(m);
  q.round = _mm512_set1_epi64(int64_t{zp} * (int64_t{1} << s) + (int64_t{1} << (s - 1)));
  q.rest = _mm_cvtsi32_si128(s - 32);
  q.lo = _mm512_set1_epi32(lo);
  q.hi = _mm512_set1_epi32(hi);
  return q;
}

// requantize16: clamp(((acc + bias) * m + 2^(s-1)) >> s + zp, lo, hi)
// (requantize16_unclamped: before the clamp, for stores that saturate) for s in [32,
// kQGemmRequant16MaxShift] and |acc + bias| < 2^31: 64-bit products of the even
// and odd lanes plus the rounding term (adding zp * 2^s before the shift
// adds zp after it: it is a multiple of 2^s), their high words gathered
// by one two-source permute, shifted by s - 32; the scalar loop's bits.
__attribute__((target("avx512f"))) inline __m512i requantize16_unclamped(__m512i acc, const Requant16& q) {
  const __m512i high_words = _mm512_setr_epi32(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
  const __m512i v = _mm512_add_epi32(acc, q.bias);
  const __m512i even = _mm512_add_epi64(_mm512_mul_epi32(v, q.m), q.round);
  const __m512i odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(v, 32), q.m), q.round);
  return _mm512_sra_epi32(_mm512_permutex2var_epi32(even, high_words, odd), q.rest);
}

__attribute__((target("avx512f"))) inline __m512i requantize16(__m512i acc, const Requant16& q) {
  return _mm512_min_epi32(_mm512_max_epi32(requantize16_unclamped(acc, q), q.lo), q.hi);
}
#endif

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_X86_QGEMM_TILE_H_
