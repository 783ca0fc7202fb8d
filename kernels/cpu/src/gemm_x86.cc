// AVX2+FMA versions of the GEMM micro-kernel and the depthwise 3x3
// convolution. Each function carries its own target attribute, so the file
// builds without -mavx2 and the rest of the library stays baseline x86-64;
// gemm.cc calls these only after has_avx2_fma() said yes. (Per-function
// attributes also keep AVX2 out of any inline function from a header that
// baseline code shares, which a per-file -mavx2 would not.)

#include "gemm.h"

#if KILN_GEMM_X86

#include <immintrin.h>
#include <string.h>

#define KILN_AVX2 __attribute__((target("avx2,fma")))

namespace kiln {
namespace kernels {
namespace x86 {

namespace {

// max(lo, v) then min(hi, v): NaN in v passes through (the second operand
// wins on NaN).
KILN_AVX2 inline __m256 clamp8(__m256 v, __m256 lo, __m256 hi) { return _mm256_min_ps(hi, _mm256_max_ps(lo, v)); }

// Finishes 16 columns of one row: adds C (accumulate) or the row's bias,
// clamps, stores the first nr columns.
KILN_AVX2 inline void store_row(float* row, __m256 v0, __m256 v1, int64_t nr, bool accumulate, float bias, __m256 col0,
                                __m256 col1, bool clamp, __m256 lo, __m256 hi) {
  if (nr == kGemmNr) {
    if (accumulate) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(row));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(row + 8));
    } else {
      const __m256 b = _mm256_set1_ps(bias);
      v0 = _mm256_add_ps(v0, _mm256_add_ps(b, col0));
      v1 = _mm256_add_ps(v1, _mm256_add_ps(b, col1));
    }
    if (clamp) {
      v0 = clamp8(v0, lo, hi);
      v1 = clamp8(v1, lo, hi);
    }
    _mm256_storeu_ps(row, v0);
    _mm256_storeu_ps(row + 8, v1);
    return;
  }
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(nr)), lanes);
  const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(nr) - 8), lanes);
  if (accumulate) {
    v0 = _mm256_add_ps(v0, _mm256_maskload_ps(row, m0));
    v1 = _mm256_add_ps(v1, _mm256_maskload_ps(row + 8, m1));
  } else {
    const __m256 b = _mm256_set1_ps(bias);
    v0 = _mm256_add_ps(v0, _mm256_add_ps(b, col0));
    v1 = _mm256_add_ps(v1, _mm256_add_ps(b, col1));
  }
  if (clamp) {
    v0 = clamp8(v0, lo, hi);
    v1 = clamp8(v1, lo, hi);
  }
  // The partial vector through a buffer: vmaskmovps stores are slow on
  // AMD processors (a 6x16 tile 1, 4 or 12 columns wide, k = 16: 64 to 72
  // ns -> 28 to 41 on Zen 4; a whole one takes 31).
  alignas(32) float buf[8];
  int64_t j = 0;
  if (nr >= 8) {
    _mm256_storeu_ps(row, v0);
    _mm256_store_ps(buf, v1);
    j = 8;
  } else {
    _mm256_store_ps(buf, v0);
  }
  for (; j < nr; ++j) row[j] = buf[j & 7];
}

}  // namespace

// The 6x16 tile lives in 12 registers; per step of k, two loads of B, six
// broadcasts of A and twelve FMAs.
KILN_AVX2 void micro_kernel_avx2(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                                 int64_t mr, int64_t nr, bool accumulate, const float* row_bias, const float* col_bias,
                                 bool clamp, float lo, float hi) {
  static_assert(kGemmMr == 6 && kGemmNr == 16, "the AVX2 micro-kernel computes 6x16 tiles");
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  if (nr <= 8) {
    // A tile at most half as wide (the last panel of a 7x7 image's 49
    // columns has one): the first eight columns only, half the FMAs; each
    // lane sums as in the loop below.
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; ++p) {
      const __m256 b0 = _mm256_loadu_ps(b);
      c00 = _mm256_fmadd_ps(_mm256_broadcast_ss(a), b0, c00);
      c10 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), b0, c10);
      c20 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), b0, c20);
      c30 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), b0, c30);
      c40 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), b0, c40);
      c50 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), b0, c50);
      a += kGemmMr;
      b += ldb;
    }
    kc = 0;
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
    a += kGemmMr;
    b += ldb;
  }
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  const auto bias = [row_bias](int64_t i) { return row_bias != nullptr ? row_bias[i] : 0.f; };
  // The column bias, loaded only as far as the tile is wide.
  __m256 col0 = _mm256_setzero_ps(), col1 = _mm256_setzero_ps();
  if (col_bias != nullptr) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    col0 = _mm256_maskload_ps(col_bias, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(nr)), lanes));
    col1 = _mm256_maskload_ps(col_bias + 8, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(nr) - 8), lanes));
  }
  store_row(c, c00, c01, nr, accumulate, bias(0), col0, col1, clamp, vlo, vhi);
  if (mr > 1) store_row(c + ldc, c10, c11, nr, accumulate, bias(1), col0, col1, clamp, vlo, vhi);
  if (mr > 2) store_row(c + 2 * ldc, c20, c21, nr, accumulate, bias(2), col0, col1, clamp, vlo, vhi);
  if (mr > 3) store_row(c + 3 * ldc, c30, c31, nr, accumulate, bias(3), col0, col1, clamp, vlo, vhi);
  if (mr > 4) store_row(c + 4 * ldc, c40, c41, nr, accumulate, bias(4), col0, col1, clamp, vlo, vhi);
  if (mr > 5) store_row(c + 5 * ldc, c50, c51, nr, accumulate, bias(5), col0, col1, clamp, vlo, vhi);
}

