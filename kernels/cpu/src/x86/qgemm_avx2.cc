// The int8 product's AVX2 loops (qgemm.h): the packed-panel tile and its
// variants (rows written in place, the direct convolution's offsets), the
// one-row dot products, the requantization of a row, and the direct
// convolution's 3x3 weight order. Each function carries KILN_AVX2
// (isa_switch.h).
//
// vpmaddubsw would add two uint8 x int8 products into a saturating int16
// (255 * 127 * 2 > 32767), which breaks exactness for weights that use all
// 8 bits. Instead each 32-bit lane is split into its even and odd bytes as
// int16 (activations zero-extended, weights sign-extended by shifts), and
// vpmaddwd adds pairs of int16 products into int32: exact, one more
// instruction per 32 products than vpmaddubsw + vpmaddwd. The convolution
// paths split the weights ahead of the tiles (qgemm_split_weights_avx2,
// SplitWeights: broadcast from memory, no shifts per tile); the other
// callers split them in the tile (ByteWeights).
// Where no byte of the panel is above 127 (activations quantized with a
// reduced range, 0..127, as PyTorch's x86 configuration does), a pair sum
// lies in [-127 * 128 * 2, 127 * 127 * 2] = [-32512, 32258] and cannot
// saturate: the tile then runs vpmaddubsw + vpmaddwd(ones), 6 instructions
// per row of 4 k x 16 columns instead of 10 (plus the shared split). The
// panel is checked before each tile (kp / 2 ORs and one vpmovmskb), which
// holds for every packer and for column blocks alike.
// Where every weight is in [-64, 64] (weights quantized with a reduced
// range, as ONNX Runtime's quantize_static writes them with reduce_range),
// a pair sum lies within 255 * 64 * 2 = 32640 in magnitude for any
// activations: the callers then take vpmaddubsw for every panel, with
// nothing to check and no weights to split (QGemmProblem::w_narrow).
//
// The direct convolution's tiles (qgemm_tile_offsets_*) are the same loops
// with step q's 64 bytes read at base + off[q] instead of panel + 64 q;
// the caller checks the interleaved input for bytes above 127 once.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <string.h>

#include <type_traits>

#include "qgemm.h"
#include "x86/qgemm_tile.h"

