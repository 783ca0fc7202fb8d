// The AVX2 max pooling of one plane (pool.cc).

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "byte_runs.h"
#include "x86/avx2_helpers.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {

// Eight columns of `rows` rows w floats apart from `top` on (`kMasked`:
// only the lanes of `tail` read): their maximum, all bits set in a lane
// with a NaN; those lanes also set in *any_nan.
template <bool kMasked>
KILN_AVX2 inline __m256 max_pool_column(const float* top, int64_t w, int64_t rows, __m256i tail, __m256* any_nan) {
  __m256 m = kMasked ? _mm256_maskload_ps(top, tail) : _mm256_loadu_ps(top);
  __m256 nan = rows == 1 ? _mm256_cmp_ps(m, m, _CMP_UNORD_Q) : _mm256_setzero_ps();
  for (int64_t r = 1; r < rows; ++r) {
    const __m256 v = kMasked ? _mm256_maskload_ps(top + r * w, tail) : _mm256_loadu_ps(top + r * w);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(m, v, _CMP_UNORD_Q));
    m = _mm256_max_ps(m, v);
  }
  *any_nan = _mm256_or_ps(*any_nan, nan);
  return _mm256_or_ps(m, nan);
}

// Max pooling of one plane, equal strides of 1 or 2, no dilation, in two
// passes per output row:
//   1. vertical: the maximum over the window's real rows (taps in the top
//      or bottom padding are skipped: padding never wins a maximum), read
//      straight from the input into a row buffer on the stack laid out as
//      the padded row: pl columns of -inf, the w maxima, -inf to the end;
//   2. horizontal: eight outputs per step take the maximum of kw plain
//      (stride 1) or even-column (stride 2: two taps per deinterleave)
//      loads of that buffer.
// Each input row is read about kh / stride times, not kh * kw. A NaN
// makes its output NaN, as in the portable kernel: the vertical pass sets
// all bits of a column that has one, and only output rows with such a
// column test the horizontal taps for it. A window without a real row
// gives -inf. Whole vectors are stored wherever the plane goes on past
// them (the lanes past a row land in the next row, written after). False,
// having written nothing, when the padded row does not fit the buffer.
KILN_AVX2 bool max_pool_avx2(const float* in, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride, int64_t pt,
                             int64_t pl, float* out, int64_t oh, int64_t ow) {
  constexpr int64_t kRowFloats = 1024;
  // The horizontal pass reads 16 floats from up to (ow - 1) * stride +
  // kw - 1; the vertical pass writes whole vectors up to pl + w + 7.
  const int64_t span = (ow + 8) * stride + kw + 16;
  if (span > kRowFloats || pl < 0 || pl + w + 8 > span || kh < 1 || kw < 1 || (stride != 1 && stride != 2)) {
    return false;
  }
  alignas(32) float buffer[kRowFloats];
  const float minus_inf = -__builtin_inff();
  for (int64_t q = 0; q < span; ++q) buffer[q] = minus_inf;
  float* const vrow = buffer + pl;
  const __m256 vminus_inf = _mm256_set1_ps(minus_inf);
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int64_t w8 = w - w % 8;
  const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(w - w8)), lanes);
  for (int64_t oy = 0; oy < oh; ++oy) {
    const int64_t y0 = oy * stride - pt;
    const int64_t r0 = y0 < 0 ? 0 : y0, r1 = y0 + kh < h ? y0 + kh : h;
    __m256 any_nan = _mm256_setzero_ps();
    if (r1 <= r0) {
      for (int64_t q = 0; q < w; ++q) vrow[q] = minus_inf;
    } else {
      const float* top = in + r0 * w;
      const int64_t rows = r1 - r0;
      for (int64_t c = 0; c < w8; c += 8) {
        _mm256_storeu_ps(vrow + c, max_pool_column<false>(top + c, w, rows, tail, &any_nan));
      }
      if (w8 < w) {
        const __m256 m = max_pool_column<true>(top + w8, w, rows, tail, &any_nan);
        _mm256_storeu_ps(vrow + w8, _mm256_blendv_ps(vminus_inf, m, _mm256_castsi256_ps(tail)));
      }
    }
    const bool check_nan = _mm256_movemask_ps(any_nan) != 0;
    float* orow = out + oy * ow;
    for (int64_t ox = 0; ox < ow; ox += 8) {
      const float* p = buffer + ox * stride;
      __m256 acc, nan = _mm256_setzero_ps();
      if (stride == 1) {
        acc = _mm256_loadu_ps(p);
        if (check_nan) nan = _mm256_cmp_ps(acc, acc, _CMP_UNORD_Q);
        for (int64_t kx = 1; kx < kw; ++kx) {
          const __m256 v = _mm256_loadu_ps(p + kx);
          if (check_nan) nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
          acc = _mm256_max_ps(acc, v);
        }
      } else {
        acc = vminus_inf;
        int64_t kx = 0;
        for (; kx + 1 < kw; kx += 2) {
          __m256 even, odd;
          deinterleave(p + kx, &even, &odd);
          if (check_nan) nan = _mm256_or_ps(nan, _mm256_cmp_ps(even, odd, _CMP_UNORD_Q));
          acc = _mm256_max_ps(acc, _mm256_max_ps(even, odd));
        }
        if (kx < kw) {
          const __m256 a = _mm256_loadu_ps(p + kx), b = _mm256_loadu_ps(p + kx + 8);
          const __m256 even =
              _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
          if (check_nan) nan = _mm256_or_ps(nan, _mm256_cmp_ps(even, even, _CMP_UNORD_Q));
          acc = _mm256_max_ps(acc, even);
        }
      }
      acc = _mm256_or_ps(acc, nan);  // all bits set: a NaN
      if (ox + 8 <= ow || (oy * ow + ox + 8 <= oh * ow)) {
        _mm256_storeu_ps(orow + ox, acc);
      } else {
        _mm256_maskstore_ps(orow + ox, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(ow - ox)), lanes), acc);
      }
    }
  }
  return true;
}