#define KILN_AVX512 __attribute__((target("avx512f,avx2,fma")))

namespace {

// max(lo, v) then min(hi, v), as clamp8 (NaN passes through). The masked
// forms: GCC 12 warns about the unmasked ones' undefined source.
KILN_AVX512 inline __m512 clamp16(__m512 v, __m512 lo, __m512 hi) {
  return _mm512_mask_min_ps(v, 0xFFFF, hi, _mm512_mask_max_ps(v, 0xFFFF, lo, v));
}

KILN_AVX512 inline void store_row16(float* row, __m512 v, __mmask16 mask, bool accumulate, float bias, __m512 col,
                                    bool clamp, __m512 lo, __m512 hi) {
  v = _mm512_add_ps(v, accumulate ? _mm512_maskz_loadu_ps(mask, row) : _mm512_add_ps(_mm512_set1_ps(bias), col));
  if (clamp) v = clamp16(v, lo, hi);
  _mm512_mask_storeu_ps(row, mask, v);
}

// v in the low half, zeros above (the masked insert: GCC 12 warns about
// _mm512_zextps256_ps512's undefined source).
KILN_AVX512 inline __m512 widen(__m256 v) {
  const __m512d zero = _mm512_setzero_pd();
  return _mm512_castpd_ps(_mm512_mask_insertf64x4(zero, 0xFF, zero, _mm256_castps_pd(v), 0));
}

}  // namespace

// One step of k for a 6x32 tile: A's six values broadcast against two
// 16-float vectors of B, twelve FMAs into c (always inlined with constant
// indices, so the accumulators stay in registers). The two-panel
// micro-kernel and the stride-2 convolution share it.
KILN_AVX512 __attribute__((always_inline)) inline void fma_step_6x32(const float* a, __m512 b0, __m512 b1,
                                                                     __m512 (&c)[kGemmMr][2]) {
  static_assert(kGemmMr == 6, "six rows of A a step");
#pragma GCC unroll 6
  for (int i = 0; i < kGemmMr; ++i) {
    const __m512 av = _mm512_set1_ps(a[i]);
    c[i][0] = _mm512_fmadd_ps(av, b0, c[i][0]);
    c[i][1] = _mm512_fmadd_ps(av, b1, c[i][1]);
  }
}

// The tile's accumulators copied out with constant indices, so that
// stores indexed by a run-time row count leave the loop's registers alone.
struct Tile6x32 {
  __m512 v[kGemmMr][2];
};
KILN_AVX512 __attribute__((always_inline)) inline Tile6x32 tile_out_6x32(const __m512 (&c)[kGemmMr][2]) {
  Tile6x32 t;
#pragma GCC unroll 6
  for (int i = 0; i < kGemmMr; ++i) {
    t.v[i][0] = c[i][0];
    t.v[i][1] = c[i][1];
  }
  return t;
}