namespace kiln {
namespace kernels {

using x86::load_word;
using x86::step_bytes;

namespace {

// Where a tile's four rows of weights come from. Bytes: the packed rows
// (clamped to the last valid row), each step's word broadcast and, for the
// exact loop, split into its even and odd int16 pairs by shifts in the
// tile. Split: rows split ahead (qgemm_split_weights_avx2), the pairs
// broadcast from memory (loads, no shifts).
struct ByteWeights {
  const int8_t* rows[4];
  ByteWeights(const int8_t* w, int64_t ldw, int64_t r0, int64_t mr) {
    for (int64_t r = 0; r < 4; ++r) rows[r] = w + (r0 + r < mr ? r0 + r : mr - 1) * ldw;
  }
  KILN_AVX2 __m256i word(int r, int64_t q) const { return _mm256_set1_epi32(load_word(rows[r] + q * 4)); }
  KILN_AVX2 void pairs(int r, int64_t q, __m256i* we, __m256i* wo) const {
    const __m256i w = word(r, q);
    *we = _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 8);
    *wo = _mm256_srai_epi16(w, 8);
  }
};
struct SplitWeights {
  const int32_t* rows[4];
  int64_t nq;
  SplitWeights(const int32_t* ws, int64_t kp, int64_t r0, int64_t mr) : nq(kp / 4) {
    for (int64_t r = 0; r < 4; ++r) rows[r] = ws + (r0 + r < mr ? r0 + r : mr - 1) * 2 * nq;
  }
  KILN_AVX2 void pairs(int r, int64_t q, __m256i* we, __m256i* wo) const {
    *we = _mm256_set1_epi32(rows[r][q]);
    *wo = _mm256_set1_epi32(rows[r][nq + q]);
  }
};

// Four channels over the whole of kp. Each uint8 x int8 pair is split into
// int16 halves for vpmaddwd (vpmaddubsw could saturate its int16 pair
// sums), or, kSmall (byte weights only), for a panel whose bytes are all
// <= 127, where vpmaddubsw's pair sums are exact: vpmaddubsw, then
// vpmaddwd by ones widens them to int32.
template <bool kOffsets, bool kSmall, typename Weights>
KILN_AVX2 inline void tile4_avx2(int64_t kp, const Weights& w, const uint8_t* panel, const int32_t* off,
                                 __m256i out[4][2]) {
  const __m256i low_bytes = _mm256_set1_epi16(0x00FF), ones = _mm256_set1_epi16(1);
  __m256i a[4][2];
  for (int r = 0; r < 4; ++r) a[r][0] = a[r][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < kp / 4; ++q) {
    const uint8_t* xq = step_bytes<kOffsets>(panel, off, q);
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32));
    if constexpr (kSmall) {
      for (int r = 0; r < 4; ++r) {
        const __m256i wr = w.word(r, q);
        a[r][0] = _mm256_add_epi32(a[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(x0, wr), ones));
        a[r][1] = _mm256_add_epi32(a[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(x1, wr), ones));
      }
    } else {
      const __m256i x0e = _mm256_and_si256(x0, low_bytes), x0o = _mm256_srli_epi16(x0, 8);
      const __m256i x1e = _mm256_and_si256(x1, low_bytes), x1o = _mm256_srli_epi16(x1, 8);
      for (int r = 0; r < 4; ++r) {
        __m256i we, wo;
        w.pairs(r, q, &we, &wo);
        a[r][0] = _mm256_add_epi32(a[r][0], _mm256_add_epi32(_mm256_madd_epi16(x0e, we), _mm256_madd_epi16(x0o, wo)));
        a[r][1] = _mm256_add_epi32(a[r][1], _mm256_add_epi32(_mm256_madd_epi16(x1e, we), _mm256_madd_epi16(x1o, wo)));
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    out[r][0] = a[r][0];
    out[r][1] = a[r][1];
  }
}

// Whether every byte of the panel (kp x 16 bytes, kp a multiple of 4: 64
// bytes a step) is <= 127. Two steps an iteration into two ORs.
KILN_AVX2 inline bool panel_is_small(int64_t kp, const uint8_t* panel) {
  const int64_t bytes = kp * kQGemmNr;
  const __m256i* v = reinterpret_cast<const __m256i*>(panel);
  __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 4 <= bytes / 32; i += 4) {
    a = _mm256_or_si256(a, _mm256_or_si256(_mm256_loadu_si256(v + i), _mm256_loadu_si256(v + i + 1)));
    b = _mm256_or_si256(b, _mm256_or_si256(_mm256_loadu_si256(v + i + 2), _mm256_loadu_si256(v + i + 3)));
  }
  if (i < bytes / 32) a = _mm256_or_si256(a, _mm256_or_si256(_mm256_loadu_si256(v + i), _mm256_loadu_si256(v + i + 1)));
  return _mm256_movemask_epi8(_mm256_or_si256(a, b)) == 0;
}

// Rows r < mr of the tile into out + r * ldo (kQGemmNr values each), four
// at a time; make(r0) gives rows r0..r0+3's weights.
template <bool kOffsets, typename Make>
KILN_AVX2 inline void tile_rows_avx2(int64_t kp, int64_t mr, const uint8_t* panel, const int32_t* off, bool small,
                                     const Make& make, int32_t* out_rows, int64_t ldo) {
  static_assert(kQGemmNr == 16, "a panel row is two ymm of 8 columns");
  for (int64_t r0 = 0; r0 < mr; r0 += 4) {
    const auto w = make(r0);
    __m256i out[4][2];
    if constexpr (std::is_same_v<decltype(w), const ByteWeights>) {
      if (small) {
        tile4_avx2<kOffsets, true>(kp, w, panel, off, out);
      } else {
        tile4_avx2<kOffsets, false>(kp, w, panel, off, out);
      }
    } else {
      tile4_avx2<kOffsets, false>(kp, w, panel, off, out);
    }
    for (int64_t r = 0; r < 4 && r0 + r < mr; ++r) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_rows + (r0 + r) * ldo), out[r][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_rows + (r0 + r) * ldo + 8), out[r][1]);
    }
  }
}

template <bool kOffsets>
KILN_AVX2 inline void tile_avx2(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                                const int32_t* off, bool small, int32_t* out_rows, int64_t ldo) {
  tile_rows_avx2<kOffsets>(
      kp, mr, panel, off, small, [&](int64_t r0) { return ByteWeights(w, ldw, r0, mr); }, out_rows, ldo);
}

