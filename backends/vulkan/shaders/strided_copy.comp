// y[i] = x[base + sum over d of index_d * strides_d], with the output index
// split over the output dims: Transpose (strides permuted, base 0) and
// Slice (base at the starts, strides scaled by the steps, negative for
// negative steps). The runtime merges output dims that stay adjacent in x,
// so most run with rank 1 to 3. Rows are the output's last dim. Moves
// 32-bit words.
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
  const uint last = pc.rank > 0u ? pc.rank - 1u : 0u;
  const uint columns = pc.rank > 0u ? pc.dims[last] : 1u;
  const int step = pc.rank > 0u ? pc.strides[last] : 0;
  KILN_ROW(row, pc.n / columns);
  uint rest = row;
  int offset = int(pc.base);
  for (int d = int(last) - 1; d > 0; --d) {
    const uint next = kiln_div(rest, pc.dims[d], 1.0 / float(pc.dims[d]));
    offset += int(rest - next * pc.dims[d]) * pc.strides[d];
    rest = next;
  }
  if (last > 0u) offset += int(rest) * pc.strides[0];
  const uint first = row * columns;
  KILN_COLUMN_LOOP(i, columns) { y[first + i] = x[uint(offset + int(i) * step)]; }
}
