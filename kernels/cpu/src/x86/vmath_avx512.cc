// vector_math (vmath.h) with AVX-512, 16 lanes: the element-wise functions
// of vmath_body.inc over 512-bit primitives, each carrying KILN_AVX512
// (isa_switch.h). Tails use masked moves.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <string.h>

#include "vmath.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {

// GCC 12 warns inside its own AVX-512 headers (the _mm512_undefined_*
// placeholders of unmasked intrinsics); nothing here reads them.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace avx512 {

#define KILN_VT KILN_AVX512
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

#include "vmath_body.inc"
#undef KILN_VT

}  // namespace avx512

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

KILN_AVX512 void x86::vmath_avx512(MathOp op, const float* in, float* out, int64_t n, float alpha, float beta) {
  avx512::run(op, in, out, n, alpha, beta);
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
