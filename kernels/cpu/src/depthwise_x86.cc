// depthwise_conv_avx2 / depthwise_conv_avx512 (depthwise.h): the kernels of
// depthwise_x86_body.inc with 8 and 16 lanes, per-function target
// attributes as in gemm_x86.cc. Stores use full vectors except at a row's
// (the 5x5 kernels: the plane's) end (AVX2: through a small buffer, no
// vmaskmovps; AVX-512: masked); stride 2 splits input rows by parity with
// two permutes per vector pair. Loads masked to a row (the 5x5 kernels'
// strips that reach a padded column) read nothing outside it.

#include "depthwise.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace kiln {
namespace kernels {
namespace dw_avx2 {

#define KILN_DT __attribute__((target("avx2,fma")))
using V = __m256;
constexpr int64_t kLanes = 8;
KILN_DT inline V set1(float v) { return _mm256_set1_ps(v); }
KILN_DT inline V loadu(const float* p) { return _mm256_loadu_ps(p); }
KILN_DT inline void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
KILN_DT inline V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
KILN_DT inline V vadd(V a, V b) { return _mm256_add_ps(a, b); }
KILN_DT inline V vmin(V a, V b) { return _mm256_min_ps(a, b); }
KILN_DT inline V vmax(V a, V b) { return _mm256_max_ps(a, b); }
KILN_DT inline void store_part(float* p, int64_t n, V v) {
  float buf[8];
  _mm256_storeu_ps(buf, v);
  memcpy(p, buf, static_cast<size_t>(n) * sizeof(float));
}
// Lanes 0..7 of a, then of b: the even ones and the odd ones.
KILN_DT inline void split(V a, V b, V* even, V* odd) {
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}
// p[0, 2, .., 14] and p[1, 3, .., 15].
KILN_DT inline void deinterleave(const float* p, V* even, V* odd) {
  split(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), even, odd);
}
// The lanes l with 0 <= first + l < w, and a load of only those lanes
// (vmaskmovps: the others read nothing and give 0).
using Mask = __m256i;
KILN_DT inline Mask columns_inside(int64_t first, int64_t w) {
  const __m256i col =
      _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), col),
                             _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(w)), col));
}
KILN_DT inline V load_masked(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
#include "depthwise_x86_body.inc"
#undef KILN_DT

}  // namespace dw_avx2

#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace dw_avx512 {

#define KILN_DT __attribute__((target("avx512f,avx2,fma")))
using V = __m512;
constexpr int64_t kLanes = 16;
KILN_DT inline V set1(float v) { return _mm512_set1_ps(v); }
KILN_DT inline V loadu(const float* p) { return _mm512_loadu_ps(p); }
KILN_DT inline void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
KILN_DT inline V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
KILN_DT inline V vadd(V a, V b) { return _mm512_add_ps(a, b); }
KILN_DT inline V vmin(V a, V b) { return _mm512_min_ps(a, b); }
KILN_DT inline V vmax(V a, V b) { return _mm512_max_ps(a, b); }
KILN_DT inline void store_part(float* p, int64_t n, V v) {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), v);
}
// Lanes 0..15 of a, then of b: the even ones and the odd ones.
KILN_DT inline void split(V a, V b, V* even, V* odd) {
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  *even = _mm512_permutex2var_ps(a, ie, b);
  *odd = _mm512_permutex2var_ps(a, io, b);
}
// p[0, 2, .., 30] and p[1, 3, .., 31].
KILN_DT inline void deinterleave(const float* p, V* even, V* odd) {
  split(_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16), even, odd);
}
// The lanes l with 0 <= first + l < w, and a load of only those lanes.
using Mask = __mmask16;
KILN_DT inline Mask columns_inside(int64_t first, int64_t w) {
  const int64_t lo = first < 0 ? -first : 0, hi = w - first;
  if (hi <= lo) return 0;
  const uint32_t below_hi = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;
  const uint32_t below_lo = lo >= 16 ? 0xFFFFu : (1u << lo) - 1u;
  return static_cast<Mask>(below_hi & ~below_lo);
}
KILN_DT inline V load_masked(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
#include "depthwise_x86_body.inc"
#undef KILN_DT

}  // namespace dw_avx512

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool depthwise_conv_avx2(const DepthwiseConv& conv, bool clamp, float lo, float hi) {
  return dw_avx2::run(conv, clamp, lo, hi);
}
bool depthwise_conv_avx512(const DepthwiseConv& conv, bool clamp, float lo, float hi) {
  return dw_avx512::run(conv, clamp, lo, hi);
}

}  // namespace kernels
}  // namespace kiln

#else

namespace kiln {
namespace kernels {
bool depthwise_conv_avx2(const DepthwiseConv&, bool, float, float) { return false; }
bool depthwise_conv_avx512(const DepthwiseConv&, bool, float, float) { return false; }
}  // namespace kernels
}  // namespace kiln

#endif
