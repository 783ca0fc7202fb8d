// The depthwise convolutions with AVX2+FMA, eight outputs a vector:
// depthwise3x3_avx2 (gemm.h: the undilated 3x3 of one channel) and
// depthwise_conv_avx2 (depthwise.h: 5x5, 7x7 and dilated kernels, from the
// shared body x86/depthwise_body.inc). Each function carries KILN_AVX2
// (isa_switch.h). Stores use full vectors except at a row's (the 5x5
// kernels: the plane's) end, through a small buffer (no vmaskmovps: slow
// on AMD); stride 2 splits input rows by parity with two permutes per
// vector pair.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <string.h>

#include "depthwise.h"
#include "x86/avx2_helpers.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {

namespace {

// Eight outputs (count <= 8 of them) at column ox of one output row, any of
// whose taps may fall outside the image: taps are gathered with a mask
// (out-of-image lanes read nothing and count as 0).
KILN_AVX2 inline __m256 depthwise_border(const float* const rows[3], const bool valid[3], const __m256 k[9], __m256 acc,
                                         int64_t ix, int64_t stride, int64_t w, int64_t count) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lanes);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i width = _mm256_set1_epi32(static_cast<int>(w));
  for (int64_t kx = 0; kx < 3; ++kx) {
    // Column of each lane's tap, and whether it lies in [0, w).
    const __m256i col = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(ix + kx)),
                                         _mm256_mullo_epi32(lanes, _mm256_set1_epi32(static_cast<int>(stride))));
    const __m256i inside =
        _mm256_and_si256(_mm256_and_si256(live, _mm256_cmpgt_epi32(col, _mm256_sub_epi32(zero, _mm256_set1_epi32(1)))),
                         _mm256_cmpgt_epi32(width, col));
    const __m256 mask = _mm256_castsi256_ps(inside);
    for (int64_t ky = 0; ky < 3; ++ky) {
      if (!valid[ky]) continue;
      const __m256 v = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), rows[ky], col, mask, 4);
      acc = _mm256_fmadd_ps(k[ky * 3 + kx], v, acc);
    }
  }
  return acc;
}

// Eight outputs from three rows that need no bounds checks (zero-padded
// copies, or the interior of the input): plain loads from column q of each
// row on.
KILN_AVX2 inline __m256 depthwise_padded(const float* const rows[3], const bool valid[3], const __m256 k[9], __m256 acc,
                                         int64_t q, int64_t stride) {
  for (int64_t ky = 0; ky < 3; ++ky) {
    if (!valid[ky]) continue;
    const float* r = rows[ky] + q;
    if (stride == 1) {
      acc = _mm256_fmadd_ps(k[ky * 3], _mm256_loadu_ps(r), acc);
      acc = _mm256_fmadd_ps(k[ky * 3 + 1], _mm256_loadu_ps(r + 1), acc);
      acc = _mm256_fmadd_ps(k[ky * 3 + 2], _mm256_loadu_ps(r + 2), acc);
    } else {
      __m256 even, odd, even2, odd2;
      deinterleave(r, &even, &odd);
      deinterleave(r + 2, &even2, &odd2);
      acc = _mm256_fmadd_ps(k[ky * 3], even, acc);
      acc = _mm256_fmadd_ps(k[ky * 3 + 1], odd, acc);
      acc = _mm256_fmadd_ps(k[ky * 3 + 2], even2, acc);
    }
  }
  return acc;
}

