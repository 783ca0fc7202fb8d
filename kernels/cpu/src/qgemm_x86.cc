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
// Where no byte of the panel is above 127 (activations quantized with a
// reduced range, 0..127, as PyTorch's x86 configuration does), a pair sum
// lies in [-127 * 128 * 2, 127 * 127 * 2] = [-32512, 32258] and cannot
// saturate: the tile then runs vpmaddubsw + vpmaddwd(ones), 6 instructions
// per row of 4 k x 16 columns instead of 10 (plus the shared split). The
// panel is checked before each tile (kp / 2 ORs and one vpmovmskb), which
// holds for every packer and for column blocks alike.
//
// The direct convolution's tiles (qgemm_tile_offsets_*) are the same loops
// with step q's 64 bytes read at base + off[q] instead of panel + 64 q;
// the caller checks the interleaved input for bytes above 127 once.

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

// The 64 bytes of step q (four k of 16 columns): a packed panel's row q, or
// with offsets the 64 bytes at base + off[q] (qgemm_tile_offsets_avx2).
template <bool kOffsets>
inline const uint8_t* step_bytes(const uint8_t* base, const int32_t* off, int64_t q) {
  return kOffsets ? base + off[q] : base + q * 64;
}

// Four channels (rows r0..r0+3 of w, clamped to the last valid row) over
// the whole of kp. Each uint8 x int8 pair is split into int16 halves for
// vpmaddwd (vpmaddubsw could saturate its int16 pair sums), or, kSmall,
// for a panel whose bytes are all <= 127, where vpmaddubsw's pair sums are
// exact: vpmaddubsw, then vpmaddwd by ones widens them to int32.
template <bool kOffsets, bool kSmall>
KILN_AVX2 inline void tile4_avx2(int64_t kp, const int8_t* const rows[4], const uint8_t* panel, const int32_t* off,
                                 __m256i out[4][2]) {
  const __m256i low_bytes = _mm256_set1_epi16(0x00FF), ones = _mm256_set1_epi16(1);
  __m256i a00 = _mm256_setzero_si256(), a01 = _mm256_setzero_si256();
  __m256i a10 = _mm256_setzero_si256(), a11 = _mm256_setzero_si256();
  __m256i a20 = _mm256_setzero_si256(), a21 = _mm256_setzero_si256();
  __m256i a30 = _mm256_setzero_si256(), a31 = _mm256_setzero_si256();
  for (int64_t q = 0; q < kp / 4; ++q) {
    const uint8_t* xq = step_bytes<kOffsets>(panel, off, q);
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32));
    const __m256i x0e = _mm256_and_si256(x0, low_bytes), x0o = _mm256_srli_epi16(x0, 8);
    const __m256i x1e = _mm256_and_si256(x1, low_bytes), x1o = _mm256_srli_epi16(x1, 8);
#define KILN_ROW(r, acc0, acc1)                                                                                \
  {                                                                                                            \
    const __m256i w = _mm256_set1_epi32(load_word(rows[r] + q * 4));                                           \
    if constexpr (kSmall) {                                                                                    \
      acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_maddubs_epi16(x0, w), ones));                     \
      acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_maddubs_epi16(x1, w), ones));                     \
    } else {                                                                                                   \
      const __m256i we = _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 8);                                        \
      const __m256i wo = _mm256_srai_epi16(w, 8);                                                              \
      acc0 = _mm256_add_epi32(acc0, _mm256_add_epi32(_mm256_madd_epi16(x0e, we), _mm256_madd_epi16(x0o, wo))); \
      acc1 = _mm256_add_epi32(acc1, _mm256_add_epi32(_mm256_madd_epi16(x1e, we), _mm256_madd_epi16(x1o, wo))); \
    }                                                                                                          \
  }
    KILN_ROW(0, a00, a01)
    KILN_ROW(1, a10, a11)
    KILN_ROW(2, a20, a21)
    KILN_ROW(3, a30, a31)
