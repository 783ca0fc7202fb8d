// vector_math (vmath.h) on AArch64: the element-wise functions of
// vmath_body.inc over 4-lane Advanced SIMD primitives, so every path
// computes the same polynomials with the same accuracy. Where NEON's
// semantics differ from x86's, the primitive follows x86's, which the body
// was written against: min/max return the second operand when either is
// NaN, conversions round to nearest even. Selected by the ISA switch
// (KILN_ISA=neon, the default on arm64; scalar keeps libm).

#include "isa_switch.h"

#if KILN_NEON

#include <arm_neon.h>
#include <string.h>

#include "arm/neon.h"
#include "vmath.h"

namespace kiln {
namespace kernels {

namespace neon {

#define KILN_VT
using V = float32x4_t;
using VI = int32x4_t;
using M = uint32x4_t;
constexpr int64_t kLanes = 4;

inline V set1(float v) { return vdupq_n_f32(v); }
inline VI iset1(int v) { return vdupq_n_s32(v); }
inline V loadu(const float* p) { return vld1q_f32(p); }
inline void storeu(float* p, V v) { vst1q_f32(p, v); }
inline V load_part(const float* p, int64_t n) {
  float buf[4] = {0.f, 0.f, 0.f, 0.f};
  memcpy(buf, p, static_cast<size_t>(n) * sizeof(float));
  return vld1q_f32(buf);
}
inline void store_part(float* p, int64_t n, V v) {
  float buf[4];
  vst1q_f32(buf, v);
  memcpy(p, buf, static_cast<size_t>(n) * sizeof(float));
}
inline V add(V a, V b) { return vaddq_f32(a, b); }
inline V sub(V a, V b) { return vsubq_f32(a, b); }
inline V mul(V a, V b) { return vmulq_f32(a, b); }
inline V div(V a, V b) { return vdivq_f32(a, b); }
inline V fmadd(V a, V b, V c) { return vfmaq_f32(c, a, b); }   // a * b + c
inline V fnmadd(V a, V b, V c) { return vfmsq_f32(c, a, b); }  // c - a * b
inline M lt(V a, V b) { return vcltq_f32(a, b); }
inline M gt(V a, V b) { return vcgtq_f32(a, b); }
inline M ge(V a, V b) { return vcgeq_f32(a, b); }
inline M eq(V a, V b) { return vceqq_f32(a, b); }
inline M isnan(V a) { return vmvnq_u32(vceqq_f32(a, a)); }
inline V select(M m, V t, V f) { return vbslq_f32(m, t, f); }
// x86's minps/maxps: a < b ? a : b, so a NaN in either gives b.
inline V vmin(V a, V b) { return vbslq_f32(vcltq_f32(a, b), a, b); }
inline V vmax(V a, V b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
inline uint32x4_t bits(V a) { return vreinterpretq_u32_f32(a); }
inline V from_bits(uint32x4_t a) { return vreinterpretq_f32_u32(a); }
inline V vand(V a, V b) { return from_bits(vandq_u32(bits(a), bits(b))); }
inline V vandnot(V a, V b) { return from_bits(vbicq_u32(bits(b), bits(a))); }  // ~a & b
inline V vor(V a, V b) { return from_bits(vorrq_u32(bits(a), bits(b))); }
inline V vabs(V a) { return vabsq_f32(a); }
inline V vneg(V a) { return vnegq_f32(a); }
inline V roundn(V a) { return vrndnq_f32(a); }
inline VI cvt_int(V a) { return vcvtnq_s32_f32(a); }
inline V cvt_float(VI a) { return vcvtq_f32_s32(a); }
inline VI as_int(V a) { return vreinterpretq_s32_f32(a); }
inline V as_float(VI a) { return vreinterpretq_f32_s32(a); }
inline VI isub(VI a, VI b) { return vsubq_s32(a, b); }
inline VI iand(VI a, VI b) { return vandq_s32(a, b); }
inline VI ior(VI a, VI b) { return vorrq_s32(a, b); }
inline VI isra1(VI a) { return vshrq_n_s32(a, 1); }
inline VI isrl23(VI a) { return vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(a), 23)); }
// 2^n for n in [-126, 127].
inline V pow2i(VI n) { return as_float(vshlq_n_s32(vaddq_s32(n, iset1(127)), 23)); }
// Whether every lane of n lies in [lo, hi] (false for a NaN lane).
inline bool all_within(V n, float lo, float hi) {
  return vminvq_u32(vandq_u32(vcgeq_f32(n, vdupq_n_f32(lo)), vcleq_f32(n, vdupq_n_f32(hi)))) == 0xFFFFFFFFu;
}
// The float bits `bits` with n added to their exponent.
inline VI iadd_exponent(VI bits, VI n) { return vaddq_s32(bits, vshlq_n_s32(n, 23)); }

#include "vmath_body.inc"
#undef KILN_VT

void vmath(MathOp op, const float* in, float* out, int64_t n, float alpha, float beta) {
  run(op, in, out, n, alpha, beta);
}

}  // namespace neon

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_NEON
