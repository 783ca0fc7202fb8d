// The AVX2 transforms of the Winograd F(2x2, 3x3) convolution (winograd.cc):
// the input tiles' B^T d B and the products' A^T m A, eight tiles a vector.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <stdint.h>

#include "x86/avx2_helpers.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {

namespace {

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

}  // namespace

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

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
