// Reductions (ReduceSum, ReduceMean, ... and the global poolings): one
// workgroup per output element, its invocations striding over the reduced
// elements, then a tree in shared memory (no subgroup operations). The op
// is specialization constant 0 (KILN_REDUCE_*).
//
// The runtime splits the input's axes into kept and reduced groups, merging
// neighbours of the same kind that are contiguous, so at most 4 of each
// remain (dims and element strides, outermost first):
//   out[o] = reduce over r of x[kept_offset(o) + reduced_offset(r)]
#version 450
#include "common.glsl"
#include "shader_ops.h"

layout(local_size_x = KILN_WORKGROUP) in;
layout(constant_id = 0) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint outputs;
  uint count;  // reduced elements per output
  uint kept_rank;
  uint reduced_rank;
  uint kept_dims[4];
  uint kept_strides[4];
  uint reduced_dims[4];
  uint reduced_strides[4];
} pc;

shared float partial[KILN_WORKGROUP];

float inv_reduced[4];

// Offset of reduced element r; the outermost dim needs no division.
uint reduced_offset(uint r) {
  uint offset = 0u;
  for (int d = int(pc.reduced_rank) - 1; d > 0; --d) {
    const uint next = kiln_div(r, pc.reduced_dims[d], inv_reduced[d]);
    offset += (r - next * pc.reduced_dims[d]) * pc.reduced_strides[d];
    r = next;
  }
  return pc.reduced_rank > 0u ? offset + r * pc.reduced_strides[0] : offset;
}

// NaN wins for Max and Min, as in the CPU kernels.
float max_nan(float u, float v) { return isnan(u) ? u : ((v > u || isnan(v)) ? v : u); }
float min_nan(float u, float v) { return isnan(u) ? u : ((v < u || isnan(v)) ? v : u); }

float combine(float u, float v) {
  switch (OP) {
    case KILN_REDUCE_MAX: case KILN_REDUCE_LOG_SUM_EXP: return max_nan(u, v);
    case KILN_REDUCE_MIN: return min_nan(u, v);
    case KILN_REDUCE_PROD: return u * v;
    default: return u + v;
  }
}

float identity() {
  switch (OP) {
    case KILN_REDUCE_MAX: case KILN_REDUCE_LOG_SUM_EXP: return -kiln_inf();
    case KILN_REDUCE_MIN: return kiln_inf();
    case KILN_REDUCE_PROD: return 1.0;
    default: return 0.0;
  }
}

float map(float v) {
  switch (OP) {
    case KILN_REDUCE_L1: return abs(v);
    case KILN_REDUCE_L2: case KILN_REDUCE_SUM_SQUARE: return v * v;
    default: return v;
  }
}

const uint BY_OP = 0u;   // combine()
const uint BY_MAX = 1u;  // LogSumExp's first pass
const uint BY_SUM = 2u;  // LogSumExp's second pass

// Combines every invocation's `value` as `how` says; all invocations get
// the result.
float workgroup_reduce(float value, uint how) {
  const uint tid = gl_LocalInvocationID.x;
  partial[tid] = value;
  barrier();
  for (uint s = KILN_WORKGROUP / 2u; s > 0u; s >>= 1u) {
    if (tid < s) {
      const float u = partial[tid], v = partial[tid + s];
      partial[tid] = how == BY_MAX ? max_nan(u, v) : (how == BY_SUM ? u + v : combine(u, v));
    }
    barrier();
  }
  const float total = partial[0];
  barrier();
  return total;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  for (uint d = 0u; d < 4u; ++d) inv_reduced[d] = d < pc.reduced_rank ? 1.0 / float(pc.reduced_dims[d]) : 0.0;
  for (uint o = gl_WorkGroupID.x; o < pc.outputs; o += gl_NumWorkGroups.x) {
    uint base = 0u, rest = o;
    for (int d = int(pc.kept_rank) - 1; d > 0; --d) {
      const uint next = kiln_div(rest, pc.kept_dims[d], 1.0 / float(pc.kept_dims[d]));
      base += (rest - next * pc.kept_dims[d]) * pc.kept_strides[d];
      rest = next;
    }
    if (pc.kept_rank > 0u) base += rest * pc.kept_strides[0];
    float result;
    if (OP == KILN_REDUCE_LOG_SUM_EXP) {
      // log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the maximum.
      float m = -kiln_inf();
      for (uint r = tid; r < pc.count; r += KILN_WORKGROUP) m = max_nan(m, x[base + reduced_offset(r)]);
      m = workgroup_reduce(m, BY_MAX);
      float sum = 0.0;
      if (!isinf(m) && !isnan(m)) {
        for (uint r = tid; r < pc.count; r += KILN_WORKGROUP) sum += exp(x[base + reduced_offset(r)] - m);
      }
      sum = workgroup_reduce(sum, BY_SUM);
      result = (isinf(m) || isnan(m)) ? m : m + log(sum);
    } else {
      float acc = identity();
      for (uint r = tid; r < pc.count; r += KILN_WORKGROUP) acc = combine(acc, map(x[base + reduced_offset(r)]));
      acc = workgroup_reduce(acc, BY_OP);
      switch (OP) {
        case KILN_REDUCE_MEAN: result = acc / float(pc.count); break;
        case KILN_REDUCE_L2: result = sqrt(acc); break;
        case KILN_REDUCE_LOG_SUM: result = log(acc); break;
        default: result = acc; break;
      }
    }
    if (tid == 0u) y[o] = result;
  }
}
