// The depthwise convolutions with AVX-512, 16 outputs a vector:
// depthwise3x3_avx512 (gemm.h: the undilated 3x3 of one channel, each input
// row loaded once per strip, masked to the row, its taps lane shifts) and
// depthwise_conv_avx512 (depthwise.h: 5x5, 7x7 and dilated kernels, from
// the shared body x86/depthwise_body.inc, masked stores at a row's end).
// Each function carries KILN_AVX512 (isa_switch.h).

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <string.h>

#include "depthwise.h"
#include "x86/avx512_helpers.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {

namespace {

// Row element i, or 0 outside [0, w).
inline float element(const float* row, int64_t w, int64_t i) { return i >= 0 && i < w ? row[i] : 0.f; }

// Row elements i .. i + 15, 0 past the row's end (i >= 0).
KILN_AVX512 inline __m512 load_row16(const float* row, int64_t w, int64_t i) {
  return i < w ? _mm512_maskz_loadu_ps(first_lanes(w - i), row + i) : _mm512_setzero_ps();
}

// [lo[s], .., lo[15], hi[0], .., hi[s - 1]]: lanes shifted down by s.
template <int kShift>
KILN_AVX512 inline __m512 shift_down(__m512 lo, __m512 hi) {
  // The masked form: GCC 12 warns about the unmasked one's undefined source.
  const __m512i l = _mm512_castps_si512(lo);
  return _mm512_castsi512_ps(_mm512_mask_alignr_epi32(l, 0xFFFF, _mm512_castps_si512(hi), l, kShift));
}

// The three taps of one input row for 16 outputs whose first reads input
// column i0 (tap kx of output j reads column i0 + j * stride + kx - pl, 0
// outside the row): the row is loaded once, masked to its length, and the
// taps are lane shifts of it, the one element past either end read as a
// scalar. Nothing outside the row is read.
template <int kStride>
KILN_AVX512 inline void row_taps(const float* row, int64_t w, int64_t i0, int64_t pl, __m512* t0, __m512* t1,
                                 __m512* t2) {
  if (kStride == 1) {
    const __m512 cur = load_row16(row, w, i0);
    if (pl == 1) {
      *t0 = shift_down<15>(_mm512_set1_ps(element(row, w, i0 - 1)), cur);
      *t1 = cur;
      *t2 = shift_down<1>(cur, _mm512_set1_ps(element(row, w, i0 + 16)));
    } else {
      const __m512 next = load_row16(row, w, i0 + 16);
      *t0 = cur;
      *t1 = shift_down<1>(cur, next);
      *t2 = shift_down<2>(cur, next);
    }
  } else {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512 a = load_row16(row, w, i0), b = load_row16(row, w, i0 + 16);
    const __m512 e = _mm512_permutex2var_ps(a, even, b);  // columns i0 + 2j
    const __m512 o = _mm512_permutex2var_ps(a, odd, b);   // columns i0 + 2j + 1
    if (pl == 1) {
      *t0 = shift_down<15>(_mm512_set1_ps(element(row, w, i0 - 1)), o);
      *t1 = e;
      *t2 = o;
    } else {
      *t0 = e;
      *t1 = o;
      *t2 = shift_down<1>(e, _mm512_set1_ps(element(row, w, i0 + 32)));
    }
  }
}

// acc + t0 k0 + t1 k1 + t2 k2: one input row's part of an output row.
KILN_AVX512 inline __m512 row_fma(__m512 acc, __m512 t0, __m512 t1, __m512 t2, __m512 k0, __m512 k1, __m512 k2) {
  return _mm512_fmadd_ps(k2, t2, _mm512_fmadd_ps(k1, t1, _mm512_fmadd_ps(k0, t0, acc)));
}

// Stride 1: each input row's taps are computed once and feed the three
// output rows that read it, one accumulator each, for one 16-column strip
// at a time.
KILN_AVX512 void depthwise3x3_avx512_s1(const float* in, int64_t h, int64_t w, const float* weights, float bias,
                                        int64_t pt, int64_t pl, float* out, int64_t oh, int64_t ow, bool clamp,
                                        float lo, float hi) {
  const __m512 k0 = _mm512_set1_ps(weights[0]), k1 = _mm512_set1_ps(weights[1]), k2 = _mm512_set1_ps(weights[2]);
  const __m512 k3 = _mm512_set1_ps(weights[3]), k4 = _mm512_set1_ps(weights[4]), k5 = _mm512_set1_ps(weights[5]);
  const __m512 k6 = _mm512_set1_ps(weights[6]), k7 = _mm512_set1_ps(weights[7]), k8 = _mm512_set1_ps(weights[8]);
  const __m512 vbias = _mm512_set1_ps(bias), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (int64_t ox = 0; ox < ow; ox += 16) {
    const __mmask16 store_mask = first_lanes(ow - ox);
    // Output row oy reads input rows oy - pt .. oy - pt + 2; the three
    // accumulators hold output rows r + pt - 2 (kernel row 2 next),
    // r + pt - 1 (row 1 next) and r + pt (row 0 next) for input row r.
    __m512 a2 = vbias, a1 = vbias, a0 = vbias;
    for (int64_t r = -pt; r < oh - pt + 2; ++r) {
      if (r >= 0 && r < h) {
        __m512 t0, t1, t2;
        row_taps<1>(in + r * w, w, ox, pl, &t0, &t1, &t2);
        a2 = row_fma(a2, t0, t1, t2, k6, k7, k8);
        a1 = row_fma(a1, t0, t1, t2, k3, k4, k5);
        a0 = row_fma(a0, t0, t1, t2, k0, k1, k2);
      }
      const int64_t done = r + pt - 2;  // the output row a2 completes
      if (done >= 0) {
        __m512 v = a2;
        if (clamp) v = clamp16(v, vlo, vhi);
        _mm512_mask_storeu_ps(out + done * ow + ox, store_mask, v);
      }
      a2 = a1;
      a1 = a0;
      a0 = vbias;
    }
  }
}

// Stride 2: output row oy reads input rows 2 oy - pt .. 2 oy - pt + 2, so
// its last row is the next output row's first: that row's taps are
// computed once, its kernel row 0 part carried over.
KILN_AVX512 void depthwise3x3_avx512_s2(const float* in, int64_t h, int64_t w, const float* weights, float bias,
                                        int64_t pt, int64_t pl, float* out, int64_t oh, int64_t ow, bool clamp,
                                        float lo, float hi) {
  const __m512 k0 = _mm512_set1_ps(weights[0]), k1 = _mm512_set1_ps(weights[1]), k2 = _mm512_set1_ps(weights[2]);
  const __m512 k3 = _mm512_set1_ps(weights[3]), k4 = _mm512_set1_ps(weights[4]), k5 = _mm512_set1_ps(weights[5]);
  const __m512 k6 = _mm512_set1_ps(weights[6]), k7 = _mm512_set1_ps(weights[7]), k8 = _mm512_set1_ps(weights[8]);
  const __m512 vbias = _mm512_set1_ps(bias), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (int64_t ox = 0; ox < ow; ox += 16) {
    const __mmask16 store_mask = first_lanes(ow - ox);
    const int64_t i0 = 2 * ox;
    __m512 t0, t1, t2;
    __m512 carry = vbias;  // the bias and kernel row 0's part of the next output row
    if (-pt >= 0 && -pt < h) {
      row_taps<2>(in + (-pt) * w, w, i0, pl, &t0, &t1, &t2);
      carry = row_fma(carry, t0, t1, t2, k0, k1, k2);
    }
    for (int64_t oy = 0; oy < oh; ++oy) {
      __m512 acc = carry;
      const int64_t r1 = 2 * oy - pt + 1, r2 = r1 + 1;
      if (r1 >= 0 && r1 < h) {
        row_taps<2>(in + r1 * w, w, i0, pl, &t0, &t1, &t2);
        acc = row_fma(acc, t0, t1, t2, k3, k4, k5);
      }
      carry = vbias;
      if (r2 >= 0 && r2 < h) {
        row_taps<2>(in + r2 * w, w, i0, pl, &t0, &t1, &t2);
        acc = row_fma(acc, t0, t1, t2, k6, k7, k8);
        carry = row_fma(carry, t0, t1, t2, k0, k1, k2);
      }
      if (clamp) acc = clamp16(acc, vlo, vhi);
      _mm512_mask_storeu_ps(out + oy * ow + ox, store_mask, acc);
    }
  }
}

}  // namespace

