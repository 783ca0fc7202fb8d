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
} pc;

void main() {
  const uint total_m = pc.m * pc.groups;
  KILN_GRID_STRIDE_LOOP(i, pc.total) {
    const uint ox = i % pc.ow;
    const uint oy = (i / pc.ow) % pc.oh;
    const uint channel = (i / (pc.ow * pc.oh)) % total_m;
    const uint image = i / (pc.ow * pc.oh * total_m);
    const uint group = channel / pc.m;
    float acc = pc.has_bias != 0u ? bias[channel] : 0.0;
    const int y0 = int(oy * pc.sh) - int(pc.pt);
    const int x0 = int(ox * pc.sw) - int(pc.pl);
    for (uint ch = 0u; ch < pc.c; ++ch) {
      const uint x_plane = ((image * pc.groups + group) * pc.c + ch) * pc.h * pc.w;
      const uint w_plane = (channel * pc.c + ch) * pc.kh * pc.kw;
      for (uint ky = 0u; ky < pc.kh; ++ky) {
        const int iy = y0 + int(ky * pc.dh);
        if (iy < 0 || iy >= int(pc.h)) continue;
        for (uint kx = 0u; kx < pc.kw; ++kx) {
          const int ix = x0 + int(kx * pc.dw);
          if (ix < 0 || ix >= int(pc.w)) continue;
          acc += w[w_plane + ky * pc.kw + kx] * x[x_plane + uint(iy) * pc.w + uint(ix)];
        }
      }
    }
    y[i] = kiln_activation(acc, pc.act, pc.act_alpha, pc.act_beta);
  }
}
