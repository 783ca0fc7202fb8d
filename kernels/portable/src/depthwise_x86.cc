// depthwise_conv_avx2 / depthwise_conv_avx512 (depthwise.h): the kernel of
// depthwise_x86_body.inc with 8 and 16 lanes, per-function target
// attributes as in gemm_x86.cc. Stores use full vectors except at a row's
// end (AVX2: through a small buffer, no vmaskmovps; AVX-512: masked).

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
KILN_DT inline V vmin(V a, V b) { return _mm256_min_ps(a, b); }
KILN_DT inline V vmax(V a, V b) { return _mm256_max_ps(a, b); }
KILN_DT inline void store_part(float* p, int64_t n, V v) {
  float buf[8];
  _mm256_storeu_ps(buf, v);
  memcpy(p, buf, static_cast<size_t>(n) * sizeof(float));
}
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
KILN_DT inline V vmin(V a, V b) { return _mm512_min_ps(a, b); }
KILN_DT inline V vmax(V a, V b) { return _mm512_max_ps(a, b); }
KILN_DT inline void store_part(float* p, int64_t n, V v) {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), v);
}
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
