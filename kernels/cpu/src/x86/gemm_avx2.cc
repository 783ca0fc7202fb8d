// The AVX2+FMA paths of the packed GEMM (gemm.cc): the 6x16 micro-kernel,
// the one-row products (gemv_avx2, panels_gemv_avx2) and the stride-2 copy
// of im2col packing. Each function carries KILN_AVX2 (isa_switch.h), so the
// file builds without -mavx2 and the rest of the library stays baseline
// x86-64; gemm.cc calls these only after has_avx2_fma() said yes.
// (Per-function attributes also keep AVX2 out of any inline function from a
// header that baseline code shares, which a per-file -mavx2 would not.)

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <string.h>

#include "kiln/kernels/gemm_blocking.h"
#include "x86/avx2_helpers.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {

namespace {

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
  prefetch_tile(c, ldc, mr, nr);
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

// Eight outputs per step from 16 loaded floats (their even lanes), while
// the 16 floats lie inside what may be read; the rest one by one.
KILN_AVX2 void gather_panel_avx2(const float* x, int64_t plane, const int32_t* offsets, int64_t nr, int64_t kc,
                                 float* dst) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i n = _mm256_set1_epi32(static_cast<int>(nr));
  const __m256 mask0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(n, lanes));
  const __m256 mask1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(n, _mm256_add_epi32(lanes, _mm256_set1_epi32(8))));
  const __m256i off0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets));
  const __m256i off1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets + 8));
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const float* image = x + p * plane;
    _mm256_storeu_ps(dst + p * kGemmNr, _mm256_mask_i32gather_ps(zero, image, off0, mask0, 4));
    _mm256_storeu_ps(dst + p * kGemmNr + 8, _mm256_mask_i32gather_ps(zero, image, off1, mask1, 4));
  }
}

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

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
