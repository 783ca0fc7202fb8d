// vector_math (vmath.h) with AVX2+FMA, 8 lanes: the element-wise functions
// of vmath_body.inc over 256-bit primitives, each carrying KILN_AVX2
// (isa_switch.h), so the library stays baseline x86-64. Tails go through an
// 8-float stack buffer (no vmaskmovps, which is slow on AMD).

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <string.h>

#include "vmath.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {

namespace avx2 {

#define KILN_VT KILN_AVX2
using V = __m256;
using VI = __m256i;
using M = __m256;
constexpr int64_t kLanes = 8;

KILN_VT inline V set1(float v) { return _mm256_set1_ps(v); }
KILN_VT inline VI iset1(int v) { return _mm256_set1_epi32(v); }
KILN_VT inline V loadu(const float* p) { return _mm256_loadu_ps(p); }
KILN_VT inline void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
KILN_VT inline V load_part(const float* p, int64_t n) {
  float buf[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  memcpy(buf, p, static_cast<size_t>(n) * sizeof(float));
  return _mm256_loadu_ps(buf);
}
KILN_VT inline void store_part(float* p, int64_t n, V v) {
  float buf[8];
  _mm256_storeu_ps(buf, v);
  memcpy(p, buf, static_cast<size_t>(n) * sizeof(float));
}
KILN_VT inline V add(V a, V b) { return _mm256_add_ps(a, b); }
KILN_VT inline V sub(V a, V b) { return _mm256_sub_ps(a, b); }
KILN_VT inline V mul(V a, V b) { return _mm256_mul_ps(a, b); }
KILN_VT inline V div(V a, V b) { return _mm256_div_ps(a, b); }
KILN_VT inline V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
KILN_VT inline V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
KILN_VT inline V vmin(V a, V b) { return _mm256_min_ps(a, b); }
KILN_VT inline V vmax(V a, V b) { return _mm256_max_ps(a, b); }
KILN_VT inline V vand(V a, V b) { return _mm256_and_ps(a, b); }
KILN_VT inline V vandnot(V a, V b) { return _mm256_andnot_ps(a, b); }
KILN_VT inline V vor(V a, V b) { return _mm256_or_ps(a, b); }
KILN_VT inline V vabs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
KILN_VT inline V vneg(V a) { return _mm256_xor_ps(_mm256_set1_ps(-0.f), a); }
KILN_VT inline V roundn(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
KILN_VT inline M lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
KILN_VT inline M gt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
KILN_VT inline M ge(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
KILN_VT inline M eq(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
KILN_VT inline M isnan(V a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
KILN_VT inline V select(M m, V t, V f) { return _mm256_blendv_ps(f, t, m); }
KILN_VT inline VI cvt_int(V a) { return _mm256_cvtps_epi32(a); }
KILN_VT inline V cvt_float(VI a) { return _mm256_cvtepi32_ps(a); }
KILN_VT inline VI as_int(V a) { return _mm256_castps_si256(a); }
KILN_VT inline V as_float(VI a) { return _mm256_castsi256_ps(a); }
KILN_VT inline VI isub(VI a, VI b) { return _mm256_sub_epi32(a, b); }
KILN_VT inline VI iand(VI a, VI b) { return _mm256_and_si256(a, b); }
KILN_VT inline VI ior(VI a, VI b) { return _mm256_or_si256(a, b); }
KILN_VT inline VI isra1(VI a) { return _mm256_srai_epi32(a, 1); }
KILN_VT inline VI isrl23(VI a) { return _mm256_srli_epi32(a, 23); }
// 2^n for n in [-126, 127].
KILN_VT inline V pow2i(VI n) { return as_float(_mm256_slli_epi32(_mm256_add_epi32(n, iset1(127)), 23)); }
// Whether every lane of n lies in [lo, hi] (false for a NaN lane).
KILN_VT inline bool all_within(V n, float lo, float hi) {
  const __m256 inside =
      _mm256_and_ps(_mm256_cmp_ps(n, _mm256_set1_ps(lo), _CMP_GE_OQ), _mm256_cmp_ps(n, _mm256_set1_ps(hi), _CMP_LE_OQ));
  return _mm256_movemask_ps(inside) == 0xFF;
}
// The float bits `bits` with n added to their exponent.
KILN_VT inline VI iadd_exponent(VI bits, VI n) { return _mm256_add_epi32(bits, _mm256_slli_epi32(n, 23)); }

#include "vmath_body.inc"
#undef KILN_VT

}  // namespace avx2

KILN_AVX2 void x86::vmath_avx2(MathOp op, const float* in, float* out, int64_t n, float alpha, float beta) {
  avx2::run(op, in, out, n, alpha, beta);
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
