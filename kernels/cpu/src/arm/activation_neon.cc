// The NEON clamp of a fused ReLU or Clip (activation.cc's apply_activation),
// with the plain loop's NaN rules.

#include "isa_switch.h"

#if KILN_NEON

#include <arm_neon.h>
#include <stdint.h>

#include "arm/neon.h"
#include "arm/neon_helpers.h"

namespace kiln {
namespace kernels {
namespace neon {

void clamp(float* data, int64_t n, float lo, float hi, bool relu) {
  const float32x4_t vlo = vdupq_n_f32(lo), vhi = vdupq_n_f32(hi);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(data + i);
    // ReLU keeps x where x > lo, else lo (NaN compares false: lo).
    vst1q_f32(data + i, relu ? vbslq_f32(vcgtq_f32(v, vlo), v, vlo) : clamp4(v, vlo, vhi));
  }
  for (; i < n; ++i) {
    const float x = data[i];
    data[i] = relu ? (x > lo ? x : lo) : clamp1(x, lo, hi);
  }
}

}  // namespace neon
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_NEON