#undef KILN_ROW
  }
  out[0][0] = a00;
  out[0][1] = a01;
  out[1][0] = a10;
  out[1][1] = a11;
  out[2][0] = a20;
  out[2][1] = a21;
  out[3][0] = a30;
  out[3][1] = a31;
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

}  // namespace

namespace {

// Rows r < mr of the tile into out + r * ldo (kQGemmNr values each).
template <bool kOffsets>
KILN_AVX2 inline void tile_avx2(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                                const int32_t* off, bool small, int32_t* out_rows, int64_t ldo) {
  static_assert(kQGemmNr == 16, "a panel row is two ymm of 8 columns");
  for (int64_t r0 = 0; r0 < mr; r0 += 4) {
    const int8_t* rows[4];
    for (int64_t r = 0; r < 4; ++r) rows[r] = w + (r0 + r < mr ? r0 + r : mr - 1) * ldw;
    __m256i out[4][2];
    if (small) {
      tile4_avx2<kOffsets, true>(kp, rows, panel, off, out);
    } else {
      tile4_avx2<kOffsets, false>(kp, rows, panel, off, out);
    }
    for (int64_t r = 0; r < 4 && r0 + r < mr; ++r) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_rows + (r0 + r) * ldo), out[r][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_rows + (r0 + r) * ldo + 8), out[r][1]);
    }
  }
}

template <bool kOffsets>
KILN_VNNI inline void tile_vnni(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
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

}  // namespace

KILN_AVX2 void qgemm_tile_avx2(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                               int32_t acc[kQGemmMr][kQGemmNr]) {
  tile_avx2<false>(kp, w, ldw, mr, panel, nullptr, panel_is_small(kp, panel), acc[0], kQGemmNr);
}

KILN_AVX2 void qgemm_tile_offsets_avx2(int64_t nq, const int8_t* w, int64_t mr, const uint8_t* base, const int32_t* off,
                                       bool small, int32_t* out, int64_t ldo) {
  tile_avx2<true>(nq * 4, w, nq * 4, mr, base, off, small, out, ldo);
}

KILN_VNNI void qgemm_tile_avx512_vnni(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                                      int32_t acc[kQGemmMr][kQGemmNr]) {
  tile_vnni<false>(kp, w, ldw, mr, panel, nullptr, acc[0], kQGemmNr);
}

KILN_VNNI void qgemm_tile_offsets_vnni(int64_t nq, const int8_t* w, int64_t mr, const uint8_t* base, const int32_t* off,
                                       bool /*small*/, int32_t* out, int64_t ldo) {
  tile_vnni<true>(nq * 4, w, nq * 4, mr, base, off, out, ldo);
}

KILN_AVX2 bool qgemm_panel_is_small_avx2(int64_t kp, const uint8_t* panel) { return panel_is_small(kp, panel); }

KILN_AVX2 void qgemm_tile_rows_avx2(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                                    bool small, int32_t* out, int64_t ldo) {
  tile_avx2<false>(kp, w, ldw, mr, panel, nullptr, small, out, ldo);
}

KILN_VNNI void qgemm_tile_rows_vnni(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                                    bool /*small*/, int32_t* out, int64_t ldo) {
  tile_vnni<false>(kp, w, ldw, mr, panel, nullptr, out, ldo);
}

