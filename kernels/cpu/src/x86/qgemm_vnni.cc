// The int8 product's AVX-512 VNNI loops (qgemm.h): the packed-panel tile
// and its variants (rows written in place, the direct convolution's
// offsets, a last panel of 8 columns) and the one-row dot products. Each
// function carries KILN_AVX512_VNNI (isa_switch.h); the avx512 path takes
// them only where processor_has_avx512_vnni(), the AVX2 loops otherwise.
// Also the avx512 path's epilogue, AVX-512F only (KILN_AVX512), on any
// processor with AVX-512: a channel tile's rows of int32 sums requantized
// 16 at a time, each row's tail under a mask, stored as bytes by one
// narrowing store (vpmovdb); the arithmetic of requantize_row_avx2
// (64-bit products of the even and odd lanes, the rounding term, the high
// words shifted by s - 32) with the zero point added inside the rounding
// term (x86/qgemm_tile.h), so the scalar loop's bits.
//
// One 64-byte panel row (4 k of 16 columns) is one zmm of uint8; each
// channel's 4 weights are broadcast as one int32; vpdpbusd adds the four
// uint8 x int8 products of every lane into its int32 accumulator (no
// intermediate saturation; vpdpbusds would saturate the sum, not used).
// Eight channels, eight accumulators.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>

#include "qgemm.h"
#include "x86/qgemm_tile.h"

// GCC 12 warns inside its own AVX-512 headers (the _mm512_undefined_*
// placeholders of _mm512_reduce_add_epi32); nothing here reads them.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kiln {
namespace kernels {

using x86::load_word;
using x86::step_bytes;

namespace {

template <bool kOffsets>
KILN_AVX512_VNNI inline void tile_vnni(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                                       const int32_t* off, int32_t* out_rows, int64_t ldo) {
  static_assert(kQGemmMr == 8 && kQGemmNr == 16, "the VNNI loop computes 8 x 16 tiles");
  const int8_t* rows[8];
  for (int64_t r = 0; r < 8; ++r) rows[r] = w + (r < mr ? r : mr - 1) * ldw;
  __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
  __m512i a2 = _mm512_setzero_si512(), a3 = _mm512_setzero_si512();
  __m512i a4 = _mm512_setzero_si512(), a5 = _mm512_setzero_si512();
  __m512i a6 = _mm512_setzero_si512(), a7 = _mm512_setzero_si512();
  for (int64_t q = 0; q < kp / 4; ++q) {
    const __m512i x = _mm512_loadu_si512(step_bytes<kOffsets>(panel, off, q));
    a0 = _mm512_dpbusd_epi32(a0, x, _mm512_set1_epi32(load_word(rows[0] + q * 4)));
    a1 = _mm512_dpbusd_epi32(a1, x, _mm512_set1_epi32(load_word(rows[1] + q * 4)));
    a2 = _mm512_dpbusd_epi32(a2, x, _mm512_set1_epi32(load_word(rows[2] + q * 4)));
    a3 = _mm512_dpbusd_epi32(a3, x, _mm512_set1_epi32(load_word(rows[3] + q * 4)));
    a4 = _mm512_dpbusd_epi32(a4, x, _mm512_set1_epi32(load_word(rows[4] + q * 4)));
    a5 = _mm512_dpbusd_epi32(a5, x, _mm512_set1_epi32(load_word(rows[5] + q * 4)));
    a6 = _mm512_dpbusd_epi32(a6, x, _mm512_set1_epi32(load_word(rows[6] + q * 4)));
    a7 = _mm512_dpbusd_epi32(a7, x, _mm512_set1_epi32(load_word(rows[7] + q * 4)));
  }
  const __m512i all[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
  for (int64_t r = 0; r < mr; ++r) _mm512_storeu_si512(out_rows + r * ldo, all[r]);
}

// The first 8 columns of the panel only (its rows' low 32 bytes), 256-bit
// vpdpbusd: for a last panel of at most 8 columns (a 7 x 7 plane's 49
// columns leave one), where the 512-bit tile would spend as long on 15
// empty lanes. Writes 8 values per row.
KILN_AVX512_VNNI_VL inline void tile_vnni_half(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr,
                                               const uint8_t* panel, int32_t* out_rows, int64_t ldo) {
  const int8_t* rows[8];
  for (int64_t r = 0; r < 8; ++r) rows[r] = w + (r < mr ? r : mr - 1) * ldw;
  __m256i a[8];
  for (int64_t r = 0; r < 8; ++r) a[r] = _mm256_setzero_si256();
  for (int64_t q = 0; q < kp / 4; ++q) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + q * 4 * kQGemmNr));
    for (int64_t r = 0; r < 8; ++r) a[r] = _mm256_dpbusd_epi32(a[r], x, _mm256_set1_epi32(load_word(rows[r] + q * 4)));
  }
  for (int64_t r = 0; r < mr; ++r) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_rows + r * ldo), a[r]);
}

}  // namespace

