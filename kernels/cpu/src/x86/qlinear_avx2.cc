// The AVX2 loops of qlinear.cc's element-wise int8 kernels: QuantizeLinear's
// rows (quantize_row_avx2), AddInt8's (add_int8_row_avx2) and
// ChannelAffineInt8's (channel_affine_row_avx2), SoftmaxInt8's table
// look-ups and last step (softmax_exps_avx2, softmax_quantize_avx2), each
// with the scalar loop's bits; and LookupInt8's (lookup_bytes_avx2, and with
// AVX512-VBMI lookup_bytes_avx512_vbmi). Each function carries its target attribute
// (isa_switch.h).

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <stdint.h>

#include "qgemm.h"

namespace kiln {
namespace kernels {

KILN_AVX2 int64_t softmax_exps_avx2(const uint8_t* x, int64_t n, uint8_t flip, int32_t top, const float* table,
                                    float* e) {
  const __m256i vtop = _mm256_set1_epi32(top);
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i bytes = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i)), vflip);
    const __m256i d = _mm256_sub_epi32(vtop, _mm256_cvtepu8_epi32(bytes));
    _mm256_storeu_ps(e + i, _mm256_i32gather_ps(table, d, 4));
  }
  return i;
}

KILN_AVX2 int64_t softmax_quantize_avx2(const float* e, int64_t n, float scale, int32_t zp, int32_t lo, int32_t hi,
                                        bool is_unsigned, uint8_t* y) {
  const __m256 vscale = _mm256_set1_ps(scale), top = _mm256_set1_ps(4194304.f);
  const __m256i vzp = _mm256_set1_epi32(zp), vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // Rounded half to even (the default mode) as the scalar loop's 1.5 x 2^23.
    __m256i q = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_mul_ps(_mm256_loadu_ps(e + i), vscale), top));
    q = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(q, vzp), vlo), vhi);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i b8 = is_unsigned ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), b8);
  }
  return i;
}

KILN_AVX2 void quantize_row_avx2(const float* x, int64_t n, float scale, float zp, float lo, float hi, bool is_unsigned,
                                 void* y) {
  const __m256 vs = _mm256_set1_ps(scale), vz = _mm256_set1_ps(zp);
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    __m256 q =
        _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm256_add_ps(q, vz);
    q = _mm256_blendv_ps(q, vz, _mm256_cmp_ps(q, q, _CMP_UNORD_Q));
    q = _mm256_min_ps(_mm256_max_ps(q, vlo), vhi);
    const __m256i v = _mm256_cvtps_epi32(q);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    const __m128i b8 = is_unsigned ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(y) + i), b8);
  }
}

KILN_AVX2 void channel_affine_row_avx2(const uint8_t* x, int64_t n, uint8_t flip, int32_t x_zp, float a, float b,
                                       int32_t y_zp, int32_t lo, int32_t hi, bool y_unsigned, uint8_t* y) {
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  const __m256 limit = _mm256_set1_ps(kChannelAffineLimit), neg_limit = _mm256_set1_ps(-kChannelAffineLimit);
  const __m256i vx = _mm256_set1_epi32(x_zp), vy = _mm256_set1_epi32(y_zp);
  const __m256i vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    const __m128i bytes = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i)), vflip);
    const __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), vx));
    // fma, bounded, then rounded half to even (the default rounding of
    // vcvtps2dq): std::fma and nearbyint's bits in the scalar loop.
    const __m256 f = _mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(v, va, vb), neg_limit), limit);
    __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(f), vy);
    q = _mm256_min_epi32(_mm256_max_epi32(q, vlo), vhi);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i b8 = y_unsigned ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), b8);
  }
}

namespace {

// A multiplier in [0, 2^31 - 2^15) as h * 2^16 + l with h and l both int16
// (l in [-2^15, 2^15): a low half of 2^15 or more borrows from h). False
// where h would not fit.
bool split_multiplier(int32_t m, int16_t* h, int16_t* l) {
  int32_t hi = m >> 16, low = m & 0xFFFF;
  if (low >= 0x8000) {
    low -= 0x10000;
    ++hi;
  }
  if (m < 0 || hi > INT16_MAX) return false;
  *h = static_cast<int16_t>(hi);
  *l = static_cast<int16_t>(low);
  return true;
}

}  // namespace

