// Softmax and LogSoftmax (specialization constant 0: KILN_SOFTMAX or
// KILN_LOG_SOFTMAX) along one axis of a tensor seen as [outer, n, inner]:
// one workgroup per row (an (outer, inner) pair), whose n elements lie
// `inner` apart. The row's maximum and the sum of exp(x - max) are
// combined in shared memory.
#version 450
#include "common.glsl"
#include "shader_ops.h"

layout(local_size_x = KILN_WORKGROUP) in;
layout(constant_id = 0) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint n;
  uint inner;
} pc;

shared float partial[KILN_WORKGROUP];

float workgroup_reduce(float value, bool take_max) {
  const uint tid = gl_LocalInvocationID.x;
  partial[tid] = value;
  barrier();
  for (uint s = KILN_WORKGROUP / 2u; s > 0u; s >>= 1u) {
    if (tid < s) {
      const float u = partial[tid], v = partial[tid + s];
      partial[tid] = take_max ? (v > u ? v : u) : u + v;
    }
    barrier();
  }
  const float total = partial[0];
  barrier();
  return total;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
    const uint outer = kiln_div(row, pc.inner, 1.0 / float(pc.inner));
    const uint base = outer * pc.n * pc.inner + (row - outer * pc.inner);
    float m = -kiln_inf();
    for (uint k = tid; k < pc.n; k += KILN_WORKGROUP) {
      const float v = x[base + k * pc.inner];
      m = v > m ? v : m;
    }
    m = workgroup_reduce(m, true);
    float sum = 0.0;
    for (uint k = tid; k < pc.n; k += KILN_WORKGROUP) sum += exp(x[base + k * pc.inner] - m);
    sum = workgroup_reduce(sum, false);
    if (OP == KILN_LOG_SOFTMAX) {
      const float log_sum = log(sum) + m;
      for (uint k = tid; k < pc.n; k += KILN_WORKGROUP) y[base + k * pc.inner] = x[base + k * pc.inner] - log_sum;
    } else {
      const float scale = 1.0 / sum;
      for (uint k = tid; k < pc.n; k += KILN_WORKGROUP) y[base + k * pc.inner] = exp(x[base + k * pc.inner] - m) * scale;
    }
  }
}
