// Transpose: y[i] = x[source offset of i], the output index split over the
// output dims with each dim's element stride in x. The runtime merges
// output dims that stay adjacent in x, so most transposes run with rank 2
// or 3. Moves 32-bit words.
#version 450
#include "common.glsl"
#include "shader_ops.h"

layout(local_size_x = KILN_WORKGROUP) in;

layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };

layout(push_constant) uniform Push {
  uint n;
  uint rank;
  uint dims[8];
  uint strides[8];
} pc;

void main() {
  KILN_GRID_STRIDE_LOOP(i, pc.n) {
    uint rest = i, offset = 0u;
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
      offset += (rest % pc.dims[d]) * pc.strides[d];
      rest /= pc.dims[d];
    }
    y[i] = x[offset];
  }
}