// Sixteen outputs at a time: uint8 x int8 products fit int16 (|255 x 128|
// < 2^15), widened to int32 before they are added.
KILN_AVX2 void depthwise_tap_avx2(int32_t* acc, const uint8_t* x, int64_t n, int32_t w) {
  const __m256i vw = _mm256_set1_epi16(static_cast<int16_t>(w));
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    const __m256i x16 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256i prod = _mm256_mullo_epi16(x16, vw);
    __m256i* a = reinterpret_cast<__m256i*>(acc + i);
    _mm256_storeu_si256(a,
                        _mm256_add_epi32(_mm256_loadu_si256(a), _mm256_cvtepi16_epi32(_mm256_castsi256_si128(prod))));
    _mm256_storeu_si256(
        a + 1, _mm256_add_epi32(_mm256_loadu_si256(a + 1), _mm256_cvtepi16_epi32(_mm256_extracti128_si256(prod, 1))));
  }
  if (n % 16 >= 8) {
    const int64_t i = n - n % 16;
    const __m256i x32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i)));
    __m256i* a = reinterpret_cast<__m256i*>(acc + i);
    _mm256_storeu_si256(a, _mm256_add_epi32(_mm256_loadu_si256(a), _mm256_mullo_epi32(x32, _mm256_set1_epi32(w))));
  }
}

KILN_AVX2 void dot_rows_avx2(int64_t kp, int64_t len, const int8_t* w, int64_t rows, const uint8_t* x, uint8_t flip,
                             int32_t* out) {
  // uint8 x int8 widened to int16 and vpmaddwd: exact (no vpmaddubsw
  // saturation). Where no byte of x (flipped) is above 127, 32 at a time
  // with vpmaddubsw + vpmaddwd(ones) first (exact there, as in the tile).
  // x is read for len bytes only; the rest of each row's kp are zeros.
  const __m256i vflip = _mm256_set1_epi8(static_cast<char>(flip));
  bool small = true;
  {
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

KILN_VNNI void dot_rows_avx512_vnni(int64_t kp, int64_t len, const int8_t* w, int64_t rows, const uint8_t* x,
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

// ---------------------------------------------------------------------------
// Depthwise convolution with the channels across the lanes (qgemm.h).
//
// The band's padded input rows lie in a block of 16-byte entries, one
// vector lane a byte, and every tap of an output is one 16-byte load:
//   16 channels: entry (r, x) = channels 0..15 at padded (r, x); one
//     output position a vector.
//   8 channels or fewer, stride 1 along rows: entry (r, x) = channels 0..7
//     at (r, x), then channels 0..7 at (r, x + 1); two output positions a
//     vector (x and x + 1), so the lanes are full. The block is one entry
//     wider (the second position of the last vector reads it).

namespace {

constexpr int64_t kLaneBand = 8192;  // bytes of the padded band block
constexpr int64_t kLaneTaps = 64;

// The padded block's width and rows for `rows` output rows.
int64_t lanes_width(const QDepthwiseLanes& d) { return (d.ow - 1) * d.sw + (d.kw - 1) * d.dw + 1; }
int64_t lanes_rows(const QDepthwiseLanes& d, int64_t rows) { return (rows - 1) * d.sh + (d.kh - 1) * d.dh + 1; }

// v[c] byte i -> v[i] byte c for a 16 x 16 block (SSE2 unpacks).
inline void transpose16(__m128i v[16]) {
  __m128i s1[16], s2[16], s3[16];
  for (int i = 0; i < 8; ++i) {
    s1[i] = _mm_unpacklo_epi8(v[2 * i], v[2 * i + 1]);
    s1[8 + i] = _mm_unpackhi_epi8(v[2 * i], v[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 4; ++i) {
      s2[h * 8 + i] = _mm_unpacklo_epi16(s1[h * 8 + 2 * i], s1[h * 8 + 2 * i + 1]);
      s2[h * 8 + 4 + i] = _mm_unpackhi_epi16(s1[h * 8 + 2 * i], s1[h * 8 + 2 * i + 1]);
    }
  }
  for (int q = 0; q < 4; ++q) {
    for (int e = 0; e < 2; ++e) {
      s3[(2 * q) * 2 + e] = _mm_unpacklo_epi32(s2[q * 4 + 2 * e], s2[q * 4 + 2 * e + 1]);
      s3[(2 * q + 1) * 2 + e] = _mm_unpackhi_epi32(s2[q * 4 + 2 * e], s2[q * 4 + 2 * e + 1]);
    }
  }
  for (int cp = 0; cp < 8; ++cp) {
    v[2 * cp] = _mm_unpacklo_epi64(s3[cp * 2], s3[cp * 2 + 1]);
    v[2 * cp + 1] = _mm_unpackhi_epi64(s3[cp * 2], s3[cp * 2 + 1]);
  }
}

// dst[i * 16 + c] = rows[c][i] ^ flip for i < n, c < 16.
void lanes_in(const uint8_t* const rows[16], int64_t n, uint8_t flip, uint8_t* dst) {
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i v[16];
    for (int c = 0; c < 16; ++c)
      v[c] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[c] + i)), vflip);
    transpose16(v);
    for (int j = 0; j < 16; ++j) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (i + j) * 16), v[j]);
  }
  for (; i < n; ++i) {
    for (int c = 0; c < 16; ++c) dst[i * 16 + c] = static_cast<uint8_t>(rows[c][i] ^ flip);
  }
}

