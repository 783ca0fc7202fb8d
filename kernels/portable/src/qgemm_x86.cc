// x86-64 inner loops of the int8 product (qgemm.h), each with its own
// target attribute as in gemm_x86.cc.
//
// AVX-512 VNNI: one 64-byte panel row (4 k of 16 columns) is one zmm of
// uint8; each channel's 4 weights are broadcast as one int32; vpdpbusd adds
// the four uint8 x int8 products of every lane into its int32 accumulator
// (no intermediate saturation; vpdpbusds would saturate the sum, not used).
// Eight channels, eight accumulators.
//
// AVX2: vpmaddubsw would add two uint8 x int8 products into a saturating
// int16 (255 * 127 * 2 > 32767), which breaks exactness for weights that
// use all 8 bits. Instead each 32-bit lane is split into its even and odd
// bytes as int16 (activations zero-extended, weights sign-extended by
// shifts), and vpmaddwd adds pairs of int16 products into int32: exact, one
// more instruction per 32 products than vpmaddubsw + vpmaddwd.

#include "qgemm.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>
#include <string.h>

namespace kiln {
namespace kernels {

namespace {

inline int32_t load_word(const int8_t* p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

bool processor_has_avx512_vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
}

#define KILN_AVX2 __attribute__((target("avx2")))
#define KILN_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

namespace {

// Four channels (rows r0..r0+3 of w, clamped to the last valid row) over
// the whole of kp.
KILN_AVX2 inline void tile4_avx2(int64_t kp, const int8_t* const rows[4], const uint8_t* panel,
                                 __m256i out[4][2]) {
  const __m256i low_bytes = _mm256_set1_epi16(0x00FF);
  __m256i a00 = _mm256_setzero_si256(), a01 = _mm256_setzero_si256();
  __m256i a10 = _mm256_setzero_si256(), a11 = _mm256_setzero_si256();
  __m256i a20 = _mm256_setzero_si256(), a21 = _mm256_setzero_si256();
  __m256i a30 = _mm256_setzero_si256(), a31 = _mm256_setzero_si256();
  for (int64_t q = 0; q < kp / 4; ++q) {
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + q * 64));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + q * 64 + 32));
    const __m256i x0e = _mm256_and_si256(x0, low_bytes), x0o = _mm256_srli_epi16(x0, 8);
    const __m256i x1e = _mm256_and_si256(x1, low_bytes), x1o = _mm256_srli_epi16(x1, 8);
#define KILN_ROW(r, acc0, acc1)                                                            \
  {                                                                                       \
    const __m256i w = _mm256_set1_epi32(load_word(rows[r] + q * 4));                      \
    const __m256i we = _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 8);                     \
    const __m256i wo = _mm256_srai_epi16(w, 8);                                           \
    acc0 = _mm256_add_epi32(acc0, _mm256_add_epi32(_mm256_madd_epi16(x0e, we), _mm256_madd_epi16(x0o, wo))); \
    acc1 = _mm256_add_epi32(acc1, _mm256_add_epi32(_mm256_madd_epi16(x1e, we), _mm256_madd_epi16(x1o, wo))); \
  }
    KILN_ROW(0, a00, a01)
    KILN_ROW(1, a10, a11)
    KILN_ROW(2, a20, a21)
    KILN_ROW(3, a30, a31)
#undef KILN_ROW
  }
  out[0][0] = a00; out[0][1] = a01;
  out[1][0] = a10; out[1][1] = a11;
  out[2][0] = a20; out[2][1] = a21;
  out[3][0] = a30; out[3][1] = a31;
}

}  // namespace

KILN_AVX2 void qgemm_tile_avx2(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                               int32_t acc[kQGemmMr][kQGemmNr]) {
  for (int64_t r0 = 0; r0 < mr; r0 += 4) {
    const int8_t* rows[4];
    for (int64_t r = 0; r < 4; ++r) rows[r] = w + (r0 + r < mr ? r0 + r : mr - 1) * ldw;
    __m256i out[4][2];
    tile4_avx2(kp, rows, panel, out);
    for (int64_t r = 0; r < 4 && r0 + r < mr; ++r) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc[r0 + r]), out[r][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc[r0 + r] + 8), out[r][1]);
    }
  }
}

