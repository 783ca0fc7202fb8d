// Copies `outer` rows of `row` words from x into y, each at `column` in an
// output row of `out_row` words: one Concat input (or, with outer 1, a view
// that got its own bytes). Moves 32-bit words, so bits are kept exactly.
#version 450
#include "common.glsl"
#include "shader_ops.h"

layout(local_size_x = KILN_WORKGROUP) in;

layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };

layout(push_constant) uniform Push {
  uint outer;
  uint row;
  uint out_row;
  uint column;
} pc;

void main() {
  KILN_GRID_STRIDE_LOOP(i, pc.outer * pc.row) {
    const uint o = i / pc.row, r = i % pc.row;
    y[o * pc.out_row + pc.column + r] = x[i];
  }
}