// One output row from three zero-padded input rows (r0, r1, r2; a row
// outside the image is all zeros), eight outputs per step, branch-free.
template <int kStride>
KILN_AVX2 inline void depthwise_row(const float* r0, const float* r1, const float* r2, const float* w, float bias,
                                    float* orow, int64_t ow, bool clamp, float lo, float hi) {
  const __m256 k0 = _mm256_set1_ps(w[0]), k1 = _mm256_set1_ps(w[1]), k2 = _mm256_set1_ps(w[2]);
  const __m256 k3 = _mm256_set1_ps(w[3]), k4 = _mm256_set1_ps(w[4]), k5 = _mm256_set1_ps(w[5]);
  const __m256 k6 = _mm256_set1_ps(w[6]), k7 = _mm256_set1_ps(w[7]), k8 = _mm256_set1_ps(w[8]);
  const __m256 vbias = _mm256_set1_ps(bias), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t ox = 0; ox < ow; ox += 8) {
    const int64_t q = ox * kStride;
    // One accumulator per kernel row: three short dependency chains.
    __m256 acc0, acc1, acc2;
    if (kStride == 1) {
      acc0 = _mm256_fmadd_ps(k0, _mm256_loadu_ps(r0 + q), vbias);
      acc1 = _mm256_mul_ps(k3, _mm256_loadu_ps(r1 + q));
      acc2 = _mm256_mul_ps(k6, _mm256_loadu_ps(r2 + q));
      acc0 = _mm256_fmadd_ps(k1, _mm256_loadu_ps(r0 + q + 1), acc0);
      acc1 = _mm256_fmadd_ps(k4, _mm256_loadu_ps(r1 + q + 1), acc1);
      acc2 = _mm256_fmadd_ps(k7, _mm256_loadu_ps(r2 + q + 1), acc2);
      acc0 = _mm256_fmadd_ps(k2, _mm256_loadu_ps(r0 + q + 2), acc0);
      acc1 = _mm256_fmadd_ps(k5, _mm256_loadu_ps(r1 + q + 2), acc1);
      acc2 = _mm256_fmadd_ps(k8, _mm256_loadu_ps(r2 + q + 2), acc2);
    } else {
      __m256 even, odd, even2, odd2;
      deinterleave(r0 + q, &even, &odd);
      deinterleave(r0 + q + 2, &even2, &odd2);
      acc0 = _mm256_fmadd_ps(k0, even, vbias);
      acc0 = _mm256_fmadd_ps(k1, odd, acc0);
      acc0 = _mm256_fmadd_ps(k2, even2, acc0);
      deinterleave(r1 + q, &even, &odd);
      deinterleave(r1 + q + 2, &even2, &odd2);
      acc1 = _mm256_mul_ps(k3, even);
      acc1 = _mm256_fmadd_ps(k4, odd, acc1);
      acc1 = _mm256_fmadd_ps(k5, even2, acc1);
      deinterleave(r2 + q, &even, &odd);
      deinterleave(r2 + q + 2, &even2, &odd2);
      acc2 = _mm256_mul_ps(k6, even);
      acc2 = _mm256_fmadd_ps(k7, odd, acc2);
      acc2 = _mm256_fmadd_ps(k8, even2, acc2);
    }
    __m256 acc = _mm256_add_ps(_mm256_add_ps(acc0, acc1), acc2);
    if (clamp) acc = clamp8(acc, vlo, vhi);
    if (ox + 8 <= ow) {
      _mm256_storeu_ps(orow + ox, acc);
    } else {
      _mm256_maskstore_ps(orow + ox, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(ow - ox)), lanes), acc);
    }
  }
}

// Lanes l with 0 <= first + l < w: which of eight columns from `first` lie
// in a row of w floats.
KILN_AVX2 inline __m256i columns_inside(int64_t first, int64_t w) {
  const __m256i col =
      _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), col),
                             _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(w)), col));
}

// Columns first .. first + 7 of a row, plainly or, where `mask` (from
// columns_inside) leaves some out, masked: columns outside the row read 0
// and nothing outside it is touched. The address is formed as an integer:
// first may lie before the row.
KILN_AVX2 inline __m256 load_cols8(const float* row, int64_t first, bool plain, __m256i mask) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(row) + static_cast<uintptr_t>(first) * sizeof(float);
  const float* p = reinterpret_cast<const float*>(at);
  return plain ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}

// Where the loads of one 8-output strip read, the same for every row of
// the strip: the strip's first input column i0 (columns i0 + kx + S * lane
// are its taps), and whether every column its loads read lies in the row
// (plain loads) or which lanes of each load do (masked loads). Stride 1
// loads from i0, i0 + 1 and i0 + 2 (the three taps as they are), stride 2
// from i0 and i0 + 8, and column i0 + 16 alone.
template <int S>
struct Strip8 {
  static constexpr int64_t kLoads = S == 1 ? 3 : 2;
  int64_t i0;
  bool plain;
  bool last_inside;  // stride 2: column i0 + 16 lies in the row
  __m256i mask[kLoads];

