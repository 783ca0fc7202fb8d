// SSE2 loops of the int8 kernels in src/, inline where they are called:
// the packers' byte transposes and strided gathers (qgemm.cc) and
// AvgPoolInt8's byte sums (qlinear.cc). SSE2 is the x86-64 baseline, so
// these need no target attribute and no check of the processor; each
// returns where the caller's plain loop takes over. Internal.

#ifndef KILN_KERNELS_CPU_SRC_X86_INT8_SSE2_H_
#define KILN_KERNELS_CPU_SRC_X86_INT8_SSE2_H_

#include "isa_switch.h"

#if KILN_X86

#include <emmintrin.h>
#include <stdint.h>

#include "kiln/kernels/qgemm.h"

namespace kiln {
namespace kernels {
namespace x86 {

// qgemm_pack_columns: columns [0, full) (whole panels) of four channel
// rows (nullptr: zeros), each byte XORed with `bias`, interleaved into the
// panels at out (panel_bytes apart): a 4 x 16 byte transpose by unpacking.
// Returns full.
inline int64_t pack_column_quads_sse2(const uint8_t* const rows[4], int64_t full, uint8_t bias, uint8_t* out,
                                      int64_t panel_bytes) {
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(bias));
  int64_t p0 = 0;
  for (; p0 < full; p0 += kQGemmNr) {
    __m128i v[4];
    for (int64_t r = 0; r < 4; ++r) {
      v[r] = rows[r] != nullptr ? _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[r] + p0)), vflip)
                                : _mm_setzero_si128();
    }
    const __m128i a = _mm_unpacklo_epi8(v[0], v[1]), b = _mm_unpackhi_epi8(v[0], v[1]);
    const __m128i c = _mm_unpacklo_epi8(v[2], v[3]), d = _mm_unpackhi_epi8(v[2], v[3]);
    __m128i* dst = reinterpret_cast<__m128i*>(out + (p0 / kQGemmNr) * panel_bytes);
    _mm_storeu_si128(dst + 0, _mm_unpacklo_epi16(a, c));
    _mm_storeu_si128(dst + 1, _mm_unpackhi_epi16(a, c));
    _mm_storeu_si128(dst + 2, _mm_unpacklo_epi16(b, d));
    _mm_storeu_si128(dst + 3, _mm_unpackhi_epi16(b, d));
  }
  return p0;
}

// im2col_row at stride 2: d[ox - a] = src[ox * 2 - first] for ox from `ox`
// on, 16 at a time (the even bytes of 32 kept by a mask and packed), while
// ox stays below `end` and all 32 bytes lie inside the row (w bytes).
// Returns the first ox not done.
inline int64_t even_bytes_sse2(const uint8_t* src, int64_t first, int64_t w, int64_t ox, int64_t end, uint8_t* d,
                               int64_t a) {
  const __m128i even = _mm_set1_epi16(0x00FF);
  for (; ox + 16 <= end && (ox + 16) * 2 - first <= w; ox += 16) {
    const uint8_t* p = src + ox * 2 - first;
    const __m128i lo = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), even);
    const __m128i hi = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)), even);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (ox - a)), _mm_packus_epi16(lo, hi));
  }
  return ox;
}

// qgemm_pack_im2col: bytes [c0, c0 + 16) of four im2col rows (rows[r]),
// XORed with `flip`, interleaved into one panel row of 64 bytes at dst.
template <typename Rows>
inline void interleave_rows_sse2(const Rows& rows, int64_t c0, uint8_t flip, uint8_t* dst) {
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
  __m128i v[4];
  for (int64_t r = 0; r < 4; ++r) {
    v[r] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[r] + c0)), vflip);
  }
  const __m128i a = _mm_unpacklo_epi8(v[0], v[1]), b = _mm_unpackhi_epi8(v[0], v[1]);
  const __m128i c = _mm_unpacklo_epi8(v[2], v[3]), d = _mm_unpackhi_epi8(v[2], v[3]);
  __m128i* o = reinterpret_cast<__m128i*>(dst);
  _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(a, c));
  _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(a, c));
  _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(b, d));
  _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(b, d));
}

// The sum of x[0 .. *done) as uint8 or int8 values, *done = n - n % 16:
// psadbw adds 16 bytes at a time (int8 values biased by 128 first).
inline int32_t sum_bytes_sse2(const uint8_t* x, int32_t n, bool is_signed, int32_t* done) {
  int32_t i = 0;
  const __m128i bias = _mm_set1_epi8(is_signed ? static_cast<char>(0x80) : 0);
  __m128i acc = _mm_setzero_si128();
  for (; i + 16 <= n; i += 16) {
    const __m128i v = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)), bias);
    acc = _mm_add_epi64(acc, _mm_sad_epu8(v, _mm_setzero_si128()));
  }
  *done = i;
  return _mm_cvtsi128_si32(acc) + _mm_cvtsi128_si32(_mm_srli_si128(acc, 8)) - (is_signed ? 128 * i : 0);
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln
#endif  // KILN_X86

#endif  // KILN_KERNELS_CPU_SRC_X86_INT8_SSE2_H_
