// grouped_conv3x3 (grouped_conv.h) with AVX2+FMA: the sums of the shared
// body x86/grouped_conv_body.inc with 8 lanes, on the padded copy and the
// weight order that grouped_conv.cc prepares. Stores are whole vectors, or
// go through a small buffer (no vmaskmovps).

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <string.h>

#include "grouped_conv.h"
#include "kiln/kernels/gemm_blocking.h"
#include "kiln/kernels/isa.h"

namespace kiln {
namespace kernels {

namespace grp_avx2 {

#define KILN_GT KILN_AVX2
using V = __m256;
constexpr int64_t kLanes = 8;
constexpr int64_t kChunk = 8;
KILN_GT inline V set1(float v) { return _mm256_set1_ps(v); }
KILN_GT inline V loadu(const float* p) { return _mm256_loadu_ps(p); }
KILN_GT inline void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
KILN_GT inline V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
KILN_GT inline V vmin(V a, V b) { return _mm256_min_ps(a, b); }
KILN_GT inline V vmax(V a, V b) { return _mm256_max_ps(a, b); }
#include "x86/grouped_conv_body.inc"
#undef KILN_GT

}  // namespace grp_avx2

bool grouped_conv3x3_avx2(const GroupedConv3x3& conv, bool clamp, float lo, float hi) {
  if (!processor_has(Isa::kAvx2) || (conv.stride != 1 && conv.stride != 2) ||
      grouped_conv3x3_band_rows(conv.cg, conv.mg, conv.w, conv.stride, conv.scratch_floats) < 1) {
    return false;
  }
  grp_avx2::run(conv, clamp, lo, hi);
  return true;
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