  KILN_AVX2 Strip8(int64_t ox, int64_t pl, int64_t w) : i0(ox * S - pl) {
    plain = i0 >= 0 && i0 + (S == 1 ? 10 : 17) <= w;
    last_inside = i0 + 16 >= 0 && i0 + 16 < w;
    for (int64_t q = 0; q < kLoads; ++q) {
      mask[q] = plain ? _mm256_set1_epi32(-1) : columns_inside(i0 + (S == 1 ? q : 8 * q), w);
    }
  }
};

// One input row's three taps for the strip's eight outputs: input columns
// i0 + kx + S * lane.
template <int S>
KILN_AVX2 inline void row_taps8(const float* row, const Strip8<S>& s, __m256* t0, __m256* t1, __m256* t2) {
  if constexpr (S == 1) {
    *t0 = load_cols8(row, s.i0, s.plain, s.mask[0]);
    *t1 = load_cols8(row, s.i0 + 1, s.plain, s.mask[1]);
    *t2 = load_cols8(row, s.i0 + 2, s.plain, s.mask[2]);
  } else {
    const __m256 a = load_cols8(row, s.i0, s.plain, s.mask[0]);
    const __m256 b = load_cols8(row, s.i0 + 8, s.plain, s.mask[1]);
    const __m256 c = s.last_inside ? _mm256_broadcast_ss(row + s.i0 + 16) : _mm256_setzero_ps();
    // Even and odd columns of [0, 16), then the even ones of [2, 18).
    *t0 = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    *t1 = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
    const __m256 rot = _mm256_permutevar8x32_ps(*t0, _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 0));
    *t2 = _mm256_blend_ps(rot, c, 0x80);
  }
}

KILN_AVX2 inline __m256 row_fma8(__m256 acc, __m256 t0, __m256 t1, __m256 t2, __m256 k0, __m256 k1, __m256 k2) {
  return _mm256_fmadd_ps(k2, t2, _mm256_fmadd_ps(k1, t1, _mm256_fmadd_ps(k0, t0, acc)));
}

// Output row oy's eight columns from ox: whole unless they would run past
// the plane. The kernels below take their 8-column strips right to left, so
// a partial last strip's lanes past its row land on the next row's first
// columns, which the strip at column 0 (or this strip's next row, when the
// row is narrower than 8) writes again after.
KILN_AVX2 inline void store_strip8(float* out, int64_t oy, int64_t oh, int64_t ow, int64_t ox, __m256 v) {
  if (oy * ow + ox + 8 <= oh * ow) {
    _mm256_storeu_ps(out + oy * ow + ox, v);
  } else {
    store8(out + oy * ow + ox, ow - ox, v);
  }
}

// The AVX-512 kernels' structure (depthwise_avx512.cc) on eight lanes: stride 1 feeds
// each input row's taps to the three output rows that read it, stride 2
// carries the row two output rows share; one 8-column strip at a time,
// right to left (store_strip8).
KILN_AVX2 void depthwise3x3_avx2_s1(const float* in, int64_t h, int64_t w, const float* weights, float bias, int64_t pt,
                                    int64_t pl, float* out, int64_t oh, int64_t ow, bool clamp, float lo, float hi) {
  const __m256 k0 = _mm256_set1_ps(weights[0]), k1 = _mm256_set1_ps(weights[1]), k2 = _mm256_set1_ps(weights[2]);
  const __m256 k3 = _mm256_set1_ps(weights[3]), k4 = _mm256_set1_ps(weights[4]), k5 = _mm256_set1_ps(weights[5]);
  const __m256 k6 = _mm256_set1_ps(weights[6]), k7 = _mm256_set1_ps(weights[7]), k8 = _mm256_set1_ps(weights[8]);
  const __m256 vbias = _mm256_set1_ps(bias), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  for (int64_t ox = (ow - 1) / 8 * 8; ox >= 0; ox -= 8) {
    const Strip8<1> strip(ox, pl, w);
    __m256 a2 = vbias, a1 = vbias, a0 = vbias;
    for (int64_t r = -pt; r < oh - pt + 2; ++r) {
      if (r >= 0 && r < h) {
        __m256 t0, t1, t2;
        row_taps8<1>(in + r * w, strip, &t0, &t1, &t2);
        a2 = row_fma8(a2, t0, t1, t2, k6, k7, k8);
        a1 = row_fma8(a1, t0, t1, t2, k3, k4, k5);
        a0 = row_fma8(a0, t0, t1, t2, k0, k1, k2);
      }
      const int64_t done = r + pt - 2;  // the output row a2 completes
      if (done >= 0) store_strip8(out, done, oh, ow, ox, clamp ? clamp8(a2, vlo, vhi) : a2);
      a2 = a1;
      a1 = a0;
      a0 = vbias;
    }
  }
}