KILN_VNNI void qgemm_tile_avx512_vnni(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                                      int32_t acc[kQGemmMr][kQGemmNr]) {
  static_assert(kQGemmMr == 8 && kQGemmNr == 16, "the VNNI loop computes 8 x 16 tiles");
  const int8_t* rows[8];
  for (int64_t r = 0; r < 8; ++r) rows[r] = w + (r < mr ? r : mr - 1) * ldw;
  __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
  __m512i a2 = _mm512_setzero_si512(), a3 = _mm512_setzero_si512();
  __m512i a4 = _mm512_setzero_si512(), a5 = _mm512_setzero_si512();
  __m512i a6 = _mm512_setzero_si512(), a7 = _mm512_setzero_si512();
  for (int64_t q = 0; q < kp / 4; ++q) {
    const __m512i x = _mm512_loadu_si512(panel + q * 64);
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
  for (int64_t r = 0; r < mr; ++r) _mm512_storeu_si512(acc[r], all[r]);
}

// Sixteen outputs at a time: uint8 x int8 products fit int16 (|255 x 128|
// < 2^15), widened to int32 before they are added.
KILN_AVX2 void depthwise_tap_avx2(int32_t* acc, const uint8_t* x, int64_t n, int32_t w) {
  const __m256i vw = _mm256_set1_epi16(static_cast<int16_t>(w));
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    const __m256i x16 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256i prod = _mm256_mullo_epi16(x16, vw);
    __m256i* a = reinterpret_cast<__m256i*>(acc + i);
    _mm256_storeu_si256(a, _mm256_add_epi32(_mm256_loadu_si256(a), _mm256_cvtepi16_epi32(_mm256_castsi256_si128(prod))));
    _mm256_storeu_si256(a + 1, _mm256_add_epi32(_mm256_loadu_si256(a + 1),
                                                _mm256_cvtepi16_epi32(_mm256_extracti128_si256(prod, 1))));
  }
  if (n % 16 >= 8) {
    const int64_t i = n - n % 16;
    const __m256i x32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i)));
    __m256i* a = reinterpret_cast<__m256i*>(acc + i);
    _mm256_storeu_si256(a, _mm256_add_epi32(_mm256_loadu_si256(a), _mm256_mullo_epi32(x32, _mm256_set1_epi32(w))));
  }
}

KILN_AVX2 void dot_rows_avx2(int64_t kp, const int8_t* w, int64_t rows, const uint8_t* x, int32_t* out) {
  // uint8 x int8 widened to int16 and vpmaddwd: exact (no vpmaddubsw
  // saturation).
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* wr = w + r * kp;
    __m256i acc = _mm256_setzero_si256();
    int64_t k = 0;
    for (; k + 16 <= kp; k += 16) {
      const __m256i x16 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + k)));
      const __m256i w16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + k)));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(x16, w16));
    }
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    int32_t sum = _mm_cvtsi128_si32(s4);
    for (; k < kp; ++k) sum += x[k] * wr[k];
    out[r] = sum;
  }
}

KILN_VNNI void dot_rows_avx512_vnni(int64_t kp, const int8_t* w, int64_t rows, const uint8_t* x, int32_t* out) {
  const int64_t tail = kp % 64;
  const __mmask64 mask = tail == 0 ? ~__mmask64{0} : (__mmask64{1} << tail) - 1;
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* wr = w + r * kp;
    __m512i acc = _mm512_setzero_si512();
    int64_t k = 0;
    for (; k + 64 <= kp; k += 64) {
      acc = _mm512_dpbusd_epi32(acc, _mm512_loadu_si512(x + k), _mm512_loadu_si512(wr + k));
    }
    if (tail != 0) {
      acc = _mm512_dpbusd_epi32(acc, _mm512_maskz_loadu_epi8(mask, x + k), _mm512_maskz_loadu_epi8(mask, wr + k));
    }
    out[r] = _mm512_reduce_add_epi32(acc);
  }
}

KILN_AVX2 void quantize_row_avx2(const float* x, int64_t n, float scale, float zp, float lo, float hi,
                                 bool is_unsigned, void* y) {
  const __m256 vs = _mm256_set1_ps(scale), vz = _mm256_set1_ps(zp);
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    __m256 q = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm256_add_ps(q, vz);
    q = _mm256_blendv_ps(q, vz, _mm256_cmp_ps(q, q, _CMP_UNORD_Q));
    q = _mm256_min_ps(_mm256_max_ps(q, vlo), vhi);
    const __m256i v = _mm256_cvtps_epi32(q);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    const __m128i b8 = is_unsigned ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(y) + i), b8);
  }
}

// Eight values at a time: (acc + bias) * m + 2^(s-1) as four even and four
// odd 64-bit products; the high halves are the products >> 32 exactly
// (arithmetic), then >> (s - 32) in 32 bits. Equal to the scalar loop for
// |acc + bias| < 2^31 and s in [32, 62].
KILN_AVX2 void requantize_row_avx2(const int32_t* acc, int64_t n, int32_t bias, int32_t m, int32_t s, int32_t zp,
                                   int32_t lo, int32_t hi, bool is_unsigned, void* y) {
  const __m256i vb = _mm256_set1_epi32(bias);
  const __m256i vm = _mm256_set1_epi32(m);
  const __m256i round = _mm256_set1_epi64x(int64_t{1} << (s - 1));
  const __m128i rest = _mm_cvtsi32_si128(s - 32);
  const __m256i vzp = _mm256_set1_epi32(zp), vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)), vb);
    const __m256i even = _mm256_add_epi64(_mm256_mul_epi32(v, vm), round);
    const __m256i odd = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(v, 32), vm), round);
    __m256i q = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    q = _mm256_add_epi32(_mm256_sra_epi32(q, rest), vzp);
    q = _mm256_min_epi32(_mm256_max_epi32(q, vlo), vhi);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i b8 = is_unsigned ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(y) + i), b8);
  }
}

}  // namespace kernels
}  // namespace kiln

#endif