// rows[c][i] = src[i * g + c] for i < n, c < channels (<= g), g = 16 or 8.
// With 8, a 16-byte row of the transpose holds two positions: byte b of
// row j is channel b % 8 of position 2 j + b / 8.
template <int G>
void lanes_out(const uint8_t* src, int64_t n, uint8_t* const rows[16], int64_t channels) {
  constexpr int64_t kStep = G == 16 ? 16 : 32;
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    __m128i v[16];
    for (int j = 0; j < 16; ++j) v[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * G + j * 16));
    transpose16(v);
    for (int64_t c = 0; c < channels; ++c) {
      if (G == 16) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(rows[c] + i), v[c]);
      } else {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(rows[c] + i), _mm_unpacklo_epi8(v[c], v[c + 8]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(rows[c] + i + 16), _mm_unpackhi_epi8(v[c], v[c + 8]));
      }
    }
  }
  for (; i < n; ++i) {
    for (int64_t c = 0; c < channels; ++c) rows[c][i] = src[i * G + c];
  }
}

// kPairs: the pairs of taps when known at compile time (3x3: 5, the tap
// loop unrolled), or 0.
template <int G, int kPairs>
KILN_AVX2 void depthwise_lanes_g(const QDepthwiseLanes& d) {
  constexpr int64_t kPerVector = 16 / G;  // output positions a vector
  const int64_t taps = d.kh * d.kw, pairs = kPairs > 0 ? kPairs : (taps + 1) / 2;
  const int64_t pw = lanes_width(d);
  const int64_t bw = pw + (G == 8 ? 1 : 0);  // entries a block row
  const int64_t wide = bw > d.w ? bw : d.w;
  // Output rows per band: the padded input rows fit the block, and the
  // band's outputs (G bytes a position, one vector's slack) fit the same
  // amount of stack.
  int64_t band = 1;
  while (band < d.oh && lanes_rows(d, band + 1) * wide * 16 <= kLaneBand && (band + 1) * d.ow * G + 16 <= kLaneBand) {
    ++band;
  }
  alignas(32) uint8_t block[kLaneBand];
  alignas(32) uint8_t staging[kLaneBand];  // transposed input rows, then the band's outputs
  // Lane l of the vectors in the order vpmaddwd's interleave leaves them:
  // the low accumulator holds lanes 0-3 and 8-11, the high one 4-7 and
  // 12-15; lane l is channel l (16) or l % 8 (8).
  int32_t lane_bias[2][8], lane_m[2][8], lane_rest[2][8];
  int64_t lane_round[2][8];
  for (int half = 0; half < 2; ++half) {
    for (int j = 0; j < 8; ++j) {
      const int64_t c = ((j < 4 ? j : j + 4) + half * 4) % G;
      const bool on = c < d.channels;
      lane_bias[half][j] = on ? d.bias[c] : 0;
      lane_m[half][j] = on ? d.multiplier[c] : 0;
      lane_rest[half][j] = on ? d.shift[c] - 32 : 0;
      lane_round[half][j] = on ? int64_t{1} << (d.shift[c] - 1) : 0;
    }
  }
  // The weights of every pair of taps as int16 first, then the vectors (a
  // vector load right after its sixteen stores would wait for them).
  alignas(32) int16_t wa[kLaneTaps / 2][16], wb[kLaneTaps / 2][16];
  for (int64_t p = 0; p < pairs; ++p) {
    for (int64_t l = 0; l < 16; ++l) {
      const int64_t c = l % G;
      const bool on = c < d.channels;
      wa[p][l] = on ? d.w8[c * d.kp + 2 * p] : 0;
      wb[p][l] = on && 2 * p + 1 < taps ? d.w8[c * d.kp + 2 * p + 1] : 0;
    }
  }
  __m256i wpair[kLaneTaps / 2][2];
  for (int64_t p = 0; p < pairs; ++p) {
    const __m256i va = _mm256_load_si256(reinterpret_cast<const __m256i*>(wa[p]));
    const __m256i vb = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb[p]));
    wpair[p][0] = _mm256_unpacklo_epi16(va, vb);
    wpair[p][1] = _mm256_unpackhi_epi16(va, vb);
  }
  int64_t offset[kLaneTaps + 1];
  for (int64_t t = 0; t < taps; ++t) offset[t] = ((t / d.kw) * d.dh * bw + (t % d.kw) * d.dw) * 16;
  offset[taps] = offset[taps - 1];  // an odd count's last pair: weight 0
  __m256i vbias[2], vm[2], vm_odd[2], vround_even[2], vround_odd[2], vrest[2];
  for (int half = 0; half < 2; ++half) {
    vbias[half] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane_bias[half]));
    vm[half] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane_m[half]));
    vm_odd[half] = _mm256_srli_epi64(vm[half], 32);
    vrest[half] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane_rest[half]));
    const int64_t* r = lane_round[half];
    vround_even[half] = _mm256_setr_epi64x(r[0], r[2], r[4], r[6]);
    vround_odd[half] = _mm256_setr_epi64x(r[1], r[3], r[5], r[7]);
  }
  const __m256i vzp = _mm256_set1_epi32(d.y_zp), vlo = _mm256_set1_epi32(d.y_min), vhi = _mm256_set1_epi32(d.y_max);
  const int64_t plane_in = d.h * d.w, plane_out = d.oh * d.ow;
  for (int64_t oy0 = 0; oy0 < d.oh; oy0 += band) {
    const int64_t nb = d.oh - oy0 < band ? d.oh - oy0 : band;
    const int64_t rows = lanes_rows(d, nb);
    const int64_t pr0 = oy0 * d.sh;  // the block's first padded row
    memset(block, d.pad, static_cast<size_t>(rows * bw * 16));
    int64_t iy_a = pr0 - d.pt, iy_b = pr0 + rows - d.pt;
    if (iy_a < 0) iy_a = 0;
    if (iy_b > d.h) iy_b = d.h;
    if (iy_a < iy_b) {
      const uint8_t* src[16];
      for (int64_t c = 0; c < 16; ++c) src[c] = d.x + (c < d.channels ? c : 0) * plane_in + iy_a * d.w;
      lanes_in(src, (iy_b - iy_a) * d.w, d.flip, staging);
      // Columns [pl, pl + w) of each row, those inside the block.
      const int64_t x1 = pw - d.pl < d.w ? pw - d.pl : d.w;
      if (x1 > 0) {
        for (int64_t iy = iy_a; iy < iy_b; ++iy) {
          memcpy(block + ((iy + d.pt - pr0) * bw + d.pl) * 16, staging + (iy - iy_a) * d.w * 16,
                 static_cast<size_t>(x1 * 16));
        }
      }
    }
    if (G == 8) {
      // Each entry's upper half: the next entry's channels (the last
      // entry's stays padding).
      for (int64_t r = 0; r < rows; ++r) {
        uint8_t* e = block + r * bw * 16;
        for (int64_t x = 0; x + 1 < bw; ++x) memcpy(e + x * 16 + 8, e + (x + 1) * 16, 8);
      }
    }
    uint8_t* out = staging;
    for (int64_t oy = 0; oy < nb; ++oy) {
      for (int64_t ox = 0; ox < d.ow; ox += kPerVector) {
        const uint8_t* base = block + (oy * d.sh * bw + ox * d.sw) * 16;
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
        for (int64_t p = 0; p < pairs; ++p) {
          const __m256i xa =
              _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base + offset[2 * p])));
          const __m256i xb =
              _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base + offset[2 * p + 1])));
          acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_unpacklo_epi16(xa, xb), wpair[p][0]));
          acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_unpackhi_epi16(xa, xb), wpair[p][1]));
        }
        __m256i q[2];
        const __m256i accs[2] = {acc0, acc1};
        for (int half = 0; half < 2; ++half) {
          const __m256i v = _mm256_add_epi32(accs[half], vbias[half]);
          const __m256i even = _mm256_add_epi64(_mm256_mul_epi32(v, vm[half]), vround_even[half]);
          const __m256i odd =
              _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(v, 32), vm_odd[half]), vround_odd[half]);
          __m256i r = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
          r = _mm256_add_epi32(_mm256_srav_epi32(r, vrest[half]), vzp);
          q[half] = _mm256_min_epi32(_mm256_max_epi32(r, vlo), vhi);
        }
        // packs pairs the lanes back into lane order: 16 channels, or
        // position ox's 8 then position ox + 1's.
        const __m256i w16 = _mm256_packs_epi32(q[0], q[1]);
        const __m128i lo = _mm256_castsi256_si128(w16), hi = _mm256_extracti128_si256(w16, 1);
        const __m128i b8 = d.y_unsigned ? _mm_packus_epi16(lo, hi) : _mm_packs_epi16(lo, hi);
        // With 8 channels and an odd width the last vector's second
        // position lands on the next row's first (rewritten after it) or
        // past the band's outputs (the slack).
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (oy * d.ow + ox) * G), b8);
      }
    }
    uint8_t* dst[16];
    for (int64_t c = 0; c < 16; ++c) dst[c] = d.y + (c < d.channels ? c : 0) * plane_out + oy0 * d.ow;
    lanes_out<G>(out, nb * d.ow, dst, d.channels);
  }
}

}  // namespace