// The same 6x16 tile in six 512-bit registers: per step of k one load of
// B and six FMAs that broadcast A from memory, a third of the AVX2
// kernel's instructions for the same work.
KILN_AVX512 void micro_kernel_avx512(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                                     int64_t mr, int64_t nr, bool accumulate, const float* row_bias,
                                     const float* col_bias, bool clamp, float lo, float hi) {
  __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
  __m512 c3 = _mm512_setzero_ps(), c4 = _mm512_setzero_ps(), c5 = _mm512_setzero_ps();
  if (nr <= 8) {
    // A tile at most half as wide (the last panel of a 7x7 image's 49
    // columns has one): 256-bit FMAs over the panel's first eight columns,
    // half the work where 512-bit operations take two passes.
    __m256 d0 = _mm256_setzero_ps(), d1 = _mm256_setzero_ps(), d2 = _mm256_setzero_ps();
    __m256 d3 = _mm256_setzero_ps(), d4 = _mm256_setzero_ps(), d5 = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; ++p) {
      const __m256 bv = _mm256_loadu_ps(b);
      d0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a), bv, d0);
      d1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), bv, d1);
      d2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), bv, d2);
      d3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), bv, d3);
      d4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), bv, d4);
      d5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), bv, d5);
      a += kGemmMr;
      b += ldb;
    }
    c0 = widen(d0);
    c1 = widen(d1);
    c2 = widen(d2);
    c3 = widen(d3);
    c4 = widen(d4);
    c5 = widen(d5);
    kc = 0;
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 bv = _mm512_loadu_ps(b);
    c0 = _mm512_fmadd_ps(_mm512_set1_ps(a[0]), bv, c0);
    c1 = _mm512_fmadd_ps(_mm512_set1_ps(a[1]), bv, c1);
    c2 = _mm512_fmadd_ps(_mm512_set1_ps(a[2]), bv, c2);
    c3 = _mm512_fmadd_ps(_mm512_set1_ps(a[3]), bv, c3);
    c4 = _mm512_fmadd_ps(_mm512_set1_ps(a[4]), bv, c4);
    c5 = _mm512_fmadd_ps(_mm512_set1_ps(a[5]), bv, c5);
    a += kGemmMr;
    b += ldb;
  }
  const __mmask16 mask = static_cast<__mmask16>(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const auto bias = [row_bias](int64_t i) { return row_bias != nullptr ? row_bias[i] : 0.f; };
  const __m512 col = col_bias != nullptr ? _mm512_maskz_loadu_ps(mask, col_bias) : _mm512_setzero_ps();
  store_row16(c, c0, mask, accumulate, bias(0), col, clamp, vlo, vhi);
  if (mr > 1) store_row16(c + ldc, c1, mask, accumulate, bias(1), col, clamp, vlo, vhi);
  if (mr > 2) store_row16(c + 2 * ldc, c2, mask, accumulate, bias(2), col, clamp, vlo, vhi);
  if (mr > 3) store_row16(c + 3 * ldc, c3, mask, accumulate, bias(3), col, clamp, vlo, vhi);
  if (mr > 4) store_row16(c + 4 * ldc, c4, mask, accumulate, bias(4), col, clamp, vlo, vhi);
  if (mr > 5) store_row16(c + 5 * ldc, c5, mask, accumulate, bias(5), col, clamp, vlo, vhi);
}

// Two whole 6x16 tiles side by side, B's panels at b0 and b1: twelve
// 512-bit accumulators, per step of k two loads of B and six broadcasts of
// A for twelve FMAs (the 6x16 kernel: one and six for six). Each output is
// the same chain of FMAs as there, so the same bits.
KILN_AVX512 void micro_kernel_avx512_x2(int64_t kc, const float* a, const float* b0, const float* b1, int64_t ldb,
                                        float* c, int64_t ldc, int64_t mr, bool accumulate, const float* row_bias,
                                        const float* col_bias, bool clamp, float lo, float hi) {
  __m512 acc[kGemmMr][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    fma_step_6x32(a, _mm512_loadu_ps(b0), _mm512_loadu_ps(b1), acc);
    a += kGemmMr;
    b0 += ldb;
    b1 += ldb;
  }
  const __mmask16 mask = 0xFFFF;
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const auto bias = [row_bias](int64_t i) { return row_bias != nullptr ? row_bias[i] : 0.f; };
  const __m512 col0 = col_bias != nullptr ? _mm512_loadu_ps(col_bias) : _mm512_setzero_ps();
  const __m512 col1 = col_bias != nullptr ? _mm512_loadu_ps(col_bias + kGemmNr) : _mm512_setzero_ps();
  const Tile6x32 out = tile_out_6x32(acc);
  for (int64_t i = 0; i < mr; ++i) {
    store_row16(c + i * ldc, out.v[i][0], mask, accumulate, bias(i), col0, clamp, vlo, vhi);
    store_row16(c + i * ldc + kGemmNr, out.v[i][1], mask, accumulate, bias(i), col1, clamp, vlo, vhi);
  }
}

namespace {

// Even and odd elements of the 16 floats at p: {p[0], p[2], .., p[14]} and
// {p[1], p[3], .., p[15]}.
KILN_AVX2 inline void deinterleave(const float* p, __m256* even, __m256* odd) {
  const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
  // shuffle_ps works per 128-bit half: [a0 a2 b0 b2 | a4 a6 b4 b6]; the
  // 64-bit permute puts the halves in order.
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

// deinterleave of columns [c, c + 16) of a row of w floats, those outside
// [0, w) read as 0 (masked loads: nothing outside the row is read).
KILN_AVX2 inline void deinterleave_cols(const float* row, int64_t c, int64_t w, __m256* even, __m256* odd) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i width = _mm256_set1_epi32(static_cast<int>(w)), minus1 = _mm256_set1_epi32(-1);
  const __m256i col0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(c)), lanes);
  const __m256i col1 = _mm256_add_epi32(col0, _mm256_set1_epi32(8));
  const __m256i in0 = _mm256_and_si256(_mm256_cmpgt_epi32(col0, minus1), _mm256_cmpgt_epi32(width, col0));
  const __m256i in1 = _mm256_and_si256(_mm256_cmpgt_epi32(col1, minus1), _mm256_cmpgt_epi32(width, col1));
  // The address of column c without forming a pointer outside the row.
  const uintptr_t at = reinterpret_cast<uintptr_t>(row) + static_cast<uintptr_t>(c * 4);
  const __m256 a = _mm256_maskload_ps(reinterpret_cast<const float*>(at), in0);
  const __m256 b = _mm256_maskload_ps(reinterpret_cast<const float*>(at + 8 * sizeof(float)), in1);
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

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

