// The int8 depthwise convolution's AVX2 loops (qgemm.h): one tap over an
// output row of one channel (qgemm_depthwise_tap), and up to 16 channels
// at once across the vector lanes (depthwise_lanes_avx2). Each function
// with intrinsics carries KILN_AVX2 (isa_switch.h), the byte transposes
// included.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <string.h>

#include "qgemm.h"

namespace kiln {
namespace kernels {

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
KILN_AVX2 inline void transpose16(__m128i v[16]) {
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
KILN_AVX2 void lanes_in(const uint8_t* const rows[16], int64_t n, uint8_t flip, uint8_t* dst) {
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
KILN_AVX2 void lanes_out(const uint8_t* src, int64_t n, uint8_t* const rows[16], int64_t channels) {
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

// The requantization constants of the lanes, in the order vpmaddwd's
// interleave leaves them: the low accumulator holds lanes 0-3 and 8-11,
// the high one 4-7 and 12-15; lane l is channel l (16) or l % 8 (8).
struct LaneRequant {
  __m256i bias[2], m[2], m_odd[2], round_even[2], round_odd[2], rest[2];
};

template <int G>
KILN_AVX2 void lane_requant(const QDepthwiseLanes& d, LaneRequant* q) {
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
  for (int half = 0; half < 2; ++half) {
    q->bias[half] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane_bias[half]));
    q->m[half] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane_m[half]));
    q->m_odd[half] = _mm256_srli_epi64(q->m[half], 32);
    q->rest[half] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane_rest[half]));
    const int64_t* r = lane_round[half];
    q->round_even[half] = _mm256_setr_epi64x(r[0], r[2], r[4], r[6]);
    q->round_odd[half] = _mm256_setr_epi64x(r[1], r[3], r[5], r[7]);
  }
}

// The weights of every pair of taps as int16 first, then the vectors (a
// vector load right after its sixteen stores would wait for them), in
// vpmaddwd's pairs: wpair[p] holds taps 2p and 2p + 1 of every lane.
template <int G>
KILN_AVX2 void lane_weights(const QDepthwiseLanes& d, int64_t taps, int64_t pairs, __m256i wpair[][2]) {
  alignas(32) int16_t wa[kLaneTaps / 2][16], wb[kLaneTaps / 2][16];
  for (int64_t p = 0; p < pairs; ++p) {
    for (int64_t l = 0; l < 16; ++l) {
      const int64_t c = l % G;
      const bool on = c < d.channels;
      wa[p][l] = on ? d.w8[c * d.kp + 2 * p] : 0;
      wb[p][l] = on && 2 * p + 1 < taps ? d.w8[c * d.kp + 2 * p + 1] : 0;
    }
  }
  for (int64_t p = 0; p < pairs; ++p) {
    const __m256i va = _mm256_load_si256(reinterpret_cast<const __m256i*>(wa[p]));
    const __m256i vb = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb[p]));
    wpair[p][0] = _mm256_unpacklo_epi16(va, vb);
    wpair[p][1] = _mm256_unpackhi_epi16(va, vb);
  }
}

// The band's padded input rows (`rows` of them from padded row oy0 * sh)
// into the block, bw entries a row: the pad value, then the image's rows
// transposed through `staging`; with 8 channels each entry's upper half is
// the next entry's channels (the last entry's stays padding).
template <int G>
KILN_AVX2 void lanes_fill_band(const QDepthwiseLanes& d, int64_t oy0, int64_t rows, int64_t pw, int64_t bw,
                               uint8_t* block, uint8_t* staging) {
  const int64_t plane_in = d.h * d.w;
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
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* e = block + r * bw * 16;
      for (int64_t x = 0; x + 1 < bw; ++x) memcpy(e + x * 16 + 8, e + (x + 1) * 16, 8);
    }
  }
}

// The nb output rows of a band from its block: per output position (two
// with 8 channels) the pairs of taps by vpmaddwd, requantized per lane,
// packed back into lane order and stored to out (G bytes a position).
template <int G, int kPairs>
KILN_AVX2 __attribute__((always_inline)) inline void lanes_band(const QDepthwiseLanes& d, int64_t nb, int64_t bw,
                                                                int64_t pairs, const uint8_t* block,
                                                                const int64_t* offset, const __m256i wpair[][2],
                                                                const LaneRequant& rq, uint8_t* out) {
  constexpr int64_t kPerVector = 16 / G;  // output positions a vector
  const __m256i vzp = _mm256_set1_epi32(d.y_zp), vlo = _mm256_set1_epi32(d.y_min), vhi = _mm256_set1_epi32(d.y_max);
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
        const __m256i v = _mm256_add_epi32(accs[half], rq.bias[half]);
        const __m256i even = _mm256_add_epi64(_mm256_mul_epi32(v, rq.m[half]), rq.round_even[half]);
        const __m256i odd =
            _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(v, 32), rq.m_odd[half]), rq.round_odd[half]);
        __m256i r = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
        r = _mm256_add_epi32(_mm256_srav_epi32(r, rq.rest[half]), vzp);
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
}

// kPairs: the pairs of taps when known at compile time (3x3: 5, the tap
// loop unrolled), or 0.
template <int G, int kPairs>
KILN_AVX2 void depthwise_lanes_g(const QDepthwiseLanes& d) {
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
  LaneRequant rq;
  lane_requant<G>(d, &rq);
  __m256i wpair[kLaneTaps / 2][2];
  lane_weights<G>(d, taps, pairs, wpair);
  int64_t offset[kLaneTaps + 1];
  for (int64_t t = 0; t < taps; ++t) offset[t] = ((t / d.kw) * d.dh * bw + (t % d.kw) * d.dw) * 16;
  offset[taps] = offset[taps - 1];  // an odd count's last pair: weight 0
  const int64_t plane_out = d.oh * d.ow;
  for (int64_t oy0 = 0; oy0 < d.oh; oy0 += band) {
    const int64_t nb = d.oh - oy0 < band ? d.oh - oy0 : band;
    lanes_fill_band<G>(d, oy0, lanes_rows(d, nb), pw, bw, block, staging);
    uint8_t* out = staging;
    lanes_band<G, kPairs>(d, nb, bw, pairs, block, offset, wpair, rq, out);
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
    if (!qgemm_vector_requant_params(shift[c], bias[c])) return false;
  }
  return true;
}

KILN_AVX2 void depthwise_lanes_avx2(const QDepthwiseLanes& d) {
  const bool three = d.kh * d.kw == 9;
  if (d.channels <= 8 && d.sw == 1) {
    three ? depthwise_lanes_g<8, 5>(d) : depthwise_lanes_g<8, 0>(d);
  } else {
    three ? depthwise_lanes_g<16, 5>(d) : depthwise_lanes_g<16, 0>(d);
  }
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