bool depthwise_lanes_fit(const QDepthwiseLanes& d) {
  if (!(d.channels >= 1 && d.channels <= 16 && d.kh * d.kw <= kLaneTaps && d.ow >= 1 && d.oh >= 1)) return false;
  // The wider block of the 8-channel kernel.
  const int64_t bw = lanes_width(d) + 1;
  const int64_t wide = bw > d.w ? bw : d.w;
  return lanes_rows(d, 1) * wide * 16 <= kLaneBand && d.ow * 16 + 16 <= kLaneBand;
}

bool depthwise_lanes_params_ok(const int32_t* bias, const int32_t* shift, int64_t channels) {
  for (int64_t c = 0; c < channels; ++c) {
    if (shift[c] < 32 || shift[c] > 62 || bias[c] > (1 << 30) || bias[c] < -(1 << 30)) return false;
  }
  return true;
}

void depthwise_lanes_avx2(const QDepthwiseLanes& d) {
  const bool three = d.kh * d.kw == 9;
  if (d.channels <= 8 && d.sw == 1) {
    three ? depthwise_lanes_g<8, 5>(d) : depthwise_lanes_g<8, 0>(d);
  } else {
    three ? depthwise_lanes_g<16, 5>(d) : depthwise_lanes_g<16, 0>(d);
  }
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
