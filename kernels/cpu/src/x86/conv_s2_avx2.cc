// The stride-2 convolution of first layers straight from the image
// (gemm.h's DirectConvS2) with AVX2+FMA: per output row, every input row it
// reads is split by parity into a zero-padded buffer (conv_s2_taps, which
// the AVX-512 kernel shares), and the taps go through the micro-kernel's
// 6x16 tile against the packed weights.

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

}  // namespace

// The taps of output row oy of a stride-2 convolution: every input row it
// reads (channel ci, kernel row ky) split by split_row_s2 into `buffer`
// (2 * half floats each), and tap[(ci * kh + ky) * kw + kx] pointing at the
// column of the split row where output column 0 of that tap lies. Padded
// column q of input row (ci, ky) is column q - pl of the image.
KILN_AVX2 void conv_s2_taps(const float* x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t pt,
                            int64_t pl, int64_t oy, int64_t half, float* buffer, const float** tap) {
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
    conv_s2_taps(x, c, h, w, kh, kw, pt, pl, oy, half, buffer, tap);
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

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
