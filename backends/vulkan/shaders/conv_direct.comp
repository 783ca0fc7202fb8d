// 2-D convolution (NCHW, groups), one output element per invocation: for
// depthwise and other convolutions with few channels per group, where the
// tiles of conv.comp would be mostly empty. Same push constants as conv.comp.
#version 450
#include "common.glsl"
#include "shader_ops.h"

layout(local_size_x = KILN_WORKGROUP) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint c;  // input channels per group
  uint h;
  uint w;
  uint m;  // output channels per group
  uint oh;
  uint ow;
  uint kh;
  uint kw;
  uint sh;
  uint sw;
  uint dh;
  uint dw;
  uint pt;
  uint pl;
  uint groups;
  uint has_bias;
  uint act;
  float act_alpha;
  float act_beta;
  uint total;  // output elements
  uint pixel_shift;  // (conv_blocked.comp)
} pc;

// Rows are output planes (image, channel), columns their pixels.
void main() {
  const uint kh = pc.kh, kw = pc.kw;
  const uint total_m = pc.m * pc.groups;
  const uint pixels = pc.oh * pc.ow;
  const float inv_total_m = 1.0 / float(total_m), inv_m = 1.0 / float(pc.m), inv_ow = 1.0 / float(pc.ow);
  KILN_ROW(plane, pc.total / pixels);
  const uint image = kiln_div(plane, total_m, inv_total_m);
  const uint channel = plane - image * total_m;
  const uint group = kiln_div(channel, pc.m, inv_m);
  const float b = pc.has_bias != 0u ? bias[channel] : 0.0;
  KILN_COLUMN_LOOP(p, pixels) {
    const uint oy = kiln_div(p, pc.ow, inv_ow);
    const uint ox = p - oy * pc.ow;
    float acc = b;
    const int y0 = int(oy * pc.sh) - int(pc.pt);
    const int x0 = int(ox * pc.sw) - int(pc.pl);
    for (uint ch = 0u; ch < pc.c; ++ch) {
      const uint x_plane = ((image * pc.groups + group) * pc.c + ch) * pc.h * pc.w;
      const uint w_plane = (channel * pc.c + ch) * kh * kw;
      for (uint ky = 0u; ky < kh; ++ky) {
        const int iy = y0 + int(ky * pc.dh);
        const bool row_ok = iy >= 0 && iy < int(pc.h);
        for (uint kx = 0u; kx < kw; ++kx) {
          // Padding reads element 0 and multiplies it by 0 weight-wise:
          // no branch per tap.
          const int ix = x0 + int(kx * pc.dw);
          const bool inside = row_ok && ix >= 0 && ix < int(pc.w);
          const float v = x[inside ? x_plane + uint(iy) * pc.w + uint(ix) : x_plane];
          acc += w[w_plane + ky * kw + kx] * (inside ? v : 0.0);
        }
      }
    }
    y[plane * pixels + p] = kiln_activation(acc, pc.act, pc.act_alpha, pc.act_beta);
  }
}