template <bool kOffsets>
KILN_AVX2 inline void tile_split_avx2(int64_t kp, const int32_t* ws, int64_t mr, const uint8_t* panel,
                                      const int32_t* off, int32_t* out_rows, int64_t ldo) {
  tile_rows_avx2<kOffsets>(
      kp, mr, panel, off, false, [&](int64_t r0) { return SplitWeights(ws, kp, r0, mr); }, out_rows, ldo);
}

}  // namespace

KILN_AVX2 void qgemm_split_weights_avx2(const int8_t* w, int64_t ldw, int64_t rows, int64_t kp, int32_t* out) {
  const int64_t nq = kp / 4;
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* row = w + r * ldw;
    int32_t* even = out + r * 2 * nq;
    int32_t* odd = even + nq;
    int64_t q = 0;
    for (; q + 8 <= nq; q += 8) {
      // 16-bit lane j holds bytes 2j and 2j + 1: sign-extended apart, the
      // words (k0, k2) and (k1, k3) of each step.
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 4 * q));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(even + q), _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(odd + q), _mm256_srai_epi16(v, 8));
    }
    for (; q < nq; ++q) {
      const int8_t* b = row + 4 * q;
      even[q] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(int16_t{b[0]})) |
                                     (static_cast<uint32_t>(static_cast<uint16_t>(int16_t{b[2]})) << 16));
      odd[q] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(int16_t{b[1]})) |
                                    (static_cast<uint32_t>(static_cast<uint16_t>(int16_t{b[3]})) << 16));
    }
  }
}

KILN_AVX2 void qgemm_tile_rows_split_avx2(int64_t kp, const int32_t* ws, int64_t mr, const uint8_t* panel, int32_t* out,
                                          int64_t ldo) {
  tile_split_avx2<false>(kp, ws, mr, panel, nullptr, out, ldo);
}

KILN_AVX2 void qgemm_tile_offsets_split_avx2(int64_t nq, const int32_t* ws, int64_t mr, const uint8_t* base,
                                             const int32_t* off, int32_t* out, int64_t ldo) {
  tile_split_avx2<true>(nq * 4, ws, mr, base, off, out, ldo);
}

KILN_AVX2 void qgemm_tile_avx2(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                               int32_t acc[kQGemmMr][kQGemmNr]) {
  tile_avx2<false>(kp, w, ldw, mr, panel, nullptr, panel_is_small(kp, panel), acc[0], kQGemmNr);
}

KILN_AVX2 void qgemm_tile_offsets_avx2(int64_t nq, const int8_t* w, int64_t mr, const uint8_t* base, const int32_t* off,
                                       bool small, int32_t* out, int64_t ldo) {
  tile_avx2<true>(nq * 4, w, nq * 4, mr, base, off, small, out, ldo);
}

KILN_AVX2 bool qgemm_panel_is_small_avx2(int64_t kp, const uint8_t* panel) { return panel_is_small(kp, panel); }

KILN_AVX2 void qgemm_tile_rows_avx2(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                                    bool small, int32_t* out, int64_t ldo) {
  tile_avx2<false>(kp, w, ldw, mr, panel, nullptr, small, out, ldo);
}

KILN_AVX2 void dot_rows_avx2(int64_t kp, int64_t len, const int8_t* w, int64_t rows, const uint8_t* x, uint8_t flip,
                             bool w_narrow, int32_t* out) {
  // uint8 x int8 widened to int16 and vpmaddwd: exact (no vpmaddubsw
  // saturation). Where no byte of x (flipped) is above 127, or every
  // weight is in [-64, 64], 32 at a time with vpmaddubsw + vpmaddwd(ones)
  // first (exact there, as in the tile).
  // x is read for len bytes only; the rest of each row's kp are zeros.
  const __m256i vflip = _mm256_set1_epi8(static_cast<char>(flip));
  bool small = true;
  if (!w_narrow) {
    __m256i any = _mm256_setzero_si256();
    int64_t k = 0;
    for (; k + 32 <= len; k += 32) {
      any = _mm256_or_si256(any, _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + k)), vflip));
    }
    uint8_t tail = 0;
    for (; k < len; ++k) tail |= static_cast<uint8_t>(x[k] ^ flip);
    small = _mm256_movemask_epi8(any) == 0 && tail <= 127;
  }
  const __m256i ones = _mm256_set1_epi16(1);
  const __m128i vflip16 = _mm256_castsi256_si128(vflip);
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* wr = w + r * kp;
    __m256i acc = _mm256_setzero_si256();
    int64_t k = 0;
    if (small) {
      for (; k + 32 <= len; k += 32) {
        const __m256i x8 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + k)), vflip);
        const __m256i w8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + k));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x8, w8), ones));
      }
    }
    for (; k + 16 <= len; k += 16) {
      const __m256i x16 =
          _mm256_cvtepu8_epi16(_mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + k)), vflip16));
      const __m256i w16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + k)));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(x16, w16));
    }
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    int32_t sum = _mm_cvtsi128_si32(s4);
    for (; k < len; ++k) sum += static_cast<uint8_t>(x[k] ^ flip) * wr[k];
    out[r] = sum;
  }
}