// The first n (1 to 8) floats of v to p.
KILN_AVX2 inline void store8(float* p, int64_t n, __m256 v) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  alignas(32) float buf[8];
  _mm256_store_ps(buf, v);
  memcpy(p, buf, static_cast<size_t>(n) * sizeof(float));
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

// The AVX-512 kernels' structure (below) on eight lanes: stride 1 feeds
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

namespace {

// The first n lanes (none for n <= 0, all for n >= 16).
KILN_AVX512 inline __mmask16 first_lanes(int64_t n) {
  const int64_t c = n < 0 ? 0 : (n > 16 ? 16 : n);
  return static_cast<__mmask16>((1u << c) - 1);
}

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

namespace {

// Input row `row` (w floats; all zeros when !inside) padded by pl zeros on
// the left and split by parity: padded column p goes to even[p / 2] (p
// even) or odd[p / 2] (p odd), for p < 2 * half; the rest of both is 0.
// odd = even + half. Sixteen columns per step where they lie in the row.
KILN_AVX2 void split_row_s2(const float* row, bool inside, int64_t w, int64_t pl, int64_t half, float* even) {
  float* odd = even + half;
  memset(even, 0, static_cast<size_t>(2 * half) * sizeof(float));
  if (!inside) return;
  const int64_t end = w < 2 * half - pl ? w : 2 * half - pl;  // columns that land in the buffers
  const int64_t first = pl & 1;                               // columns from here land on even p
  int64_t ix = first;
  for (; ix + 16 <= end; ix += 16) {
    __m256 e, o;
    deinterleave(row + ix, &e, &o);
    const int64_t q = (ix + pl) >> 1;
    _mm256_storeu_ps(even + q, e);
    _mm256_storeu_ps(odd + q, o);
  }
  for (int64_t i = 0; i < end; ++i) {
    if (i == first && ix > first) i = ix;  // the vector part is done
    if (i >= end) break;
    const int64_t p = i + pl;
    even[(p & 1) * half + (p >> 1)] = row[i];
  }
}

// The taps of output row oy of a stride-2 convolution: every input row it
// reads (channel ci, kernel row ky) split by split_row_s2 into `buffer`
// (2 * half floats each), and tap[(ci * kh + ky) * kw + kx] pointing at the
// column of the split row where output column 0 of that tap lies. Padded
// column q of input row (ci, ky) is column q - pl of the image.
KILN_AVX2 void s2_taps(const float* x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t pt, int64_t pl,
                       int64_t oy, int64_t half, float* buffer, const float** tap) {
  for (int64_t ci = 0; ci < c; ++ci) {
    for (int64_t ky = 0; ky < kh; ++ky) {
      float* even = buffer + (ci * kh + ky) * 2 * half;
      float* odd = even + half;
      const int64_t iy = oy * 2 - pt + ky;
      const bool inside = iy >= 0 && iy < h;
      split_row_s2(inside ? x + (ci * h + iy) * w : x, inside, w, pl, half, even);
      for (int64_t kx = 0; kx < kw; ++kx) tap[(ci * kh + ky) * kw + kx] = (kx % 2 == 0 ? even : odd) + kx / 2;
    }
  }
}

}  // namespace

// A stride-2 convolution read straight from the image. Per output row,
// every input row it reads (channel c, kernel row ky) is copied once into a
// zero-padded buffer split into even and odd columns, so tap (c, ky, kx) of
// 16 consecutive outputs is one plain load; the taps then go through the
// micro-kernel's 6x32 tile against the packed weights (six output channels
// by two 16-column strips), no im2col panel.
KILN_AVX512 bool conv_s2_avx512(const float* x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t pt,
                                int64_t pl, const float* packed_weights, int64_t m, const float* bias, float* y,
                                int64_t oh, int64_t ow, int64_t oy0, int64_t oy1, bool clamp, float lo, float hi) {
  const int64_t k = c * kh * kw;
  const int64_t strips = (ow + 15) / 16 * 16;       // outputs computed per row, whole strips
  const int64_t half = strips + (kw + 1) / 2 + 16;  // floats of one even or odd column buffer
  constexpr int64_t kBufferFloats = 12288;          // 48 KiB of stack
  constexpr int64_t kMaxTaps = 256;
  if (k > kMaxTaps || c * kh * 2 * half > kBufferFloats || pl < 0 || pt < 0) return false;
  alignas(64) float buffer[kBufferFloats];
  const float* tap[kMaxTaps];
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi), zero = _mm512_setzero_ps();
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    s2_taps(x, c, h, w, kh, kw, pt, pl, oy, half, buffer, tap);
    float* yrow = y + oy * ow;
    for (int64_t i0 = 0; i0 < m; i0 += kGemmMr) {
      const int64_t mr = m - i0 < kGemmMr ? m - i0 : kGemmMr;
      const float* a_panel = packed_weights + i0 * k;
      for (int64_t ox = 0; ox < ow; ox += 32) {
        __m512 acc[kGemmMr][2];
        for (auto& row : acc) row[0] = row[1] = zero;
        const float* a = a_panel;
        for (int64_t p = 0; p < k; ++p, a += kGemmMr) {
          fma_step_6x32(a, _mm512_loadu_ps(tap[p] + ox), _mm512_loadu_ps(tap[p] + ox + 16), acc);
        }
        const __mmask16 m0 = first_lanes(ow - ox), m1 = first_lanes(ow - ox - 16);
        const Tile6x32 done = tile_out_6x32(acc);
        for (int64_t i = 0; i < mr; ++i) {
          float* out = yrow + (i0 + i) * oh * ow + ox;
          const float b = bias != nullptr ? bias[i0 + i] : 0.f;
          store_row16(out, done.v[i][0], m0, false, b, zero, clamp, vlo, vhi);
          if (m1 != 0) store_row16(out + 16, done.v[i][1], m1, false, b, zero, clamp, vlo, vhi);
        }
      }
    }
  }
  return true;
}

