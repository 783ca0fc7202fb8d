// The row-wise normalisations with NEON (norm.cc): Softmax of a contiguous
// row with a vector e^x, and LayerNormalization of one row with its
// statistics in double, as the plain loops compute them (NaN propagation
// kept; sums reassociated).

#include "isa_switch.h"

#if KILN_NEON

#include <arm_neon.h>
#include <math.h>
#include <stdint.h>

#include "arm/neon.h"

namespace kiln {
namespace kernels {
namespace neon {

namespace {

// e^x for four lanes, within 2 ulp of expf where the result is a normal
// float: x = n ln 2 + r, |r| <= ln 2 / 2 (ln 2 in two parts, so r is exact),
// e^r by Cephes' degree-6 polynomial, times 2^n in the exponent field.
// Below -87.34 the result is 0; +inf and NaN come back as themselves;
// large finite x saturates at e^88.38 (x86/norm_avx2.cc's exp8, lane for lane).
inline float32x4_t exp4(float32x4_t x) {
  const float32x4_t hi = vdupq_n_f32(88.3762626647949f);
  const float32x4_t lo = vdupq_n_f32(-87.3365447504f);
  const uint32x4_t underflow = vcltq_f32(x, lo);
  const uint32x4_t is_inf = vceqq_f32(x, vdupq_n_f32(__builtin_inff()));
  const uint32x4_t is_nan = vmvnq_u32(vceqq_f32(x, x));
  float32x4_t v = vbslq_f32(is_nan, x, vminq_f32(hi, vmaxq_f32(lo, x)));
  const float32x4_t n = vrndnq_f32(vmulq_f32(v, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(v, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.f)), p, vmulq_f32(r, r));
  // 2^n: n + 127 in the exponent field; n = 128 (not a float's exponent)
  // is taken as 2 * 2^127.
  const int32x4_t ni = vcvtq_s32_f32(n);
  const uint32x4_t top = vcgtq_s32(ni, vdupq_n_s32(127));
  const int32x4_t e = vsubq_s32(ni, vreinterpretq_s32_u32(vandq_u32(top, vdupq_n_u32(1))));
  const float32x4_t scale = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(e, vdupq_n_s32(127)), 23));
  float32x4_t result = vmulq_f32(p, scale);
  result = vbslq_f32(top, vaddq_f32(result, result), result);
  result = vbslq_f32(is_inf, x, result);
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(result), underflow));
}

}  // namespace

// The portable kernel's steps, four lanes at a time: the maximum,
// e^(x - max) stored and summed, then scaled by 1 / sum. A NaN anywhere
// makes the sum, and so every output, NaN.
void softmax_row(const float* in, int64_t n, float* out) {
  float32x4_t vmax = vdupq_n_f32(-__builtin_inff());
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vmax = vmaxq_f32(vmax, vld1q_f32(in + i));
  float max = vmaxvq_f32(vmax);
  for (int64_t j = i; j < n; ++j) max = in[j] > max || in[j] != in[j] ? in[j] : max;
  const float32x4_t vm = vdupq_n_f32(max);
  float32x4_t vsum = vdupq_n_f32(0.f);
  for (i = 0; i + 4 <= n; i += 4) {
    const float32x4_t e = exp4(vsubq_f32(vld1q_f32(in + i), vm));
    vst1q_f32(out + i, e);
    vsum = vaddq_f32(vsum, e);
  }
  if (i < n) {
    float lanes[4] = {};
    for (int64_t j = i; j < n; ++j) lanes[j - i] = in[j];
    // Lanes past the row are 0 - max before e^x: masked out of the sum.
    float e[4];
    vst1q_f32(e, exp4(vsubq_f32(vld1q_f32(lanes), vm)));
    for (int64_t j = i; j < n; ++j) {
      out[j] = e[j - i];
      lanes[j - i] = e[j - i];
    }
    for (int64_t j = n - i; j < 4; ++j) lanes[j] = 0.f;
    vsum = vaddq_f32(vsum, vld1q_f32(lanes));
  }
  const float32x4_t scale = vdupq_n_f32(1.f / vaddvq_f32(vsum));
  for (i = 0; i + 4 <= n; i += 4) vst1q_f32(out + i, vmulq_f32(vld1q_f32(out + i), scale));
  for (; i < n; ++i) out[i] *= vgetq_lane_f32(scale, 0);
}

// Mean and variance of one row accumulated in double (two lanes per
// vector), then y = (x - mean) * inv * scale (+ bias) in float.
void layer_norm_row(const float* in, int64_t n, const float* scale, const float* bias, double epsilon, float* out,
                    float* out_mean, float* out_inv) {
  float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(in + i);
    s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(v)));
    s1 = vaddq_f64(s1, vcvt_high_f64_f32(v));
  }
  double sum = vaddvq_f64(vaddq_f64(s0, s1));
  for (int64_t j = i; j < n; ++j) sum += in[j];
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  const float64x2_t vmean = vdupq_n_f64(mean);
  s0 = vdupq_n_f64(0.0);
  s1 = s0;
  for (i = 0; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(in + i);
    const float64x2_t d0 = vsubq_f64(vcvt_f64_f32(vget_low_f32(v)), vmean);
    const float64x2_t d1 = vsubq_f64(vcvt_high_f64_f32(v), vmean);
    s0 = vfmaq_f64(s0, d0, d0);
    s1 = vfmaq_f64(s1, d1, d1);
  }
  double squares = vaddvq_f64(vaddq_f64(s0, s1));
  for (int64_t j = i; j < n; ++j) {
    const double d = in[j] - mean;
    squares += d * d;
  }
  const double var = n > 0 ? squares / static_cast<double>(n) : 0.0;
  const float inv = static_cast<float>(1.0 / sqrt(var + epsilon));
  const float m = static_cast<float>(mean);
  const float32x4_t vm = vdupq_n_f32(m), vinv = vdupq_n_f32(inv);
  for (i = 0; i + 4 <= n; i += 4) {
    float32x4_t v = vmulq_f32(vmulq_f32(vsubq_f32(vld1q_f32(in + i), vm), vinv), vld1q_f32(scale + i));
    if (bias != nullptr) v = vaddq_f32(v, vld1q_f32(bias + i));
    vst1q_f32(out + i, v);
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

}  // namespace neon
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_NEON