KILN_AVX512_VNNI_VL void qgemm_tile_rows_vnni_half(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr,
                                                   const uint8_t* panel, int32_t* out, int64_t ldo) {
  tile_vnni_half(kp, w, ldw, mr, panel, out, ldo);
}

KILN_AVX512_VNNI void qgemm_tile_avx512_vnni(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                                             int32_t acc[kQGemmMr][kQGemmNr]) {
  tile_vnni<false>(kp, w, ldw, mr, panel, nullptr, acc[0], kQGemmNr);
}

KILN_AVX512_VNNI void qgemm_tile_offsets_vnni(int64_t nq, const int8_t* w, int64_t mr, const uint8_t* base,
                                              const int32_t* off, bool /*small*/, int32_t* out, int64_t ldo) {
  tile_vnni<true>(nq * 4, w, nq * 4, mr, base, off, out, ldo);
}

KILN_AVX512_VNNI void qgemm_tile_rows_vnni(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                                           bool /*small*/, int32_t* out, int64_t ldo) {
  tile_vnni<false>(kp, w, ldw, mr, panel, nullptr, out, ldo);
}

KILN_AVX512_VNNI void dot_rows_avx512_vnni(int64_t kp, int64_t len, const int8_t* w, int64_t rows, const uint8_t* x,
                                           uint8_t flip, int32_t* out) {
  // The last block's loads are masked to len (x is read in place); the
  // weights' masked-off bytes load as zeros, so those lanes add nothing.
  const int64_t tail = len % 64;
  const __mmask64 mask = tail == 0 ? ~__mmask64{0} : (__mmask64{1} << tail) - 1;
  const __m512i vflip = _mm512_set1_epi8(static_cast<char>(flip));
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* wr = w + r * kp;
    __m512i acc = _mm512_setzero_si512();
    int64_t k = 0;
    for (; k + 64 <= len; k += 64) {
      acc = _mm512_dpbusd_epi32(acc, _mm512_xor_si512(_mm512_loadu_si512(x + k), vflip), _mm512_loadu_si512(wr + k));
    }
    if (tail != 0) {
      acc = _mm512_dpbusd_epi32(acc, _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, x + k), vflip),
                                _mm512_maskz_loadu_epi8(mask, wr + k));
    }
    out[r] = _mm512_reduce_add_epi32(acc);
  }
}

KILN_AVX512 void requantize_rows_avx512(const int32_t* acc, int64_t ld, int64_t rows, int64_t n, const int32_t* bias,
                                        const int32_t* m, const int32_t* s, int32_t zp, int32_t lo, int32_t hi,
                                        bool is_unsigned, uint8_t* y, int64_t y_ld) {
  const __mmask16 tail = static_cast<__mmask16>((1u << (n % 16)) - 1);
  // The saturating stores clamp to the output's range: only bounds inside
  // it (a Relu's, a Clip's) need a max or a min. Unsigned saturation reads
  // negative sums as large, so uint8 always takes the max (lo >= 0).
  const bool clamp_lo = is_unsigned || lo > -128, clamp_hi = hi < (is_unsigned ? 255 : 127);
  const __m512i vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
  for (int64_t r = 0; r < rows; ++r) {
    const x86::Requant16 q = x86::requant16(bias[r], m[r], s[r], zp, lo, hi);
    const int32_t* a = acc + r * ld;
    uint8_t* out = y + r * y_ld;
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : tail;
      __m512i v = x86::requantize16_unclamped(_mm512_maskz_loadu_epi32(k, a + i), q);
      if (clamp_lo) v = _mm512_max_epi32(v, vlo);
      if (clamp_hi) v = _mm512_min_epi32(v, vhi);
      if (is_unsigned) {
        _mm512_mask_cvtusepi32_storeu_epi8(out + i, k, v);
      } else {
        _mm512_mask_cvtsepi32_storeu_epi8(out + i, k, v);
      }
    }
  }
}

}  // namespace kernels
}  // namespace kiln

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // KILN_X86
