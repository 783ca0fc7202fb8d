// Copies `outer` rows of `row` words from x to y; row o starts at
// o * x_row + x_col in x and at o * y_row + y_col in y. Concat writes each
// input into its columns of the output rows, Split reads each output from
// its columns of the input rows, and a view that got its own bytes is one
// row. Moves 32-bit words, so bits are kept exactly.
#version 450
#include "common.glsl"
#include "shader_ops.h"

layout(local_size_x = KILN_WORKGROUP) in;

layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };

layout(push_constant) uniform Push {
  uint outer;
  uint row;
  uint x_row;
  uint x_col;
  uint y_row;
  uint y_col;
} pc;

void main() {
  KILN_ROW(o, pc.outer);
  const uint from = o * pc.x_row + pc.x_col, to = o * pc.y_row + pc.y_col;
  KILN_COLUMN_LOOP(r, pc.row) { y[to + r] = x[from + r]; }
}
