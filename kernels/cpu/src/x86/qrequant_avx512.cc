// The int8 epilogue on the avx512 path (qgemm.h): a channel tile's rows of
// int32 sums requantized 16 at a time, each row's tail under a mask, and
// stored as bytes by one narrowing store (vpmovdb). The same arithmetic as
// requantize_row_avx2 (64-bit products of the even and odd lanes, the
// rounding term, the high words shifted by s - 32), so the same bits as
// the scalar loop. AVX-512F only (KILN_AVX512).

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>

#include "qgemm.h"

// GCC 12 warns inside its own AVX-512 headers (the _mm512_undefined_*
// placeholders of the set1 and masked intrinsics); nothing here reads them.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kiln {
namespace kernels {

KILN_AVX512 void requantize_rows_avx512(const int32_t* acc, int64_t ld, int64_t rows, int64_t n, const int32_t* bias,
                                        const int32_t* m, const int32_t* s, int32_t zp, int32_t lo, int32_t hi,
                                        uint8_t* y, int64_t y_ld) {
  const __m512i vzp = _mm512_set1_epi32(zp), vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
  const __mmask16 odd_lanes = 0xAAAA;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n % 16)) - 1);
  for (int64_t r = 0; r < rows; ++r) {
    const __m512i vb = _mm512_set1_epi32(bias[r]);
    const __m512i vm = _mm512_set1_epi32(m[r]);
    const __m512i round = _mm512_set1_epi64(int64_t{1} << (s[r] - 1));
    const __m128i rest = _mm_cvtsi32_si128(s[r] - 32);
    const int32_t* a = acc + r * ld;
    uint8_t* out = y + r * y_ld;
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : tail;
      const __m512i v = _mm512_add_epi32(_mm512_maskz_loadu_epi32(k, a + i), vb);
      const __m512i even = _mm512_add_epi64(_mm512_mul_epi32(v, vm), round);
      const __m512i odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(v, 32), vm), round);
      __m512i q = _mm512_mask_blend_epi32(odd_lanes, _mm512_srli_epi64(even, 32), odd);
      q = _mm512_add_epi32(_mm512_sra_epi32(q, rest), vzp);
      q = _mm512_min_epi32(_mm512_max_epi32(q, vlo), vhi);
      // Clamped to the output's range already: truncation keeps the bits.
      _mm512_mask_cvtepi32_storeu_epi8(out + i, k, q);
    }
  }
}

}  // namespace kernels
}  // namespace kiln

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // KILN_X86
