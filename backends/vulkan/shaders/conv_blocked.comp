// 2-D convolution (NCHW, groups) without shared memory, for devices whose
// "GPU" is a CPU (see matmul_blocked.comp): each invocation accumulates 4
// output channels x 4 consecutive output pixels in registers, reading the
// window straight from X (0 in the padding). A workgroup's 64 invocations
// cover 2^pixel_shift blocks of pixels (consecutive invocations, so they
// share their weights) times 64 >> pixel_shift blocks of channels: small
// images (7 x 7) give the workgroup more channels instead of idle
// invocations. Same push constants as conv.comp, plus pixel_shift.
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
  uint total;
  uint pixel_shift;
} pc;

void main() {
  const uint image = kiln_div(gl_WorkGroupID.z, pc.groups, 1.0 / float(pc.groups));
  const uint group = gl_WorkGroupID.z - image * pc.groups;
  const uint pixels = pc.oh * pc.ow;
  const uint lid = gl_LocalInvocationID.x;
  const uint pixel_blocks = 1u << pc.pixel_shift;
  const uint p0 = (gl_WorkGroupID.x * pixel_blocks + (lid & (pixel_blocks - 1u))) * 4u;
  const uint m0 = (gl_WorkGroupID.y * (KILN_WORKGROUP >> pc.pixel_shift) + (lid >> pc.pixel_shift)) * 4u;
  // No barrier follows: invocations with nothing to compute leave.
  if (p0 >= pixels || m0 >= pc.m) return;
  const uint plane = pc.h * pc.w;
  const uint x_base = (image * pc.groups + group) * pc.c * plane;
  const uint window = pc.kh * pc.kw;
  // Pixels and channels past the edge compute on the last valid ones;
  // their results are not written.
  ivec4 y0, x0;
  const float inv_ow = 1.0 / float(pc.ow);
  for (uint q = 0u; q < 4u; ++q) {
    const uint p = min(p0 + q, pixels - 1u);
    const uint oy = kiln_div(p, pc.ow, inv_ow);
    y0[q] = int(oy * pc.sh) - int(pc.pt);
    x0[q] = int((p - oy * pc.ow) * pc.sw) - int(pc.pl);
  }
  uint w_at[4];
  for (uint i = 0u; i < 4u; ++i) w_at[i] = (group * pc.m + min(m0 + i, pc.m - 1u)) * pc.c * window;
  vec4 acc[4];
  for (uint i = 0u; i < 4u; ++i) acc[i] = vec4(0.0);
  // Most blocks read windows wholly inside the input: those skip the checks.
  bool interior = true;
  for (uint q = 0u; q < 4u; ++q) {
    interior = interior && y0[q] >= 0 && y0[q] + int((pc.kh - 1u) * pc.dh) < int(pc.h) && x0[q] >= 0 &&
               x0[q] + int((pc.kw - 1u) * pc.dw) < int(pc.w);
  }
  if (interior) {
    uvec4 at;
    for (uint q = 0u; q < 4u; ++q) at[q] = x_base + uint(y0[q]) * pc.w + uint(x0[q]);
    uint tap = 0u;
    for (uint ch = 0u; ch < pc.c; ++ch) {
      for (uint ky = 0u; ky < pc.kh; ++ky) {
        const uint row = ch * plane + ky * pc.dh * pc.w;
        for (uint kx = 0u; kx < pc.kw; ++kx, ++tap) {
          const uint off = row + kx * pc.dw;
          const vec4 xv = vec4(x[at.x + off], x[at.y + off], x[at.z + off], x[at.w + off]);
          for (uint i = 0u; i < 4u; ++i) acc[i] += w[w_at[i] + tap] * xv;
        }
      }
    }
  } else {
    for (uint ch = 0u; ch < pc.c; ++ch) {
      const uint x_plane = x_base + ch * plane;
      for (uint ky = 0u; ky < pc.kh; ++ky) {
        const ivec4 iy = y0 + int(ky * pc.dh);
        const bvec4 row_ok = bvec4(iy.x >= 0 && iy.x < int(pc.h), iy.y >= 0 && iy.y < int(pc.h),
                                   iy.z >= 0 && iy.z < int(pc.h), iy.w >= 0 && iy.w < int(pc.h));
        for (uint kx = 0u; kx < pc.kw; ++kx) {
          const ivec4 ix = x0 + int(kx * pc.dw);
          vec4 xv;
          for (uint q = 0u; q < 4u; ++q) {
            // The index is clamped too: a compiler may load before it selects.
            const bool inside = row_ok[q] && ix[q] >= 0 && ix[q] < int(pc.w);
            const uint at = inside ? x_plane + uint(iy[q]) * pc.w + uint(ix[q]) : 0u;
            xv[q] = inside ? x[at] : 0.0;
          }
          const uint tap = (ch * pc.kh + ky) * pc.kw + kx;
          for (uint i = 0u; i < 4u; ++i) acc[i] += w[w_at[i] + tap] * xv;
        }
      }
    }
  }
  const uint total_m = pc.m * pc.groups;
  for (uint i = 0u; i < 4u; ++i) {
    if (m0 + i >= pc.m) continue;
    const uint channel = group * pc.m + m0 + i;
    const float b = pc.has_bias != 0u ? bias[channel] : 0.0;
    for (uint q = 0u; q < 4u; ++q) {
      if (p0 + q >= pixels) continue;
      y[(image * total_m + channel) * pixels + p0 + q] =
          kiln_activation(acc[i][q] + b, pc.act, pc.act_alpha, pc.act_beta);
    }
  }
}
