// BatchNormalization (inference), channels on axis 1 of a tensor seen as
// [batch, channels, inner]:
//   y = x * k + (bias - mean * k), k = scale / sqrt(var + epsilon)
// rows are planes (batch, channel), columns their elements. Reads x[i]
// before writing y[i], so y may alias x.
#version 450
#include "common.glsl"
#include "shader_ops.h"

layout(local_size_x = KILN_WORKGROUP) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Scale { float scale[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) readonly buffer Mean { float mean[]; };
layout(std430, binding = 4) readonly buffer Var { float var[]; };
layout(std430, binding = 5) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint total;
  uint channels;
  uint inner;
  float epsilon;
} pc;

void main() {
  KILN_ROW(plane, pc.total / pc.inner);
  const uint c = plane - kiln_div(plane, pc.channels, 1.0 / float(pc.channels)) * pc.channels;
  const float k = scale[c] / sqrt(var[c] + pc.epsilon);
  const float shift = bias[c] - mean[c] * k;
  const uint base = plane * pc.inner;
  KILN_COLUMN_LOOP(i, pc.inner) { y[base + i] = x[base + i] * k + shift; }
}