// 8-bit max pooling, as max_pool_avx2 in two passes per output row over a
// padded line on the stack: the vertical maximum 32 columns at a time (then
// 16, 8 and single columns, never reading past a row), the horizontal one
// 32 outputs at a time. Stride 1 takes byte maxima of shifted loads; stride
// 2 splits each 16-bit lane of a load into its even and odd byte (two taps
// per load), takes the maxima in 16 bits and packs them back. Padding holds
// the type's lowest value, so it never wins. The last step of a row that
// would store past the plane goes through a copy.
namespace {

template <typename T>
struct Bytes;
template <>
struct Bytes<uint8_t> {
  KILN_AVX2 static __m256i max(__m256i a, __m256i b) { return _mm256_max_epu8(a, b); }
  KILN_AVX2 static __m128i max(__m128i a, __m128i b) { return _mm_max_epu8(a, b); }
  // Even and odd bytes of each 16-bit lane, widened.
  KILN_AVX2 static __m256i even(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi16(0xFF)); }
  KILN_AVX2 static __m256i odd(__m256i v) { return _mm256_srli_epi16(v, 8); }
  KILN_AVX2 static __m256i pack(__m256i lo, __m256i hi) {
    return _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), 0xD8);
  }
};
template <>
struct Bytes<int8_t> {
  KILN_AVX2 static __m256i max(__m256i a, __m256i b) { return _mm256_max_epi8(a, b); }
  KILN_AVX2 static __m128i max(__m128i a, __m128i b) { return _mm_max_epi8(a, b); }
  KILN_AVX2 static __m256i even(__m256i v) { return _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8); }
  KILN_AVX2 static __m256i odd(__m256i v) { return _mm256_srai_epi16(v, 8); }
  KILN_AVX2 static __m256i pack(__m256i lo, __m256i hi) {
    return _mm256_permute4x64_epi64(_mm256_packs_epi16(lo, hi), 0xD8);
  }
};

