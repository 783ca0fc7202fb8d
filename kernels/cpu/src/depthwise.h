// Depthwise convolution of one channel with any kernel size (depthwise.cc):
// the 5x5 and 7x7 layers of efficientnet, mnasnet and mobilenet_v3, which
// the planner leaves unpacked (planner/ops/linear_ops.cc) so they run here
// instead of as one-row matrix products, and dilated ones (LR-ASPP's 5x5 at
// dilation 2) instead of im2col products. An undilated 3x3 keeps its own
// kernel (depthwise3x3, gemm.h). Internal.

#ifndef KILN_KERNELS_CPU_SRC_DEPTHWISE_H_
#define KILN_KERNELS_CPU_SRC_DEPTHWISE_H_

#include <stdint.h>

#include "kiln/schema/program_generated.h"

namespace kiln {
namespace kernels {

// One channel, stride s on both axes, dilation dh x dw:
// out[oy][ox] = bias + sum w[ky][kx] * in[oy * s - pt + ky * dh][ox * s - pl + kx * dw]
// (0 outside the input), then the activation.
struct DepthwiseConv {
  const float* in = nullptr;
  int64_t h = 0, w = 0;
  const float* weights = nullptr;  // kh x kw
  int64_t kh = 0, kw = 0, stride = 1, pt = 0, pl = 0;
  int64_t dh = 1, dw = 1;
  float bias = 0.f;
  float* out = nullptr;
  int64_t oh = 0, ow = 0;
};
void depthwise_conv(const DepthwiseConv& conv, const fb::FusedActivation* activation);

// Undilated 5x5 and 7x7 at stride 1: the tap-by-tap row-reuse kernel
// (x86/depthwise_body.inc, run_rows_s1), which depthwise_conv runs on 16
// lanes wherever the processor has them.
inline bool depthwise_by_taps(const DepthwiseConv& c) {
  return c.kh == c.kw && (c.kh == 5 || c.kh == 7) && c.stride == 1 && c.dh == 1 && c.dw == 1;
}

// The x86-64 vector versions (x86/depthwise_avx2.cc, x86/depthwise_avx512.cc;
// elsewhere they do nothing): false, having done
// nothing, unless the stride is 1 or 2, the kernel at most
// kDepthwiseMaxKernel on each axis, a padded row fits the stack buffers
// and (dilated rows) the kh rows of an output row find distinct slots.
constexpr int64_t kDepthwiseMaxKernel = 7;
bool depthwise_conv_avx2(const DepthwiseConv& conv, bool clamp, float lo, float hi);
bool depthwise_conv_avx512(const DepthwiseConv& conv, bool clamp, float lo, float hi);

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_DEPTHWISE_H_
