// Element-wise binary ops with NumPy broadcasting: y = act(a op b). The op is
// specialization constant 0 (KILN_BINARY_*).
//
// The runtime collapses the output's dims first (dropping 1s, merging
// neighbours both inputs walk contiguously), so the common cases (same
// shape, scalar, per-channel) run with rank 1 or 2. Strides are in elements;
// 0 marks a broadcast dim. Rows are the output's last dim. Reads a[i] and
// b[i] before writing y[i], so y may alias either input.
#version 450
#include "common.glsl"
#include "shader_ops.h"

layout(local_size_x = KILN_WORKGROUP) in;
layout(constant_id = 0) const uint OP = 0;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint n;
  uint rank;
  uint act;
  float act_alpha;
  float act_beta;
  uint dims[8];
  uint a_strides[8];
  uint b_strides[8];
} pc;

float apply(float u, float v) {
  switch (OP) {
    case KILN_BINARY_ADD: return u + v;
    case KILN_BINARY_SUB: return u - v;
    case KILN_BINARY_MUL: return u * v;
    case KILN_BINARY_DIV: return u / v;
    case KILN_BINARY_POW: return kiln_pow(u, v);
    case KILN_BINARY_MAX: return (u > v || isnan(u)) ? u : v;
    case KILN_BINARY_MIN: return (u < v || isnan(u)) ? u : v;
    default: return u;
  }
}

void main() {
  const uint last = pc.rank > 0u ? pc.rank - 1u : 0u;
  const uint columns = pc.rank > 0u ? pc.dims[last] : 1u;
  const uint sa = pc.rank > 0u ? pc.a_strides[last] : 0u;
  const uint sb = pc.rank > 0u ? pc.b_strides[last] : 0u;
  KILN_ROW(row, pc.n / columns);
  uint rest = row;
  uint ra = 0u, rb = 0u;
  for (int d = int(last) - 1; d > 0; --d) {
    const uint next = kiln_div(rest, pc.dims[d], 1.0 / float(pc.dims[d]));
    const uint index = rest - next * pc.dims[d];
    rest = next;
    ra += index * pc.a_strides[d];
    rb += index * pc.b_strides[d];
  }
  if (last > 0u) {
    ra += rest * pc.a_strides[0];
    rb += rest * pc.b_strides[0];
  }
  const uint first = row * columns;
  KILN_COLUMN_LOOP(i, columns) {
    y[first + i] = kiln_activation(apply(a[ra + i * sa], b[rb + i * sb]), pc.act, pc.act_alpha, pc.act_beta);
  }
}