// The vertical pass: line[c] = the maximum of column c over `rows` rows w
// apart from `top`.
template <typename T>
KILN_AVX2 void max_pool_8bit_vertical(const T* top, int64_t w, int64_t rows, T* line) {
  using B = Bytes<T>;
  int64_t c = 0;
  for (; c + 32 <= w; c += 32) {
    __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(top + c));
    for (int64_t r = 1; r < rows; ++r)
      m = B::max(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(top + r * w + c)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(line + c), m);
  }
  // The rest by 16 or 8 columns, the last vector moved back to end at w
  // (it rewrites some columns with the same maxima): no byte loop for
  // rows 8 columns wide or more (GoogLeNet's 14 x 14 and 28 x 28 planes).
  while (c < w && w >= 8) {
    const int64_t width = w >= 16 ? 16 : 8;
    const int64_t at = c + width <= w ? c : w - width;
    const auto load = [width](const T* p) {
      return width == 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))
                         : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    };
    __m128i m = load(top + at);
    for (int64_t r = 1; r < rows; ++r) m = B::max(m, load(top + r * w + at));
    if (width == 16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(line + at), m);
    } else {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(line + at), m);
    }
    c = at + width;
  }
  for (; c < w; ++c) {
    T m = top[c];
    for (int64_t r = 1; r < rows; ++r) m = top[r * w + c] > m ? top[r * w + c] : m;
    line[c] = m;
  }
}

// 32 outputs of the horizontal pass from the line at `p` (stride 1 or 2).
template <typename T>
KILN_AVX2 __m256i max_pool_8bit_horizontal(const T* p, int64_t kw, int64_t stride) {
  using B = Bytes<T>;
  if (stride == 1) {
    __m256i acc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    for (int64_t kx = 1; kx < kw; ++kx) acc = B::max(acc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kx)));
    return acc;
  }
  // Outputs 0-15 from bytes [0, 32) + kx, outputs 16-31 from [32, 64) + kx.
  __m256i lo = _mm256_set1_epi16(static_cast<int16_t>(static_cast<T>(static_cast<T>(-1) > 0 ? 0 : -128)));
  __m256i hi = lo;
  for (int64_t kx = 0; kx < kw; kx += 2) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kx));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kx + 32));
    __m256i ma = B::even(a), mb = B::even(b);
    if (kx + 1 < kw) {
      ma = _mm256_max_epi16(ma, B::odd(a));
      mb = _mm256_max_epi16(mb, B::odd(b));
    }
    lo = _mm256_max_epi16(lo, ma);
    hi = _mm256_max_epi16(hi, mb);
  }
  return B::pack(lo, hi);
}

template <typename T>
KILN_AVX2 bool max_pool_8bit_plane(const T* in, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride,
                                   int64_t pt, int64_t pl, T* out, int64_t oh, int64_t ow) {
  constexpr int64_t kLine = 4096;
  // The horizontal pass reads up to 64 bytes from (ow - 1) rounded to 32,
  // times the stride, plus kw.
  const int64_t span = ((ow + 31) / 32 * 32) * stride + kw + 64;
  if (span > kLine || pl < 0 || pl + w > span || kh < 1 || kw < 1 || (stride != 1 && stride != 2)) return false;
  alignas(32) T line[kLine];
  const T lowest = static_cast<T>(static_cast<T>(-1) > 0 ? 0 : -128);
  for (int64_t q = 0; q < span; ++q) line[q] = lowest;
  T* const image = line + pl;
  for (int64_t oy = 0; oy < oh; ++oy) {
    const int64_t y0 = oy * stride - pt;
    const int64_t r0 = y0 < 0 ? 0 : y0, r1 = y0 + kh < h ? y0 + kh : h;
    if (r1 <= r0) {
      for (int64_t q = 0; q < w; ++q) image[q] = lowest;
    } else {
      max_pool_8bit_vertical(in + r0 * w, w, r1 - r0, image);
    }
    T* row = out + oy * ow;
    for (int64_t ox = 0; ox < ow; ox += 32) {
      const __m256i v = max_pool_8bit_horizontal(line + ox * stride, kw, stride);
      if (oy * ow + ox + 32 <= oh * ow) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + ox), v);
      } else {
        alignas(32) T last[32];
        _mm256_store_si256(reinterpret_cast<__m256i*>(last), v);
        for (int64_t q = 0; q < ow - ox && q < 32; ++q) row[ox + q] = last[q];
      }
    }
  }
  return true;
}

