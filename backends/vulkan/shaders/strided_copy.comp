// y[i] = x[base + sum over d of index_d * strides_d], with the output index
// split over the output dims: Transpose (strides permuted, base 0) and
// Slice (base at the starts, strides scaled by the steps, negative for
// negative steps). The runtime merges output dims that stay adjacent in x,
// so most run with rank 1 to 3. Moves 32-bit words.
#version 450
#include "common.glsl"
#include "shader_ops.h"

layout(local_size_x = KILN_WORKGROUP) in;

layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };

layout(push_constant) uniform Push {
  uint n;
  uint rank;
  uint base;
  uint dims[8];
  int strides[8];
} pc;

void main() {
  KILN_GRID_STRIDE_LOOP(i, pc.n) {
    uint rest = i;
    int offset = int(pc.base);
    for (int d = int(pc.rank) - 1; d >= 0; --d) {
      offset += int(rest % pc.dims[d]) * pc.strides[d];
      rest /= pc.dims[d];
    }
    y[i] = x[uint(offset)];
  }
}