// The AVX-512 kernel's structure on eight lanes: the micro-kernel's 6x16
// AVX2 tile (six output channels by two 8-column vectors, twelve
// accumulators) against the packed weights, the taps plain loads from the
// parity-split rows. A row's last partial vector is stored through a small
// buffer (no vmaskmovps).
KILN_AVX2 bool conv_s2_avx2(const float* x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t pt,
                            int64_t pl, const float* packed_weights, int64_t m, const float* bias, float* y, int64_t oh,
                            int64_t ow, int64_t oy0, int64_t oy1, bool clamp, float lo, float hi) {
  const int64_t k = c * kh * kw;
  const int64_t strips = (ow + 15) / 16 * 16;      // outputs computed per row, whole 16-column steps
  const int64_t half = strips + (kw + 1) / 2 + 8;  // floats of one even or odd column buffer
  constexpr int64_t kBufferFloats = 12288;         // 48 KiB of stack
  constexpr int64_t kMaxTaps = 256;
  if (k > kMaxTaps || k < 1 || c * kh * 2 * half > kBufferFloats || pl < 0 || pt < 0) return false;
  alignas(32) float buffer[kBufferFloats];
  const float* tap[kMaxTaps];
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi), zero = _mm256_setzero_ps();
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    s2_taps(x, c, h, w, kh, kw, pt, pl, oy, half, buffer, tap);
    float* yrow = y + oy * ow;
    for (int64_t i0 = 0; i0 < m; i0 += kGemmMr) {
      const int64_t mr = m - i0 < kGemmMr ? m - i0 : kGemmMr;
      const float* a_panel = packed_weights + i0 * k;
      for (int64_t ox = 0; ox < ow; ox += 16) {
        __m256 c00 = zero, c01 = zero, c10 = zero, c11 = zero, c20 = zero, c21 = zero;
        __m256 c30 = zero, c31 = zero, c40 = zero, c41 = zero, c50 = zero, c51 = zero;
        const float* a = a_panel;
        for (int64_t p = 0; p < k; ++p, a += kGemmMr) {
          const __m256 b0 = _mm256_loadu_ps(tap[p] + ox), b1 = _mm256_loadu_ps(tap[p] + ox + 8);
          __m256 av = _mm256_broadcast_ss(a);
          c00 = _mm256_fmadd_ps(av, b0, c00);
          c01 = _mm256_fmadd_ps(av, b1, c01);
          av = _mm256_broadcast_ss(a + 1);
          c10 = _mm256_fmadd_ps(av, b0, c10);
          c11 = _mm256_fmadd_ps(av, b1, c11);
          av = _mm256_broadcast_ss(a + 2);
          c20 = _mm256_fmadd_ps(av, b0, c20);
          c21 = _mm256_fmadd_ps(av, b1, c21);
          av = _mm256_broadcast_ss(a + 3);
          c30 = _mm256_fmadd_ps(av, b0, c30);
          c31 = _mm256_fmadd_ps(av, b1, c31);
          av = _mm256_broadcast_ss(a + 4);
          c40 = _mm256_fmadd_ps(av, b0, c40);
          c41 = _mm256_fmadd_ps(av, b1, c41);
          av = _mm256_broadcast_ss(a + 5);
          c50 = _mm256_fmadd_ps(av, b0, c50);
          c51 = _mm256_fmadd_ps(av, b1, c51);
        }
        const __m256 acc[kGemmMr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
        const int64_t n = ow - ox;  // columns of this step in the row (more than 16: all 16)
        for (int64_t i = 0; i < mr; ++i) {
          float* out = yrow + (i0 + i) * oh * ow + ox;
          const __m256 b = _mm256_set1_ps(bias != nullptr ? bias[i0 + i] : 0.f);
          __m256 v0 = _mm256_add_ps(acc[i][0], b), v1 = _mm256_add_ps(acc[i][1], b);
          if (clamp) {
            v0 = clamp8(v0, vlo, vhi);
            v1 = clamp8(v1, vlo, vhi);
          }
          store8(out, n, v0);
          if (n > 8) store8(out + 8, n - 8, v1);
        }
      }
    }
  }
  return true;
}