// Stride 1 on a plane whose padded copy fits 4 KiB (GoogLeNet's 3x3
// "same" pools on 28 x 28 down to 7 x 7 planes): the plane copied once
// into the rows of a padded image (the lowest value around it), the
// vertical maxima then the horizontal ones each over the whole flat image
// 32 bytes at a time (the columns between rows computed and dropped), and
// the rows moved out. No per-row vector setup or byte loop on planes a
// vector wide or less. False where the copy does not fit.
template <typename T>
KILN_AVX2 bool max_pool_8bit_flat(const T* in, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t pt, int64_t pl,
                                  T* out, int64_t oh, int64_t ow) {
  using B = Bytes<T>;
  constexpr int64_t kImage = 4096, kSlack = 64;
  const int64_t pitch = ow + kw - 1 > pl + w ? ow + kw - 1 : pl + w;
  const int64_t ph = oh + kh - 1 > pt + h ? oh + kh - 1 : pt + h;
  if (pt < 0 || pl < 0 || ph * pitch > kImage || kw > kSlack) return false;
  alignas(32) T image[kImage + kSlack];
  alignas(32) T maxima[kImage + 2 * kSlack];  // up to 32 bytes past n, then the slack
  const T lowest = static_cast<T>(static_cast<T>(-1) > 0 ? 0 : -128);
  memset(image, static_cast<uint8_t>(lowest), static_cast<size_t>(ph * pitch + kSlack));
  for (int64_t y = 0; y < h; ++y) {
    copy_run(reinterpret_cast<uint8_t*>(image + (pt + y) * pitch + pl), reinterpret_cast<const uint8_t*>(in + y * w),
             w);
  }
  const int64_t n = oh * pitch;  // the outputs' rows, `pitch` apart
  for (int64_t i = 0; i < n; i += 32) {
    __m256i m = _mm256_load_si256(reinterpret_cast<const __m256i*>(image + i));
    for (int64_t ky = 1; ky < kh; ++ky)
      m = B::max(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(image + i + ky * pitch)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(maxima + i), m);
  }
  // Past the last vector: read by the horizontal pass, never kept.
  memset(maxima + (n + 31) / 32 * 32, static_cast<uint8_t>(lowest), static_cast<size_t>(kSlack));
  for (int64_t i = 0; i < n; i += 32) {
    __m256i m = _mm256_load_si256(reinterpret_cast<const __m256i*>(maxima + i));
    for (int64_t kx = 1; kx < kw; ++kx)
      m = B::max(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(maxima + i + kx)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(maxima + i), m);  // read ahead of i only
  }
  for (int64_t oy = 0; oy < oh; ++oy) {
    copy_run(reinterpret_cast<uint8_t*>(out + oy * ow), reinterpret_cast<const uint8_t*>(maxima + oy * pitch), ow);
  }
  return true;
}

}  // namespace

KILN_AVX2 bool max_pool_8bit_avx2(const uint8_t* in, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride,
                                  int64_t pt, int64_t pl, uint8_t* out, int64_t oh, int64_t ow) {
  if (stride == 1 && max_pool_8bit_flat(in, h, w, kh, kw, pt, pl, out, oh, ow)) return true;
  return max_pool_8bit_plane(in, h, w, kh, kw, stride, pt, pl, out, oh, ow);
}

KILN_AVX2 bool max_pool_8bit_avx2(const int8_t* in, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride,
                                  int64_t pt, int64_t pl, int8_t* out, int64_t oh, int64_t ow) {
  if (stride == 1 && max_pool_8bit_flat(in, h, w, kh, kw, pt, pl, out, oh, ow)) return true;
  return max_pool_8bit_plane(in, h, w, kh, kw, stride, pt, pl, out, oh, ow);
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