// Each input row is loaded once per 16-column strip (masked to the row, so
// padding needs no copy) and its three taps come from lane shifts; stride 1
// feeds every row's taps to the three output rows that read it, stride 2
// carries the shared row to the next output row.
KILN_AVX512 bool depthwise3x3_avx512(const float* in, int64_t h, int64_t w, const float* weights, float bias,
                                     int64_t stride, int64_t pt, int64_t pl, float* out, int64_t oh, int64_t ow,
                                     bool clamp, float lo, float hi) {
  if (pl < 0 || pl > 1 || w <= 0) return false;
  if (stride == 1) {
    depthwise3x3_avx512_s1(in, h, w, weights, bias, pt, pl, out, oh, ow, clamp, lo, hi);
  } else if (stride == 2) {
    depthwise3x3_avx512_s2(in, h, w, weights, bias, pt, pl, out, oh, ow, clamp, lo, hi);
  } else {
    return false;
  }
  return true;
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

// GCC 12 warns inside its own AVX-512 headers (the _mm512_undefined_*
// placeholders of unmasked intrinsics); nothing here reads them.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kiln {
namespace kernels {

namespace dw_avx512 {

#define KILN_DT KILN_AVX512
using V = __m512;
constexpr int64_t kLanes = 16;
KILN_DT inline V set1(float v) { return _mm512_set1_ps(v); }
KILN_DT inline V loadu(const float* p) { return _mm512_loadu_ps(p); }
KILN_DT inline void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
KILN_DT inline V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
KILN_DT inline V vadd(V a, V b) { return _mm512_add_ps(a, b); }
KILN_DT inline V vmin(V a, V b) { return _mm512_min_ps(a, b); }
KILN_DT inline V vmax(V a, V b) { return _mm512_max_ps(a, b); }
KILN_DT inline void store_part(float* p, int64_t n, V v) {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), v);
}
// Lanes 0..15 of a, then of b: the even ones and the odd ones.
KILN_DT inline void split(V a, V b, V* even, V* odd) {
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  *even = _mm512_permutex2var_ps(a, ie, b);
  *odd = _mm512_permutex2var_ps(a, io, b);
}
// p[0, 2, .., 30] and p[1, 3, .., 31].
KILN_DT inline void deinterleave(const float* p, V* even, V* odd) {
  split(_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16), even, odd);
}
// The lanes l with 0 <= first + l < w, and a load of only those lanes.
using Mask = __mmask16;
KILN_DT inline Mask columns_inside(int64_t first, int64_t w) {
  const int64_t lo = first < 0 ? -first : 0, hi = w - first;
  if (hi <= lo) return 0;
  const uint32_t below_hi = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;
  const uint32_t below_lo = lo >= 16 ? 0xFFFFu : (1u << lo) - 1u;
  return static_cast<Mask>(below_hi & ~below_lo);
}
KILN_DT inline V load_masked(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
#include "x86/depthwise_body.inc"
#undef KILN_DT

}  // namespace dw_avx512

bool depthwise_conv_avx512(const DepthwiseConv& conv, bool clamp, float lo, float hi) {
  return dw_avx512::run(conv, clamp, lo, hi);
}

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