// Eight outputs per step from 16 loaded floats (their even lanes), while
// the 16 floats lie inside what may be read; the rest one by one.
KILN_AVX2 void copy_stride2_avx2(const float* src, int64_t count, int64_t avail, float* dst) {
  int64_t q = 0;
  for (; q + 8 <= count && 2 * q + 16 <= avail; q += 8) {
    __m256 even, odd;
    deinterleave(src + 2 * q, &even, &odd);
    _mm256_storeu_ps(dst + q, even);
  }
  for (; q < count; ++q) dst[q] = src[2 * q];
}

// out[j] (+)= sum_p a[p] * B(p, j) for one row of A: B transposed (rows of
// B^T are contiguous: dot products, four accumulators) or not (rows of B
// scaled and added, eight columns at a time).
KILN_AVX2 void gemv_avx2(int64_t n, int64_t k, const float* a, const float* b, int64_t ldb, bool trans_b, float* out) {
  if (trans_b) {
    for (int64_t j = 0; j < n; ++j) {
      const float* bj = b + j * ldb;
      __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
      int64_t p = 0;
      for (; p + 32 <= k; p += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p), _mm256_loadu_ps(bj + p), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 8), _mm256_loadu_ps(bj + p + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 16), _mm256_loadu_ps(bj + p + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 24), _mm256_loadu_ps(bj + p + 24), s3);
      }
      for (; p + 8 <= k; p += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p), _mm256_loadu_ps(bj + p), s0);
      const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
      const __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
      const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
      float sum = _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
      for (; p < k; ++p) sum += a[p] * bj[p];
      out[j] = sum;
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) out[j] = 0.f;
  for (int64_t p = 0; p < k; ++p) {
    const __m256 av = _mm256_set1_ps(a[p]);
    const float* bp = b + p * ldb;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      _mm256_storeu_ps(out + j, _mm256_fmadd_ps(av, _mm256_loadu_ps(bp + j), _mm256_loadu_ps(out + j)));
    }
    for (; j < n; ++j) out[j] += a[p] * bp[j];
  }
}

// A prepacked six-row panel times one column, read contiguously: float j
// of the panel (column j / 6, row j % 6) meets bx[j], the column with each
// entry repeated six times. 48 floats (eight columns) per step in six
// accumulators whose lanes keep their row (48 and the 24-float step below
// are multiples of 6); the lanes are folded into the six rows at the end
// by summing the 24 floats as four runs of six.
KILN_AVX2 void panels_gemv_avx2(const float* a, int64_t stride, int64_t panels, const float* bx, int64_t len,
                                float* out) {
  for (int64_t q = 0; q < panels; ++q) {
    const float* ap = a + q * stride;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps();
    __m256 s3 = _mm256_setzero_ps(), s4 = _mm256_setzero_ps(), s5 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 48 <= len; j += 48) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + j), _mm256_loadu_ps(bx + j), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + j + 8), _mm256_loadu_ps(bx + j + 8), s1);
      s2 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + j + 16), _mm256_loadu_ps(bx + j + 16), s2);
      s3 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + j + 24), _mm256_loadu_ps(bx + j + 24), s3);
      s4 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + j + 32), _mm256_loadu_ps(bx + j + 32), s4);
      s5 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + j + 40), _mm256_loadu_ps(bx + j + 40), s5);
    }
    if (j + 24 <= len) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + j), _mm256_loadu_ps(bx + j), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + j + 8), _mm256_loadu_ps(bx + j + 8), s1);
      s2 = _mm256_fmadd_ps(_mm256_loadu_ps(ap + j + 16), _mm256_loadu_ps(bx + j + 16), s2);
      j += 24;
    }
    float lanes[32];  // 24 lanes, then zeros the last run of six reads past
    _mm256_storeu_ps(lanes, _mm256_add_ps(s0, s3));
    _mm256_storeu_ps(lanes + 8, _mm256_add_ps(s1, s4));
    _mm256_storeu_ps(lanes + 16, _mm256_add_ps(s2, s5));
    _mm256_storeu_ps(lanes + 24, _mm256_setzero_ps());
    const __m256 f = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(lanes), _mm256_loadu_ps(lanes + 6)),
                                   _mm256_add_ps(_mm256_loadu_ps(lanes + 12), _mm256_loadu_ps(lanes + 18)));
    float rows[8];
    _mm256_storeu_ps(rows, f);
    for (; j < len; ++j) rows[j % kGemmMr] += ap[j] * bx[j];
    memcpy(out + q * kGemmMr, rows, kGemmMr * sizeof(float));
  }
}

