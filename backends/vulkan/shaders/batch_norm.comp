// BatchNormalization (inference), channels on axis 1 of a tensor seen as
// [batch, channels, inner]:
//   y = x * k + (bias - mean * k), k = scale / sqrt(var + epsilon)
// one element per invocation. Reads x[i] before writing y[i], so y may
// alias x.
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
  KILN_GRID_STRIDE_LOOP(i, pc.total) {
    const uint c = (i / pc.inner) % pc.channels;
    const float k = scale[c] / sqrt(var[c] + pc.epsilon);
    y[i] = x[i] * k + (bias[c] - mean[c] * k);
  }
}