// Eight values at a time: (acc + bias) * m + 2^(s-1) as four even and four
// odd 64-bit products; the high halves are the products >> 32 exactly
// (arithmetic), then >> (s - 32) in 32 bits. Equal to the scalar loop for
// |acc + bias| < 2^31 and qgemm_vector_requant_params. The zero point rides
// in the rounding term (as in x86/qgemm_tile.h's requant16); the packs
// saturate to the output's range, so only bounds inside it (a Relu's, a
// Clip's) are clamped, chosen once a row (GCC unswitches the loop).
KILN_AVX2 void requantize_row_avx2(const int32_t* acc, int64_t n, int32_t bias, int32_t m, int32_t s, int32_t zp,
                                   int32_t lo, int32_t hi, bool is_unsigned, void* y) {
  const bool clamp_lo = lo > (is_unsigned ? 0 : -128), clamp_hi = hi < (is_unsigned ? 255 : 127);
  const __m256i vb = _mm256_set1_epi32(bias);
  const __m256i vm = _mm256_set1_epi32(m);
  const __m256i round = _mm256_set1_epi64x(int64_t{zp} * (int64_t{1} << s) + (int64_t{1} << (s - 1)));
  const __m128i rest = _mm_cvtsi32_si128(s - 32);
  const __m256i vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)), vb);
    const __m256i even = _mm256_add_epi64(_mm256_mul_epi32(v, vm), round);
    const __m256i odd = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(v, 32), vm), round);
    __m256i q = _mm256_sra_epi32(_mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA), rest);
    if (clamp_lo) q = _mm256_max_epi32(q, vlo);
    if (clamp_hi) q = _mm256_min_epi32(q, vhi);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i b8 = is_unsigned ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(y) + i), b8);
  }
}

KILN_AVX2 void requantize_row_pow2_even_avx2(const int32_t* acc, int64_t n, int32_t bias, int32_t shift, int32_t zp,
                                             int32_t lo, int32_t hi, bool is_unsigned, void* y) {
  const __m256i vb = _mm256_set1_epi32(bias), one = _mm256_set1_epi32(1);
  const __m256i half = _mm256_set1_epi32((1 << (shift - 1)) - 1);
  const __m128i count = _mm_cvtsi32_si128(shift);
  const __m256i vzp = _mm256_set1_epi32(zp), vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)), vb);
    const __m256i parity = _mm256_and_si256(_mm256_sra_epi32(v, count), one);
    __m256i q = _mm256_sra_epi32(_mm256_add_epi32(_mm256_add_epi32(v, half), parity), count);
    q = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(q, vzp), vlo), vhi);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i b8 = is_unsigned ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(y) + i), b8);
  }
}