KILN_AVX2 void clamp_avx2(float* data, int64_t n, float lo, float hi, bool relu) {
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(data + i);
    // max_ps returns its second operand when either is NaN.
    _mm256_storeu_ps(data + i, relu ? _mm256_max_ps(v, vlo) : _mm256_min_ps(vhi, _mm256_max_ps(vlo, v)));
  }
  for (; i < n; ++i) {
    const float x = data[i];
    data[i] = relu ? (x > lo ? x : lo) : (x < lo ? lo : (x > hi ? hi : x));
  }
}

// Winograd F(2x2, 3x3) input transform of up to eight consecutive tiles
// (t_first .. t_first + count - 1, tw tiles per row) of one channel: the
// 4x4 patches read (outside the image reads 0), B^T d B on
// vectors, V_xi (lane q: tile q) stored to out + xi * stride_xi: lanes
// [0, count), or all eight where `room` (the lanes the caller lets it
// write) is eight or more, lanes past count then holding values the caller
// overwrites (whole-vector stores: vmaskmovps stores are slow on AMD).
KILN_AVX2 void winograd_input_avx2(const float* image, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t tw,
                                   int64_t t_first, int64_t count, float* out, int64_t stride_xi, int64_t room) {
  __m256 d[4][4];
  // Tiles side by side in one tile row (winograd.cc's caller cuts its runs
  // at the ends of tile rows): each of the four input rows' 18 columns
  // under eight tiles read plainly (or, at the image's left or right edge,
  // with loads masked to the row; a row outside the image is zeros) and
  // split into even and odd lanes: tap columns 0, 1 from the first 16
  // floats, 2, 3 from the 16 two further on. Tiles that straddle tile rows
  // gather every element with a mask: their lane indices go through the
  // stack, and that store-to-load round trip and the zero-padded copy the
  // edges took before were most of this function's time on small planes.
  const int64_t tx = t_first % tw, r0 = 2 * (t_first / tw) - pt, c0 = 2 * tx - pl;
  if (count >= 1 && count <= 8 && tx + count <= tw) {
    for (int i = 0; i < 4; ++i) {
      if (r0 + i < 0 || r0 + i >= h) {
        for (int j = 0; j < 4; ++j) d[i][j] = _mm256_setzero_ps();
        continue;
      }
      const float* row = image + (r0 + i) * w;
      if (c0 >= 0 && c0 + 18 <= w) {
        deinterleave(row + c0, &d[i][0], &d[i][1]);
        deinterleave(row + c0 + 2, &d[i][2], &d[i][3]);
      } else {
        deinterleave_cols(row, c0, w, &d[i][0], &d[i][1]);
        deinterleave_cols(row, c0 + 2, w, &d[i][2], &d[i][3]);
      }
    }
  } else {
    alignas(32) int32_t row0[8], col0[8];
    for (int64_t q = 0; q < 8; ++q) {
      const int64_t t = t_first + (q < count ? q : 0);
      row0[q] = static_cast<int32_t>(2 * (t / tw) - pt);
      col0[q] = static_cast<int32_t>(2 * (t % tw) - pl);
    }
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lanes);
    const __m256i vr = _mm256_load_si256(reinterpret_cast<const __m256i*>(row0));
    const __m256i vc = _mm256_load_si256(reinterpret_cast<const __m256i*>(col0));
    const __m256i vh = _mm256_set1_epi32(static_cast<int>(h)), vw = _mm256_set1_epi32(static_cast<int>(w));
    const __m256i minus1 = _mm256_set1_epi32(-1);
    __m256i col_ok[4], col[4];
    for (int j = 0; j < 4; ++j) {
      col[j] = _mm256_add_epi32(vc, _mm256_set1_epi32(j));
      col_ok[j] = _mm256_and_si256(_mm256_cmpgt_epi32(col[j], minus1), _mm256_cmpgt_epi32(vw, col[j]));
    }
    for (int i = 0; i < 4; ++i) {
      const __m256i row = _mm256_add_epi32(vr, _mm256_set1_epi32(i));
      const __m256i row_ok =
          _mm256_and_si256(live, _mm256_and_si256(_mm256_cmpgt_epi32(row, minus1), _mm256_cmpgt_epi32(vh, row)));
      const __m256i base = _mm256_mullo_epi32(row, vw);
      for (int j = 0; j < 4; ++j) {
        const __m256 mask = _mm256_castsi256_ps(_mm256_and_si256(row_ok, col_ok[j]));
        d[i][j] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), image, _mm256_add_epi32(base, col[j]), mask, 4);
      }
    }
  }
  __m256 r[4][4];
  for (int j = 0; j < 4; ++j) {
    r[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
    r[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
    r[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
    r[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
  }
  if (count >= 8 || room >= 8) {
    for (int i = 0; i < 4; ++i) {
      _mm256_storeu_ps(out + (i * 4 + 0) * stride_xi, _mm256_sub_ps(r[i][0], r[i][2]));
      _mm256_storeu_ps(out + (i * 4 + 1) * stride_xi, _mm256_add_ps(r[i][1], r[i][2]));
      _mm256_storeu_ps(out + (i * 4 + 2) * stride_xi, _mm256_sub_ps(r[i][2], r[i][1]));
      _mm256_storeu_ps(out + (i * 4 + 3) * stride_xi, _mm256_sub_ps(r[i][1], r[i][3]));
    }
    return;
  }
  const __m256i live =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int i = 0; i < 4; ++i) {
    _mm256_maskstore_ps(out + (i * 4 + 0) * stride_xi, live, _mm256_sub_ps(r[i][0], r[i][2]));
    _mm256_maskstore_ps(out + (i * 4 + 1) * stride_xi, live, _mm256_add_ps(r[i][1], r[i][2]));
    _mm256_maskstore_ps(out + (i * 4 + 2) * stride_xi, live, _mm256_sub_ps(r[i][2], r[i][1]));
    _mm256_maskstore_ps(out + (i * 4 + 3) * stride_xi, live, _mm256_sub_ps(r[i][1], r[i][3]));
  }
}

// Winograd output transform of up to eight consecutive tiles of one output
// channel: products M_xi at prod + xi * stride_xi (lane q: tile q),
// A^T m A plus the bias, clamped when `clamp`, written inside the plane.
KILN_AVX2 void winograd_output_avx2(const float* prod, int64_t stride_xi, int64_t t_first, int64_t count, int64_t tw,
                                    float bias, float* plane, int64_t oh, int64_t ow, bool clamp, float lo, float hi) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lanes);
  __m256 s[2][4];
  for (int j = 0; j < 4; ++j) {
    const __m256 m0 = _mm256_maskload_ps(prod + (0 * 4 + j) * stride_xi, live);
    const __m256 m1 = _mm256_maskload_ps(prod + (1 * 4 + j) * stride_xi, live);
    const __m256 m2 = _mm256_maskload_ps(prod + (2 * 4 + j) * stride_xi, live);
    const __m256 m3 = _mm256_maskload_ps(prod + (3 * 4 + j) * stride_xi, live);
    s[0][j] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
    s[1][j] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
  }
  const __m256 vb = _mm256_set1_ps(bias), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  __m256 y[2][2];
  for (int i = 0; i < 2; ++i) {
    y[i][0] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s[i][0], s[i][1]), s[i][2]), vb);
    y[i][1] = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(s[i][1], s[i][2]), s[i][3]), vb);
    if (clamp) {
      y[i][0] = clamp8(y[i][0], vlo, vhi);
      y[i][1] = clamp8(y[i][1], vlo, vhi);
    }
  }
  const int64_t ty = t_first / tw, tx = t_first % tw;
  if (count == 8 && tx + 8 <= tw && 2 * ty + 1 < oh && 2 * (tx + 8) <= ow) {
    // Eight whole tiles side by side: each output row is 16 pixels, the two
    // columns of every tile interleaved.
    for (int i = 0; i < 2; ++i) {
      const __m256 lo4 = _mm256_unpacklo_ps(y[i][0], y[i][1]);  // t0 t0' t1 t1' | t4 t4' t5 t5'
      const __m256 hi4 = _mm256_unpackhi_ps(y[i][0], y[i][1]);  // t2 t2' t3 t3' | t6 t6' t7 t7'
      float* row = plane + (2 * ty + i) * ow + 2 * tx;
      _mm256_storeu_ps(row, _mm256_permute2f128_ps(lo4, hi4, 0x20));
      _mm256_storeu_ps(row + 8, _mm256_permute2f128_ps(lo4, hi4, 0x31));
    }
    return;
  }
  alignas(32) float v[2][2][8];
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) _mm256_store_ps(v[i][j], y[i][j]);
  }
  for (int64_t q = 0; q < count; ++q) {
    const int64_t t = t_first + q;
    const int64_t oy = 2 * (t / tw), ox = 2 * (t % tw);
    for (int64_t i = 0; i < 2 && oy + i < oh; ++i) {
      for (int64_t j = 0; j < 2 && ox + j < ow; ++j) plane[(oy + i) * ow + ox + j] = v[i][j][q];
    }
  }
}

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

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_GEMM_X86
