// MaxPool and AveragePool (2-D, NCHW; 1-D as height 1), one output element
// per invocation. The kind is specialization constant 0 (KILN_POOL_*). The
// planner resolved auto_pad and ceil_mode into pads and the output size; a
// window is cut where it leaves the end padding, and an average divides by
// the elements inside the input, or, with count_include_pad, inside the
// padded input (the CPU kernel's rules).
#version 450
#include "common.glsl"
#include "shader_ops.h"

layout(local_size_x = KILN_WORKGROUP) in;
layout(constant_id = 0) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint total;  // output elements
  uint h;
  uint w;
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
  uint pb;
  uint pr;
  uint include_pad;
} pc;

// Rows are planes (image, channel), columns their output pixels.
void main() {
  const uint pixels = pc.oh * pc.ow;
  const float inv_ow = 1.0 / float(pc.ow);
  KILN_ROW(plane, pc.total / pixels);
  const uint base = plane * pc.h * pc.w;
  KILN_COLUMN_LOOP(p, pixels) {
    const uint oy = kiln_div(p, pc.ow, inv_ow);
    const uint ox = p - oy * pc.ow;
    const int y0 = int(oy * pc.sh) - int(pc.pt);
    const int x0 = int(ox * pc.sw) - int(pc.pl);
    float acc = OP == KILN_POOL_MAX ? -kiln_inf() : 0.0;
    uint count = 0u, padded = 0u;
    for (uint ky = 0u; ky < pc.kh; ++ky) {
      const int iy = y0 + int(ky * pc.dh);
      if (iy >= int(pc.h + pc.pb)) break;
      const bool row_valid = iy >= 0 && iy < int(pc.h);
      for (uint kx = 0u; kx < pc.kw; ++kx) {
        const int ix = x0 + int(kx * pc.dw);
        if (ix >= int(pc.w + pc.pr)) break;
        ++padded;
        if (!row_valid || ix < 0 || ix >= int(pc.w)) continue;
        const float v = x[base + uint(iy) * pc.w + uint(ix)];
        if (OP == KILN_POOL_MAX) {
          if (v > acc || isnan(v)) acc = v;
        } else {
          acc += v;
        }
        ++count;
      }
    }
    if (OP == KILN_POOL_AVERAGE) {
      const uint divisor = pc.include_pad != 0u ? padded : count;
      acc = divisor > 0u ? acc / float(divisor) : 0.0;
    }
    y[plane * pixels + p] = acc;
  }
}