KILN_AVX2 void requantize_columns_avx2(const int32_t acc[kQGemmMr][kQGemmNr], int64_t nr, const int32_t* bias,
                                       const int32_t* m, const int32_t* s, const int32_t* w_zp, const int32_t* x_sums,
                                       int32_t zp, int32_t lo, int32_t hi, bool is_unsigned, uint8_t* y,
                                       int64_t column_stride) {
  static_assert(kQGemmMr == 8, "one 32-bit lane per channel of the tile");
  const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias));
  const __m256i vm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m));
  const __m256i vs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
  // 2^(s-1) per channel, for the even channels' 64-bit lanes and the odd ones'.
  const __m256i round_even = _mm256_set_epi64x(int64_t{1} << (s[6] - 1), int64_t{1} << (s[4] - 1),
                                               int64_t{1} << (s[2] - 1), int64_t{1} << (s[0] - 1));
  const __m256i round_odd = _mm256_set_epi64x(int64_t{1} << (s[7] - 1), int64_t{1} << (s[5] - 1),
                                              int64_t{1} << (s[3] - 1), int64_t{1} << (s[1] - 1));
  const __m256i rest = _mm256_sub_epi32(vs, _mm256_set1_epi32(32));
  const __m256i vzp = _mm256_set1_epi32(zp), vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
  const __m256i vw =
      w_zp != nullptr ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_zp)) : _mm256_setzero_si256();
  // The tile's columns, 8 channels each: two 8 x 8 transposes.
  alignas(32) int32_t columns[kQGemmNr][kQGemmMr];
  for (int half = 0; half < 2; ++half) {
    __m256i r[8], t[8];
    for (int c = 0; c < 8; ++c) r[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&acc[c][8 * half]));
    for (int c = 0; c < 8; c += 2) {
      t[c] = _mm256_unpacklo_epi32(r[c], r[c + 1]);
      t[c + 1] = _mm256_unpackhi_epi32(r[c], r[c + 1]);
    }
    for (int c = 0; c < 8; c += 4) {
      r[c] = _mm256_unpacklo_epi64(t[c], t[c + 2]);
      r[c + 1] = _mm256_unpackhi_epi64(t[c], t[c + 2]);
      r[c + 2] = _mm256_unpacklo_epi64(t[c + 1], t[c + 3]);
      r[c + 3] = _mm256_unpackhi_epi64(t[c + 1], t[c + 3]);
    }
    // r[0..3]: channels 0-3 of columns 0-3 (low lanes) and 4-7 (high
    // lanes); r[4..7]: the same for channels 4-7.
    for (int c = 0; c < 4; ++c) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(columns[8 * half + c]),
                         _mm256_permute2x128_si256(r[c], r[c + 4], 0x20));
      _mm256_store_si256(reinterpret_cast<__m256i*>(columns[8 * half + 4 + c]),
                         _mm256_permute2x128_si256(r[c], r[c + 4], 0x31));
    }
  }
  for (int64_t i = 0; i < nr; ++i) {
    const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(columns[i]));
    __m256i v = _mm256_add_epi32(a, vb);
    if (w_zp != nullptr) v = _mm256_sub_epi32(v, _mm256_mullo_epi32(vw, _mm256_set1_epi32(x_sums[i])));
    const __m256i even = _mm256_add_epi64(_mm256_mul_epi32(v, vm), round_even);
    const __m256i odd =
        _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(v, 32), _mm256_srli_epi64(vm, 32)), round_odd);
    __m256i q = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    q = _mm256_add_epi32(_mm256_srav_epi32(q, rest), vzp);
    q = _mm256_min_epi32(_mm256_max_epi32(q, vlo), vhi);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i b8 = is_unsigned ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i * column_stride), b8);
  }
}

// 3x3 weights of four channels (36 bytes, channel by channel) into tap
// order (tap by tap, four channels each): out[4 t + j] = in[9 j + t],
// three shuffles per 16 output bytes, for each full quad of each row.
KILN_AVX2 void direct_weights_3x3_avx2(const int8_t* w, int64_t kp, int64_t rows, int64_t quads, int8_t* out) {
  alignas(16) int8_t masks[3][3][16];  // [output chunk][source][lane]
  for (int chunk = 0; chunk < 3; ++chunk) {
    for (int lane = 0; lane < 16; ++lane) {
      const int o = chunk * 16 + lane;
      const int i = o < 36 ? (o % 4) * 9 + o / 4 : -1;
      for (int src = 0; src < 3; ++src) {
        const int base = src == 0 ? 0 : src == 1 ? 16 : 20;
        const bool mine = i >= 0 && (src == 0 ? i < 16 : src == 1 ? i >= 16 && i < 32 : i >= 32);
        masks[chunk][src][lane] = static_cast<int8_t>(mine ? i - base : -128);
      }
    }
  }
  __m128i m[3][3];
  for (int chunk = 0; chunk < 3; ++chunk) {
    for (int src = 0; src < 3; ++src)
      m[chunk][src] = _mm_load_si128(reinterpret_cast<const __m128i*>(masks[chunk][src]));
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t q = 0; q < quads; ++q) {
      const int8_t* in = w + r * kp + q * 36;
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 20));
      __m128i v[3];
      for (int chunk = 0; chunk < 3; ++chunk) {
        v[chunk] = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, m[chunk][0]), _mm_shuffle_epi8(b, m[chunk][1])),
                                _mm_shuffle_epi8(c, m[chunk][2]));
      }
      int8_t* o = out + (r * quads + q) * 36;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o), v[0]);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 16), v[1]);
      const int32_t last = _mm_cvtsi128_si32(v[2]);
      memcpy(o + 32, &last, 4);
    }
  }
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
