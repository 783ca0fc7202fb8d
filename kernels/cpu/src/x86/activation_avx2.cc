// The AVX2 clamp of a fused ReLU or Clip (activation.cc's apply_activation).

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <stdint.h>

#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {

KILN_AVX2 void clamp_avx2(float* data, int64_t n, float lo, float hi, bool relu) {
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(data + i);
    // max_ps returns its second operand when either is NaN.
    _mm256_storeu_ps(data + i, relu ? _mm256_max_ps(v, vlo) : _mm256_min_ps(vhi, _mm256_max_ps(vlo, v)));
  }
  for (; i < n; ++i) {
    const float x = data[i];
    data[i] = relu ? (x > lo ? x : lo) : (x < lo ? lo : (x > hi ? hi : x));
  }
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
