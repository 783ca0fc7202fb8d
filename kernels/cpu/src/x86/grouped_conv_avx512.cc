// grouped_conv3x3 (grouped_conv.h) with AVX-512: the sums of the shared
// body x86/grouped_conv_body.inc with 16 lanes, on the padded copy and the
// weight order that grouped_conv.cc prepares.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <string.h>

#include "grouped_conv.h"
#include "kiln/kernels/gemm_blocking.h"
#include "kiln/kernels/isa.h"

namespace kiln {
namespace kernels {

// GCC 12 warns inside its own AVX-512 headers (the _mm512_undefined_*
// placeholders of unmasked intrinsics); nothing here reads them.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace grp_avx512 {

#define KILN_GT KILN_AVX512
using V = __m512;
constexpr int64_t kLanes = 16;
constexpr int64_t kChunk = 8;
KILN_GT inline V set1(float v) { return _mm512_set1_ps(v); }
KILN_GT inline V loadu(const float* p) { return _mm512_loadu_ps(p); }
KILN_GT inline void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
KILN_GT inline V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
KILN_GT inline V vmin(V a, V b) { return _mm512_min_ps(a, b); }
KILN_GT inline V vmax(V a, V b) { return _mm512_max_ps(a, b); }
#include "x86/grouped_conv_body.inc"
#undef KILN_GT

}  // namespace grp_avx512

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool grouped_conv3x3_avx512(const GroupedConv3x3& conv, bool clamp, float lo, float hi) {
  if (!processor_has(Isa::kAvx512) || (conv.stride != 1 && conv.stride != 2) ||
      grouped_conv3x3_band_rows(conv.cg, conv.mg, conv.w, conv.stride, conv.scratch_floats) < 1) {
    return false;
  }
  grp_avx512::run(conv, clamp, lo, hi);
  return true;
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
