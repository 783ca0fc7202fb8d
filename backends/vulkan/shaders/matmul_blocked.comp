// Gemm and MatMul without shared memory, for devices whose "GPU" is a CPU
// (lavapipe, SwiftShader): there barrier() switches between coroutines and
// shared memory is ordinary memory, so matmul.comp's tiling costs more than
// it saves. Each invocation accumulates a 4 x 4 block of Y in registers:
// rows 4 ty .. 4 ty + 3 of its workgroup's 32 x 32 tile, and columns
// 4 tx .. 4 tx + 3 (KILN_VEC4: B read as vec4, when its rows are whole
// vec4s) or tx + 8 j (scalar reads, any strides). Same push constants and
// operand addressing as matmul.comp.
#version 450
#include "common.glsl"

layout(local_size_x = 8, local_size_y = 8) in;

layout(std430, binding = 0) readonly buffer A { float a[]; };
#ifdef KILN_VEC4
layout(std430, binding = 1) readonly buffer B { vec4 b4[]; };
#else
layout(std430, binding = 1) readonly buffer B { float b[]; };
#endif
layout(std430, binding = 2) readonly buffer C { float c[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint m;
  uint n;
  uint k;
  uint a_row;
  uint a_col;
  uint b_row;
  uint b_col;
  uint c_row;
  uint c_col;
  uint has_c;
  float alpha;
  float beta;
  uint act;
  float act_alpha;
  float act_beta;
  uint batch_dims[3];
  uint a_batch[3];
  uint b_batch[3];
} pc;

void main() {
  const uint tx = gl_LocalInvocationID.x;
  const uint ty = gl_LocalInvocationID.y;
  const uint t = gl_WorkGroupID.z;
  uint rest = t;
  uint a_off = 0u, b_off = 0u;
  for (int d = 2; d >= 0; --d) {
    uint index = rest % pc.batch_dims[d];
    rest /= pc.batch_dims[d];
    a_off += index * pc.a_batch[d];
    b_off += index * pc.b_batch[d];
  }
  const uint row0 = gl_WorkGroupID.y * 32u + ty * 4u;
#ifdef KILN_VEC4
  const uint first_col = gl_WorkGroupID.x * 32u + tx * 4u;
#else
  const uint first_col = gl_WorkGroupID.x * 32u + tx;
#endif
  // No barrier follows: invocations with nothing to compute leave.
  if (row0 >= pc.m || first_col >= pc.n) return;
  // Rows and columns past the edge read the last valid ones; their results
  // are not written.
  uint a_at[4];
  for (uint i = 0u; i < 4u; ++i) a_at[i] = a_off + min(row0 + i, pc.m - 1u) * pc.a_row;
#ifdef KILN_VEC4
  const uint col0 = gl_WorkGroupID.x * 32u + tx * 4u;
  const uint b_at = (b_off + min(col0, pc.n - 4u)) / 4u;
  const uint b_step = pc.b_row / 4u;
  vec4 acc[4];
  for (uint i = 0u; i < 4u; ++i) acc[i] = vec4(0.0);
  for (uint kk = 0u; kk < pc.k; ++kk) {
    const vec4 bv = b4[b_at + kk * b_step];
    for (uint i = 0u; i < 4u; ++i) acc[i] += a[a_at[i] + kk * pc.a_col] * bv;
  }
#else
  const uint col0 = gl_WorkGroupID.x * 32u + tx;
  uint b_at[4];
  for (uint j = 0u; j < 4u; ++j) b_at[j] = b_off + min(col0 + 8u * j, pc.n - 1u) * pc.b_col;
  vec4 acc[4];
  for (uint i = 0u; i < 4u; ++i) acc[i] = vec4(0.0);
  for (uint kk = 0u; kk < pc.k; ++kk) {
    const uint kb = kk * pc.b_row;
    const vec4 bv = vec4(b[b_at[0] + kb], b[b_at[1] + kb], b[b_at[2] + kb], b[b_at[3] + kb]);
    for (uint i = 0u; i < 4u; ++i) acc[i] += a[a_at[i] + kk * pc.a_col] * bv;
  }
#endif
  const uint y_off = t * pc.m * pc.n;
  for (uint i = 0u; i < 4u; ++i) {
    const uint gi = row0 + i;
    if (gi >= pc.m) continue;
    for (uint j = 0u; j < 4u; ++j) {
#ifdef KILN_VEC4
      const uint gj = col0 + j;
#else
      const uint gj = col0 + 8u * j;
#endif
      if (gj >= pc.n) continue;
      float v = pc.alpha * acc[i][j];
      if (pc.has_c != 0u) v += pc.beta * c[gi * pc.c_row + gj * pc.c_col];
      y[y_off + gi * pc.n + gj] = kiln_activation(v, pc.act, pc.act_alpha, pc.act_beta);
    }
  }
}
