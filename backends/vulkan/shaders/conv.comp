// 2-D convolution (NCHW, groups) as an implicit GEMM, without an im2col
// buffer: for image b and group g (workgroup z = b * groups + g),
//   Y[b, g*m + i, p] = act(bias[g*m + i] + sum_k W[g*m + i, k] * X~[k, p])
// with k = (channel, ky, kx) of the group's kernel window, which is also the
// layout of W's rows, and p = (oy, ox) an output pixel. X~[k, p] is read
// straight from X (0 in the padding). Each workgroup computes a 32 x 32
// tile of output channels x pixels; the 8 x 8 invocations each own 4 x 4.
#version 450
#include "common.glsl"

layout(local_size_x = 8, local_size_y = 8) in;

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
  uint total;        // (conv_direct.comp)
  uint pixel_shift;  // (conv_blocked.comp)
} pc;

const uint TM = 32u;
const uint TN = 32u;
const uint TK = 16u;

shared float tile_w[TK][TM + 1u];
shared float tile_x[TK][TN + 1u];

void main() {
  const uint tx = gl_LocalInvocationID.x;
  const uint ty = gl_LocalInvocationID.y;
  const uint tid = ty * 8u + tx;
  const uint image = kiln_div(gl_WorkGroupID.z, pc.groups, 1.0 / float(pc.groups));
  const uint group = gl_WorkGroupID.z - image * pc.groups;
  const uint window = pc.kh * pc.kw;
  const uint kdim = pc.c * window;
  const uint pixels = pc.oh * pc.ow;
  const uint row0 = gl_WorkGroupID.y * TM;   // output channel within the group
  const uint col0 = gl_WorkGroupID.x * TN;   // output pixel
  const uint x_base = (image * pc.groups + group) * pc.c * pc.h * pc.w;
  const uint w_base = group * pc.m * kdim;
  // Each invocation stages one pixel (column) of the X tile, in rows kk0,
  // kk0 + 2, ...: where that pixel's window starts is worked out once.
  const uint cc = tid % TN;
  const uint kk0 = tid / TN;
  const uint gp = col0 + cc;
  const bool pixel_ok = gp < pixels;
  const uint oy = kiln_div(gp, pc.ow, 1.0 / float(pc.ow));
  const int y0 = pixel_ok ? int(oy * pc.sh) - int(pc.pt) : 0;
  const int x0 = pixel_ok ? int((gp - oy * pc.ow) * pc.sw) - int(pc.pl) : 0;
  const float inv_window = 1.0 / float(window), inv_kw = 1.0 / float(pc.kw);

  float acc[4][4];
  for (uint i = 0u; i < 4u; ++i) {
    for (uint j = 0u; j < 4u; ++j) acc[i][j] = 0.0;
  }

  for (uint k0 = 0u; k0 < kdim; k0 += TK) {
    for (uint e = tid; e < TM * TK; e += 64u) {
      const uint r = e / TK, kk = e % TK;
      const uint gi = row0 + r, gk = k0 + kk;
      tile_w[kk][r] = (gi < pc.m && gk < kdim) ? w[w_base + gi * kdim + gk] : 0.0;
    }
    for (uint kk = kk0; kk < TK; kk += 64u / TN) {
      const uint gk = k0 + kk;
      float v = 0.0;
      if (gk < kdim && pixel_ok) {
        const uint ch = kiln_div(gk, window, inv_window), r = gk - ch * window;
        const uint ky = kiln_div(r, pc.kw, inv_kw);
        const int iy = y0 + int(ky * pc.dh);
        const int ix = x0 + int((r - ky * pc.kw) * pc.dw);
        if (iy >= 0 && iy < int(pc.h) && ix >= 0 && ix < int(pc.w)) {
          v = x[x_base + (ch * pc.h + uint(iy)) * pc.w + uint(ix)];
        }
      }
      tile_x[kk][cc] = v;
    }
    barrier();
    for (uint kk = 0u; kk < TK; ++kk) {
      float wv[4], xv[4];
      for (uint i = 0u; i < 4u; ++i) wv[i] = tile_w[kk][ty + 8u * i];
      for (uint j = 0u; j < 4u; ++j) xv[j] = tile_x[kk][tx + 8u * j];
      for (uint i = 0u; i < 4u; ++i) {
        for (uint j = 0u; j < 4u; ++j) acc[i][j] += wv[i] * xv[j];
      }
    }
    barrier();
  }

  const uint total_m = pc.m * pc.groups;
  for (uint i = 0u; i < 4u; ++i) {
    const uint gi = row0 + ty + 8u * i;
    if (gi >= pc.m) continue;
    const uint channel = group * pc.m + gi;
    const float b = pc.has_bias != 0u ? bias[channel] : 0.0;
    for (uint j = 0u; j < 4u; ++j) {
      const uint gp = col0 + tx + 8u * j;
      if (gp >= pixels) continue;
      y[(image * total_m + channel) * pixels + gp] = kiln_activation(acc[i][j] + b, pc.act, pc.act_alpha, pc.act_beta);
    }
  }
}
