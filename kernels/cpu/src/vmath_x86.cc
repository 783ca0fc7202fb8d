// vector_math (vmath.h): the element-wise functions of vmath_x86_body.inc
// built twice, for AVX2+FMA (8 lanes) and AVX-512 (16 lanes), each with its
// own per-function target attribute as in gemm_x86.cc, so the library stays
// baseline x86-64. AVX2 tails go through an 8-float stack buffer (no
// vmaskmovps, which is slow on AMD); AVX-512 tails use masked moves.

#include "vmath.h"

#include <string.h>

#include "kiln/kernels/isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace kiln {
namespace kernels {
namespace avx2 {

#define KILN_VT __attribute__((target("avx2,fma")))
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

#include "vmath_x86_body.inc"
#undef KILN_VT

}  // namespace avx2

// GCC 12 warns inside its own AVX-512 headers (the _mm512_undefined_*
// placeholders of unmasked conversions); nothing here reads them.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace avx512 {

#define KILN_VT __attribute__((target("avx512f,avx2,fma")))
using V = __m512;
using VI = __m512i;
using M = __mmask16;
constexpr int64_t kLanes = 16;

KILN_VT inline V set1(float v) { return _mm512_set1_ps(v); }
KILN_VT inline VI iset1(int v) { return _mm512_set1_epi32(v); }
KILN_VT inline V loadu(const float* p) { return _mm512_loadu_ps(p); }
KILN_VT inline void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
KILN_VT inline __mmask16 tail_mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
KILN_VT inline V load_part(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(tail_mask(n), p); }
KILN_VT inline void store_part(float* p, int64_t n, V v) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
KILN_VT inline V add(V a, V b) { return _mm512_add_ps(a, b); }
KILN_VT inline V sub(V a, V b) { return _mm512_sub_ps(a, b); }
KILN_VT inline V mul(V a, V b) { return _mm512_mul_ps(a, b); }
KILN_VT inline V div(V a, V b) { return _mm512_div_ps(a, b); }
KILN_VT inline V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
KILN_VT inline V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
KILN_VT inline V vmin(V a, V b) { return _mm512_min_ps(a, b); }
KILN_VT inline V vmax(V a, V b) { return _mm512_max_ps(a, b); }
KILN_VT inline V bits_f(VI a) { return _mm512_castsi512_ps(a); }
KILN_VT inline VI bits_i(V a) { return _mm512_castps_si512(a); }
KILN_VT inline V vand(V a, V b) { return bits_f(_mm512_and_si512(bits_i(a), bits_i(b))); }
KILN_VT inline V vandnot(V a, V b) { return bits_f(_mm512_andnot_si512(bits_i(a), bits_i(b))); }
KILN_VT inline V vor(V a, V b) { return bits_f(_mm512_or_si512(bits_i(a), bits_i(b))); }
KILN_VT inline V vabs(V a) { return vandnot(_mm512_set1_ps(-0.f), a); }
KILN_VT inline V vneg(V a) { return bits_f(_mm512_xor_si512(bits_i(_mm512_set1_ps(-0.f)), bits_i(a))); }
KILN_VT inline V roundn(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
KILN_VT inline M lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
KILN_VT inline M gt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
KILN_VT inline M ge(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
KILN_VT inline M eq(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
KILN_VT inline M isnan(V a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
KILN_VT inline V select(M m, V t, V f) { return _mm512_mask_blend_ps(m, f, t); }
KILN_VT inline VI cvt_int(V a) { return _mm512_cvtps_epi32(a); }
KILN_VT inline V cvt_float(VI a) { return _mm512_cvtepi32_ps(a); }
KILN_VT inline VI as_int(V a) { return _mm512_castps_si512(a); }
KILN_VT inline V as_float(VI a) { return _mm512_castsi512_ps(a); }
KILN_VT inline VI isub(VI a, VI b) { return _mm512_sub_epi32(a, b); }
KILN_VT inline VI iand(VI a, VI b) { return _mm512_and_si512(a, b); }
KILN_VT inline VI ior(VI a, VI b) { return _mm512_or_si512(a, b); }
KILN_VT inline VI isra1(VI a) { return _mm512_srai_epi32(a, 1); }
KILN_VT inline VI isrl23(VI a) { return _mm512_srli_epi32(a, 23); }
KILN_VT inline V pow2i(VI n) { return as_float(_mm512_slli_epi32(_mm512_add_epi32(n, iset1(127)), 23)); }
KILN_VT inline bool all_within(V n, float lo, float hi) {
  return (_mm512_cmp_ps_mask(n, _mm512_set1_ps(lo), _CMP_GE_OQ) &
          _mm512_cmp_ps_mask(n, _mm512_set1_ps(hi), _CMP_LE_OQ)) == 0xFFFF;
}
KILN_VT inline VI iadd_exponent(VI bits, VI n) { return _mm512_add_epi32(bits, _mm512_slli_epi32(n, 23)); }

#include "vmath_x86_body.inc"
#undef KILN_VT

}  // namespace avx512

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool vector_math_on(int path, MathOp op, const float* in, float* out, int64_t n, float alpha, float beta) {
  const Isa active = active_isa();
  if (path < 1 || path > 2 || (active != Isa::kAvx2 && active != Isa::kAvx512) || static_cast<int>(active) < path) {
    return false;
  }
  if (path == 2) {
    avx512::run(op, in, out, n, alpha, beta);
  } else {
    avx2::run(op, in, out, n, alpha, beta);
  }
  return true;
}

bool vector_math(MathOp op, const float* in, float* out, int64_t n, float alpha, float beta) {
  const Isa active = active_isa();
  if (active == Isa::kAvx512) {
    avx512::run(op, in, out, n, alpha, beta);
    return true;
  }
  if (active == Isa::kAvx2) {
    avx2::run(op, in, out, n, alpha, beta);
    return true;
  }
  return false;
}

}  // namespace kernels
}  // namespace kiln

#elif !defined(__aarch64__)  // AArch64: vmath_neon.cc

namespace kiln {
namespace kernels {

bool vector_math_on(int, MathOp, const float*, float*, int64_t, float, float) { return false; }
bool vector_math(MathOp, const float*, float*, int64_t, float, float) { return false; }

}  // namespace kernels
}  // namespace kiln

#endif