KILN_AVX2 void depthwise3x3_avx2_s2(const float* in, int64_t h, int64_t w, const float* weights, float bias, int64_t pt,
                                    int64_t pl, float* out, int64_t oh, int64_t ow, bool clamp, float lo, float hi) {
  const __m256 k0 = _mm256_set1_ps(weights[0]), k1 = _mm256_set1_ps(weights[1]), k2 = _mm256_set1_ps(weights[2]);
  const __m256 k3 = _mm256_set1_ps(weights[3]), k4 = _mm256_set1_ps(weights[4]), k5 = _mm256_set1_ps(weights[5]);
  const __m256 k6 = _mm256_set1_ps(weights[6]), k7 = _mm256_set1_ps(weights[7]), k8 = _mm256_set1_ps(weights[8]);
  const __m256 vbias = _mm256_set1_ps(bias), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  for (int64_t ox = (ow - 1) / 8 * 8; ox >= 0; ox -= 8) {
    const Strip8<2> strip(ox, pl, w);
    __m256 t0, t1, t2;
    __m256 carry = vbias;  // the bias and kernel row 0's part of the next output row
    if (-pt >= 0 && -pt < h) {
      row_taps8<2>(in + (-pt) * w, strip, &t0, &t1, &t2);
      carry = row_fma8(carry, t0, t1, t2, k0, k1, k2);
    }
    for (int64_t oy = 0; oy < oh; ++oy) {
      __m256 acc = carry;
      const int64_t r1 = 2 * oy - pt + 1, r2 = r1 + 1;
      if (r1 >= 0 && r1 < h) {
        row_taps8<2>(in + r1 * w, strip, &t0, &t1, &t2);
        acc = row_fma8(acc, t0, t1, t2, k3, k4, k5);
      }
      carry = vbias;
      if (r2 >= 0 && r2 < h) {
        row_taps8<2>(in + r2 * w, strip, &t0, &t1, &t2);
        acc = row_fma8(acc, t0, t1, t2, k6, k7, k8);
        carry = row_fma8(carry, t0, t1, t2, k0, k1, k2);
      }
      store_strip8(out, oy, oh, ow, ox, clamp ? clamp8(acc, vlo, vhi) : acc);
    }
  }
}

}  // namespace

