// Shared by kiln's compute shaders: the push-constant block every shader
// reads its geometry from, and the math the shaders share (activations,
// erf, pow with C semantics).
//
// No shader assumes a subgroup size: cross-invocation work goes through
// shared memory and barrier(), never subgroup operations. Workgroups have 64
// invocations (8 x 8 for the tiled ones), within every Vulkan device's limits.

#ifndef KILN_SHADERS_COMMON_GLSL_
#define KILN_SHADERS_COMMON_GLSL_

// The values of fb::Activation (schema/program.fbs).
const uint ACT_NONE = 0u;
const uint ACT_RELU = 1u;
const uint ACT_CLIP = 2u;
const uint ACT_SIGMOID = 3u;
const uint ACT_TANH = 4u;
const uint ACT_LEAKY_RELU = 5u;
const uint ACT_HARD_SIGMOID = 6u;
const uint ACT_HARD_SWISH = 7u;
const uint ACT_SILU = 8u;
const uint ACT_GELU = 9u;

float kiln_inf() { return uintBitsToFloat(0x7f800000u); }
float kiln_nan() { return uintBitsToFloat(0x7fc00000u); }

float kiln_sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }

// tanh through exp of a non-positive argument, so it never overflows.
float kiln_tanh(float x) {
  float a = abs(x);
  if (a < 0.0005) return x;
  float e = exp(-2.0 * a);
  float t = (1.0 - e) / (1.0 + e);
  return x < 0.0 ? -t : t;
}

// Abramowitz and Stegun 7.1.26: absolute error below 1.5e-7.
float kiln_erf(float x) {
  float a = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
  float y = 1.0 - poly * exp(-a * a);
  return x < 0.0 ? -y : y;
}

float kiln_hard_sigmoid(float x, float alpha, float beta) {
  float v = alpha * x + beta;
  return v < 0.0 ? 0.0 : (v > 1.0 ? 1.0 : v);
}

// powf's results where GLSL's pow is undefined (negative bases, zero).
float kiln_pow(float x, float e) {
  if (e == 0.0 || x == 1.0) return 1.0;
  if (isnan(x) || isnan(e)) return kiln_nan();
  float a = abs(x);
  float r;
  if (a == 0.0) {
    r = e > 0.0 ? 0.0 : kiln_inf();
  } else if (isinf(a)) {
    r = e > 0.0 ? kiln_inf() : 0.0;
  } else {
    r = exp2(e * log2(a));
  }
  if (x < 0.0) {
    if (floor(e) != e) return kiln_nan();
    if (mod(e, 2.0) == 1.0) r = -r;
  }
  return r;
}

float kiln_activation(float x, uint kind, float alpha, float beta) {
  switch (kind) {
    case ACT_RELU: return x > 0.0 ? x : 0.0;
    case ACT_CLIP: return x < alpha ? alpha : (x > beta ? beta : x);
    case ACT_SIGMOID: return kiln_sigmoid(x);
    case ACT_TANH: return kiln_tanh(x);
    case ACT_LEAKY_RELU: return x >= 0.0 ? x : alpha * x;
    case ACT_HARD_SIGMOID: return kiln_hard_sigmoid(x, alpha, beta);
    case ACT_HARD_SWISH: return x * kiln_hard_sigmoid(x, alpha, beta);
    case ACT_SILU: return x * kiln_sigmoid(x);
    case ACT_GELU: return 0.5 * x * (1.0 + kiln_erf(x * 0.70710678118654752));
    default: return x;
  }
}

// a / b through a float reciprocal (inv_b = 1.0 / float(b), worked out once
// by the caller) and exact integer corrections. CPU devices such as
// lavapipe have no vector integer division (each lane divides on its own,
// tens of cycles), GPUs no fast one; every index here is below 2^25, so the
// estimate is off by at most 2.
uint kiln_div(uint a, uint b, float inv_b) {
  uint q = uint(float(a) * inv_b);
  int r = int(a) - int(q * b);
  while (r < 0) {
    --q;
    r += int(b);
  }
  while (r >= int(b)) {
    ++q;
    r -= int(b);
  }
  return q;
}

// 1-D shaders walk their elements with a grid stride, so a dispatch never
// needs more workgroups than the device allows.
#define KILN_GRID_STRIDE_LOOP(i, n) \
  for (uint i = gl_GlobalInvocationID.x; i < (n); i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)

// 2-D shaders see their output as rows of columns: one row per workgroup
// (y, continued in z past the y limit), so whatever depends on the row
// alone is the same across a workgroup; invocations stride over the columns
// in x. The row is not a loop: on CPU devices such as lavapipe a loop
// around the column loop costs more than the work in it. No integer
// division per element either: CPU devices have no vector division, GPUs
// no fast one.
#define KILN_ROW(row, rows)                                               \
  const uint row = gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y; \
  if (row >= (rows)) return
#define KILN_COLUMN_LOOP(i, n) KILN_GRID_STRIDE_LOOP(i, n)

#endif  // KILN_SHADERS_COMMON_GLSL_
