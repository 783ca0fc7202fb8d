// LayerNormalization over the trailing n elements of each of `rows` rows:
//   mean = sum(x) / n, var = sum((x - mean)^2) / n, inv = 1 / sqrt(var + eps)
//   y = (x - mean) * inv * scale + bias
// one workgroup per row, both sums combined in shared memory. Mean and
// InvStdDev are written when has_stats is set. Every invocation reads x[i]
// before writing y[i] for the same i after both sums are complete, so y may
// alias x (in place).
#version 450
#include "common.glsl"
#include "shader_ops.h"

layout(local_size_x = KILN_WORKGROUP) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Scale { float scale[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(std430, binding = 4) writeonly buffer Mean { float mean_out[]; };
layout(std430, binding = 5) writeonly buffer InvStdDev { float inv_out[]; };

layout(push_constant) uniform Push {
  uint rows;
  uint n;
  float epsilon;
  uint has_bias;
  uint has_stats;
} pc;

shared float partial[KILN_WORKGROUP];

float workgroup_sum(float value) {
  const uint tid = gl_LocalInvocationID.x;
  partial[tid] = value;
  barrier();
  for (uint s = KILN_WORKGROUP / 2u; s > 0u; s >>= 1u) {
    if (tid < s) partial[tid] += partial[tid + s];
    barrier();
  }
  const float total = partial[0];
  barrier();
  return total;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
    const uint base = row * pc.n;
    float sum = 0.0;
    for (uint i = tid; i < pc.n; i += KILN_WORKGROUP) sum += x[base + i];
    const float mean = workgroup_sum(sum) / float(pc.n);
    float squares = 0.0;
    for (uint i = tid; i < pc.n; i += KILN_WORKGROUP) {
      const float d = x[base + i] - mean;
      squares += d * d;
    }
    const float inv = 1.0 / sqrt(workgroup_sum(squares) / float(pc.n) + pc.epsilon);
    for (uint i = tid; i < pc.n; i += KILN_WORKGROUP) {
      const float v = (x[base + i] - mean) * inv * scale[i];
      y[base + i] = pc.has_bias != 0u ? v + bias[i] : v;
    }
    if (pc.has_stats != 0u && tid == 0u) {
      mean_out[row] = mean;
      inv_out[row] = inv;
    }
  }
}