KILN_AVX2 void add_int8_row_avx2(const uint8_t* a, const uint8_t* b, int64_t n, bool a_signed, bool b_signed,
                                 int32_t za, int32_t zb, int32_t ma, int32_t mb, int32_t s, int32_t y_zp, int32_t lo,
                                 int32_t hi, bool y_signed, uint8_t* y) {
  int64_t done = 0;
  int16_t mah, mal, mbh, mbl;
  if (s >= 17 && s <= 46 && za >= -255 && za <= 255 && zb >= -255 && zb <= 255 && split_multiplier(ma, &mah, &mal) &&
      split_multiplier(mb, &mbh, &mbl)) {
    // Sixteen at a time in 32 bits: with da = a - za and db = b - zb as
    // int16 pairs, vpmaddwd gives H = da mah + db mbh and L = da mal + db mbl
    // exactly (|.| < 2^24), v = H 2^16 + L. Then (v + 2^(s-1)) >> s =
    // (H + 2^(s-17) + (L >> 16)) >> (s - 16): the low 16 bits of L only
    // carry into the quotient through L >> 16 (floor), and the sum stays
    // within 2^31 for s <= 46.
    const __m256i wh = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint16_t>(mah)) |
                                         static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(mbh)) << 16));
    const __m256i wl = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint16_t>(mal)) |
                                         static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(mbl)) << 16));
    const __m256i vza16 = _mm256_set1_epi16(static_cast<int16_t>(za)),
                  vzb16 = _mm256_set1_epi16(static_cast<int16_t>(zb));
    const __m256i round = _mm256_set1_epi32(1 << (s - 17));
    const __m128i count = _mm_cvtsi32_si128(s - 16);
    const __m256i vzp = _mm256_set1_epi32(y_zp), vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
    for (; done + 16 <= n; done += 16) {
      const __m128i a8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + done));
      const __m128i b8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + done));
      const __m256i da = _mm256_sub_epi16(a_signed ? _mm256_cvtepi8_epi16(a8) : _mm256_cvtepu8_epi16(a8), vza16);
      const __m256i db = _mm256_sub_epi16(b_signed ? _mm256_cvtepi8_epi16(b8) : _mm256_cvtepu8_epi16(b8), vzb16);
      // Pairs (da, db): elements 0-3 and 8-11, then 4-7 and 12-15.
      const __m256i pairs[2] = {_mm256_unpacklo_epi16(da, db), _mm256_unpackhi_epi16(da, db)};
      __m256i q[2];
      for (int h = 0; h < 2; ++h) {
        const __m256i high = _mm256_madd_epi16(pairs[h], wh), low = _mm256_madd_epi16(pairs[h], wl);
        const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(high, round), _mm256_srai_epi32(low, 16));
        const __m256i v = _mm256_add_epi32(_mm256_sra_epi32(sum, count), vzp);
        q[h] = _mm256_min_epi32(_mm256_max_epi32(v, vlo), vhi);
      }
      const __m256i w16 = _mm256_packs_epi32(q[0], q[1]);  // back in element order
      const __m128i l16 = _mm256_castsi256_si128(w16), h16 = _mm256_extracti128_si256(w16, 1);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + done),
                       y_signed ? _mm_packs_epi16(l16, h16) : _mm_packus_epi16(l16, h16));
    }
    a += done;
    b += done;
    y += done;
    n -= done;
  }
  const __m256i vza = _mm256_set1_epi32(za), vzb = _mm256_set1_epi32(zb);
  const __m256i vma = _mm256_set1_epi32(ma), vmb = _mm256_set1_epi32(mb);
  // |(a - za) ma + (b - zb) mb| < 2^41: plus 2^62 it is positive, so the
  // logical shift gives (v >> s) + 2^(62 - s); the offset comes off in 32
  // bits (mod 2^32), and |v >> s| < 2^31 for s >= 10.
  const __m256i offset = _mm256_set1_epi64x((int64_t{1} << 62) + (int64_t{1} << (s - 1)));
  const __m256i unbias =
      _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>((uint64_t{1} << (62 - s)) & 0xFFFFFFFFu)));
  const __m128i count = _mm_cvtsi32_si128(s);
  const __m256i vzp = _mm256_set1_epi32(y_zp), vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    const __m128i a8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + i));
    const __m128i b8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + i));
    const __m256i da = _mm256_sub_epi32(a_signed ? _mm256_cvtepi8_epi32(a8) : _mm256_cvtepu8_epi32(a8), vza);
    const __m256i db = _mm256_sub_epi32(b_signed ? _mm256_cvtepi8_epi32(b8) : _mm256_cvtepu8_epi32(b8), vzb);
    const __m256i even =
        _mm256_add_epi64(_mm256_add_epi64(_mm256_mul_epi32(da, vma), _mm256_mul_epi32(db, vmb)), offset);
    const __m256i odd = _mm256_add_epi64(_mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(da, 32), vma),
                                                          _mm256_mul_epi32(_mm256_srli_epi64(db, 32), vmb)),
                                         offset);
    __m256i q =
        _mm256_blend_epi32(_mm256_srl_epi64(even, count), _mm256_slli_epi64(_mm256_srl_epi64(odd, count), 32), 0xAA);
    q = _mm256_add_epi32(_mm256_sub_epi32(q, unbias), vzp);
    q = _mm256_min_epi32(_mm256_max_epi32(q, vlo), vhi);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i),
                     y_signed ? _mm_packs_epi16(w16, w16) : _mm_packus_epi16(w16, w16));
  }
}

KILN_AVX2 int64_t lookup_bytes_avx2(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y) {
  // Sixteen 16-byte tables (each in both 128-bit lanes): vpshufb by the low
  // nibble, kept where the high nibble picks that table.
  __m256i tables[16];
  for (int j = 0; j < 16; ++j) {
    tables[j] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * j)));
  }
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i low = _mm256_and_si256(v, nibble);
    const __m256i high = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
    __m256i out = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      const __m256i mine = _mm256_cmpeq_epi8(high, _mm256_set1_epi8(static_cast<char>(j)));
      out = _mm256_or_si256(out, _mm256_and_si256(mine, _mm256_shuffle_epi8(tables[j], low)));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), out);
  }
  return i;
}

KILN_AVX512_VBMI void lookup_bytes_avx512_vbmi(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y) {
  // Four 64-byte quarters of the table: vpermi2b picks from the lower or
  // the upper half by the index's bits 0-6, the index's top bit between
  // the two results.
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  for (int64_t i = 0; i < n; i += 64) {
    const __mmask64 lanes = n - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - i)) - 1;
    const __m512i index = _mm512_maskz_loadu_epi8(lanes, x + i);
    const __m512i low = _mm512_permutex2var_epi8(t0, index, t1);
    const __m512i high = _mm512_permutex2var_epi8(t2, index, t3);
    _mm512_mask_storeu_epi8(y + i, lanes, _mm512_mask_blend_epi8(_mm512_movepi8_mask(index), low, high));
  }
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