// Strides 1 and 2 run the row-reuse kernels above (each input row's taps
// computed once per 8-column strip: on 14x14 and 7x7 planes 2 to 2.6 times
// faster than the ring below). Otherwise each output row eight columns at
// a time with the nine weights in registers. Input rows are first copied, zero-padded, into a ring of three
// row buffers on the stack (each input row once; stride 1 and 2 reuse rows
// between output rows), so every vector loads plainly. Rows too wide for
// the buffers fall back to loading the interior in place and gathering the
// border taps with a mask.
KILN_AVX2 void depthwise3x3_avx2(const float* in, int64_t h, int64_t w, const float* weights, float bias,
                                 int64_t stride, int64_t pt, int64_t pl, float* out, int64_t oh, int64_t ow, bool clamp,
                                 float lo, float hi) {
  if (oh <= 0 || ow <= 0) return;
  if (stride == 1) {
    depthwise3x3_avx2_s1(in, h, w, weights, bias, pt, pl, out, oh, ow, clamp, lo, hi);
    return;
  }
  if (stride == 2) {
    depthwise3x3_avx2_s2(in, h, w, weights, bias, pt, pl, out, oh, ow, clamp, lo, hi);
    return;
  }
  __m256 k[9];
  for (int i = 0; i < 9; ++i) k[i] = _mm256_set1_ps(weights[i]);
  const __m256 vbias = _mm256_set1_ps(bias), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  const int64_t reach = stride == 1 ? 10 : 18;  // columns one vector reads from its first tap
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  // Padded row: column -pl at index 0, room for the last vector's reach.
  constexpr int64_t kRowFloats = 1024;
  const int64_t span = (ow + 8) * stride + reach;
  alignas(32) float ring[4][kRowFloats];  // three input rows and a row of zeros
  int64_t ring_row[3] = {-1, -1, -1};     // the input row each buffer holds
  const bool padded = span <= kRowFloats;
  if (padded) memset(ring[3], 0, static_cast<size_t>(span) * sizeof(float));
  for (int64_t oy = 0; oy < oh; ++oy) {
    float* orow = out + oy * ow;
    const int64_t iy0 = oy * stride - pt;
    const float* rows[3];
    bool valid[3];
    for (int64_t ky = 0; ky < 3; ++ky) {
      const int64_t iy = iy0 + ky;
      valid[ky] = iy >= 0 && iy < h;
      rows[ky] = valid[ky] ? in + iy * w : in;
      if (!padded) continue;
      if (!valid[ky]) {
        rows[ky] = ring[3];
        continue;
      }
      float* buf = ring[iy % 3];
      if (ring_row[iy % 3] != iy) {
        const int64_t copied = w < span - pl ? w : span - pl;
        for (int64_t q = 0; q < pl && q < span; ++q) buf[q] = 0.f;
        if (copied > 0) memcpy(buf + pl, rows[ky], static_cast<size_t>(copied) * sizeof(float));
        for (int64_t q = pl + (copied > 0 ? copied : 0); q < span; ++q) buf[q] = 0.f;
        ring_row[iy % 3] = iy;
      }
      rows[ky] = buf;
    }
    if (padded) {
      if (stride == 1) {
        depthwise_row<1>(rows[0], rows[1], rows[2], weights, bias, orow, ow, clamp, lo, hi);
      } else {
        depthwise_row<2>(rows[0], rows[1], rows[2], weights, bias, orow, ow, clamp, lo, hi);
      }
      continue;
    }
    for (int64_t ox = 0; ox < ow; ox += 8) {
      const int64_t count = ow - ox < 8 ? ow - ox : 8;
      const int64_t ix = ox * stride - pl;
      __m256 acc = count == 8 && ix >= 0 && ix + reach <= w
                       ? depthwise_padded(rows, valid, k, vbias, ix, stride)
                       : depthwise_border(rows, valid, k, vbias, ix, stride, w, count);
      if (clamp) acc = clamp8(acc, vlo, vhi);
      if (count == 8) {
        _mm256_storeu_ps(orow + ox, acc);
      } else {
        _mm256_maskstore_ps(orow + ox, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lanes), acc);
      }
    }
  }
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

namespace kiln {
namespace kernels {

namespace dw_avx2 {

#define KILN_DT KILN_AVX2
using V = __m256;
constexpr int64_t kLanes = 8;
KILN_DT inline V set1(float v) { return _mm256_set1_ps(v); }
KILN_DT inline V loadu(const float* p) { return _mm256_loadu_ps(p); }
KILN_DT inline void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
KILN_DT inline V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
KILN_DT inline V vadd(V a, V b) { return _mm256_add_ps(a, b); }
KILN_DT inline V vmin(V a, V b) { return _mm256_min_ps(a, b); }
KILN_DT inline V vmax(V a, V b) { return _mm256_max_ps(a, b); }
// The first n lanes (n < 8) under a mask: through a buffer and memcpy it
// cost the tap-by-tap kernel 8% on EfficientNet-B0's 5x5s.
KILN_DT inline void store_part(float* p, int64_t n, V v) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lanes), v);
}
// Lanes 0..7 of a, then of b: the even ones and the odd ones.
KILN_DT inline void split(V a, V b, V* even, V* odd) {
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}
// p[0, 2, .., 14] and p[1, 3, .., 15].
KILN_DT inline void deinterleave(const float* p, V* even, V* odd) {
  split(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), even, odd);
}
// The lanes l with 0 <= first + l < w, and a load of only those lanes
// (vmaskmovps: the others read nothing and give 0).
using Mask = __m256i;
KILN_DT inline Mask columns_inside(int64_t first, int64_t w) {
  const __m256i col =
      _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), col),
                             _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(w)), col));
}
KILN_DT inline V load_masked(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
#include "x86/depthwise_body.inc"
#undef KILN_DT

}  // namespace dw_avx2

bool depthwise_conv_avx2(const DepthwiseConv& conv, bool clamp, float lo, float hi) {
  return dw_avx2::run(conv, clamp, lo, hi);
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
