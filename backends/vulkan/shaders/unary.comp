// Element-wise unary ops and activations: y[i] = f(x[i]). The op is
// specialization constant 0 (KILN_UNARY_*); alpha and beta carry the op's
// parameters (LeakyRelu slope, Clip bounds, PowScalar's exponent, Gelu's
// form). Reads x[i] before writing y[i], so y may alias x (in place).
#version 450
#include "common.glsl"
#include "shader_ops.h"

layout(local_size_x = KILN_WORKGROUP) in;
layout(constant_id = 0) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint n;
  float alpha;
  float beta;
} pc;

float apply(float v) {
  switch (OP) {
    case KILN_UNARY_RELU: return v > 0.0 ? v : 0.0;
    case KILN_UNARY_SIGMOID: return kiln_sigmoid(v);
    case KILN_UNARY_TANH: return kiln_tanh(v);
    case KILN_UNARY_NEG: return -v;
    case KILN_UNARY_ABS: return abs(v);
    case KILN_UNARY_EXP: return exp(v);
    case KILN_UNARY_LOG: return log(v);
    case KILN_UNARY_SQRT: return sqrt(v);
    case KILN_UNARY_ERF: return kiln_erf(v);
    case KILN_UNARY_FLOOR: return floor(v);
    case KILN_UNARY_CEIL: return ceil(v);
    case KILN_UNARY_RECIPROCAL: return 1.0 / v;
    case KILN_UNARY_SOFTPLUS: return v > 20.0 ? v : log(1.0 + exp(v));
    case KILN_UNARY_LEAKY_RELU: return v >= 0.0 ? v : pc.alpha * v;
    case KILN_UNARY_ELU: return v >= 0.0 ? v : pc.alpha * (exp(v) - 1.0);
    case KILN_UNARY_HARD_SIGMOID: return kiln_hard_sigmoid(v, pc.alpha, pc.beta);
    case KILN_UNARY_HARD_SWISH: return v * kiln_hard_sigmoid(v, 1.0 / 6.0, 0.5);
    case KILN_UNARY_GELU:
      // beta != 0 selects the tanh approximation.
      if (pc.beta != 0.0) return 0.5 * v * (1.0 + kiln_tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
      return 0.5 * v * (1.0 + kiln_erf(v * 0.7071067811865476));
    case KILN_UNARY_CLIP: return v < pc.alpha ? pc.alpha : (v > pc.beta ? pc.beta : v);
    case KILN_UNARY_POW_SCALAR:
      if (pc.alpha == 2.0) return v * v;
      if (pc.alpha == 0.5) return sqrt(v);
      return kiln_pow(v, pc.alpha);
    default: return v;
  }
}

void main() {
  KILN_GRID_STRIDE_LOOP(i, pc.n) { y[i] = apply(x[i]); }
}
