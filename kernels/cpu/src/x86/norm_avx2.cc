// AVX2+FMA versions of the row-wise normalisations: Softmax of a contiguous
// row and LayerNormalization of one row, each function carrying KILN_AVX2
// (isa_switch.h); norm.cc calls these only after has_avx2_fma().

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <math.h>

#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {
namespace {

// e^x for eight lanes, within 2 ulp of expf over the range where the
// result is a normal float: x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in
// two parts, so r is exact), e^r by a degree-6 polynomial (Cephes' expf
// coefficients), times 2^n built in the exponent field. Below -87.33 (where
// e^x is no longer a normal float) the result is 0; +inf and NaN come back
// as +inf and NaN; large finite x saturates at e^88.37.
KILN_AVX2 inline __m256 exp8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f);
  const __m256 lo = _mm256_set1_ps(-87.3365447504f);
  // max/min return their second operand when either is NaN: NaN survives.
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 is_inf = _mm256_cmp_ps(x, _mm256_set1_ps(__builtin_inff()), _CMP_EQ_OQ);
  __m256 v = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
  v = _mm256_blendv_ps(v, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), v);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  // 2^n: n + 127 in the exponent field. n lies in [-126, 128); 2^128 is
  // not a float, so e^88.37 is taken as 2 * (p * 2^127).
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i top = _mm256_cmpgt_epi32(ni, _mm256_set1_epi32(127));
  const __m256i e = _mm256_sub_epi32(ni, _mm256_and_si256(top, _mm256_set1_epi32(1)));
  const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
  __m256 result = _mm256_mul_ps(p, scale);
  result = _mm256_blendv_ps(result, _mm256_add_ps(result, result), _mm256_castsi256_ps(top));
  result = _mm256_blendv_ps(result, x, is_inf);
  return _mm256_andnot_ps(underflow, result);
}

KILN_AVX2 inline float sum8(__m256 v) {
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
}

KILN_AVX2 inline double sum4d(__m256d v) {
  const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

KILN_AVX2 inline __m256i tail_mask(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace

// The scalar kernel's steps, eight lanes at a time: the maximum, e^(x - max)
// stored and summed, then scaled by 1 / sum. A NaN anywhere makes the sum,
// and so every output, NaN, as in the scalar kernel.
KILN_AVX2 void softmax_row_avx2(const float* in, int64_t n, float* out) {
  __m256 vmax = _mm256_set1_ps(-__builtin_inff());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(in + i));
  const __m256 tail_max =
      _mm256_blendv_ps(_mm256_set1_ps(-__builtin_inff()), _mm256_maskload_ps(in + i, tail_mask(n - i)),
                       _mm256_castsi256_ps(tail_mask(n - i)));
  vmax = _mm256_max_ps(vmax, tail_max);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  const float max = _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
  const __m256 vm = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(in + i), vm));
    _mm256_storeu_ps(out + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  if (i < n) {
    const __m256i mask = tail_mask(n - i);
    const __m256 e =
        _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(in + i, mask), vm)), _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(out + i, mask, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  const __m256 scale = _mm256_set1_ps(1.f / sum8(vsum));
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(out + i), scale));
  if (i < n) {
    const __m256i mask = tail_mask(n - i);
    _mm256_maskstore_ps(out + i, mask, _mm256_mul_ps(_mm256_maskload_ps(out + i, mask), scale));
  }
}

// Mean and variance of one row accumulated in double (four lanes per
// vector), then y = (x - mean) * inv * scale (+ bias) in float.
KILN_AVX2 void layer_norm_row_avx2(const float* in, int64_t n, const float* scale, const float* bias, double epsilon,
                                   float* out, float* out_mean, float* out_inv) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  double sum = sum4d(_mm256_add_pd(s0, s1));
  for (int64_t j = i; j < n; ++j) sum += in[j];
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  const __m256d vmean = _mm256_set1_pd(mean);
  s0 = _mm256_setzero_pd();
  s1 = _mm256_setzero_pd();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);
    const __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vmean);
    const __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vmean);
    s0 = _mm256_fmadd_pd(d0, d0, s0);
    s1 = _mm256_fmadd_pd(d1, d1, s1);
  }
  double squares = sum4d(_mm256_add_pd(s0, s1));
  for (int64_t j = i; j < n; ++j) {
    const double d = in[j] - mean;
    squares += d * d;
  }
  const double var = n > 0 ? squares / static_cast<double>(n) : 0.0;
  const float inv = static_cast<float>(1.0 / sqrt(var + epsilon));
  const float m = static_cast<float>(mean);
  const __m256 vm = _mm256_set1_ps(m), vinv = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 v =
        _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(in + i), vm), vinv), _mm256_loadu_ps(scale + i));
    if (bias != nullptr) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + i));
    _mm256_storeu_ps(out + i, v);
  }
  for (; i < n; ++i) {
    const float v = (in[i] - m) * inv * scale[i];
    out[i] = bias != nullptr ? v + bias[i] : v;
  }
  if (out_mean != nullptr) {
    *out_mean = m;
    *out_inv = inv;
  }
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
