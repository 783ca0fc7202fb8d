// Gemm and MatMul: Y[t] = act(alpha * A[t] B[t] + beta * C), for every batch
// matrix t (workgroup z). Each workgroup computes a 32 x 32 tile of Y; its
// 8 x 8 invocations each own a 4 x 4 block (rows ty + 8i, columns tx + 8j).
// A and B are staged through shared memory 16 columns of K at a time.
//
// Operands are addressed through element strides, so transposed operands,
// vectors and broadcast batch dims need no copies:
//   A(i, k) = a[a_off + i * a_row + k * a_col]
//   B(k, j) = b[b_off + k * b_row + j * b_col]
//   C(i, j) = c[i * c_row + j * c_col]          (0 strides broadcast)
//   Y(i, j) = y[t * m * n + i * n + j]
// with a_off/b_off from the batch index t split over batch_dims (row-major).
#version 450
#include "common.glsl"

layout(local_size_x = 8, local_size_y = 8) in;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
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

const uint TM = 32u;
const uint TN = 32u;
const uint TK = 16u;

shared float tile_a[TK][TM + 1u];
shared float tile_b[TK][TN + 1u];

void main() {
  const uint tx = gl_LocalInvocationID.x;
  const uint ty = gl_LocalInvocationID.y;
  const uint tid = ty * 8u + tx;
  const uint t = gl_WorkGroupID.z;
  uint rest = t;
  uint a_off = 0u, b_off = 0u;
  for (int d = 2; d >= 0; --d) {
    uint index = rest % pc.batch_dims[d];
    rest /= pc.batch_dims[d];
    a_off += index * pc.a_batch[d];
    b_off += index * pc.b_batch[d];
  }
  const uint row0 = gl_WorkGroupID.y * TM;
  const uint col0 = gl_WorkGroupID.x * TN;

  float acc[4][4];
  for (uint i = 0u; i < 4u; ++i) {
    for (uint j = 0u; j < 4u; ++j) acc[i][j] = 0.0;
  }

  for (uint k0 = 0u; k0 < pc.k; k0 += TK) {
    // Stage A's 32 x 16 and B's 16 x 32 block; zeros outside the matrices.
    for (uint e = tid; e < TM * TK; e += 64u) {
      const uint r = e / TK, kk = e % TK;
      const uint gi = row0 + r, gk = k0 + kk;
      const bool inside = gi < pc.m && gk < pc.k;
      // The index is clamped too: a compiler may load before it selects.
      const uint at = inside ? a_off + gi * pc.a_row + gk * pc.a_col : 0u;
      tile_a[kk][r] = inside ? a[at] : 0.0;
    }
    for (uint e = tid; e < TK * TN; e += 64u) {
      const uint kk = e / TN, cc = e % TN;
      const uint gk = k0 + kk, gj = col0 + cc;
      const bool inside = gk < pc.k && gj < pc.n;
      const uint at = inside ? b_off + gk * pc.b_row + gj * pc.b_col : 0u;
      tile_b[kk][cc] = inside ? b[at] : 0.0;
    }
    barrier();
    for (uint kk = 0u; kk < TK; ++kk) {
      float av[4], bv[4];
      for (uint i = 0u; i < 4u; ++i) av[i] = tile_a[kk][ty + 8u * i];
      for (uint j = 0u; j < 4u; ++j) bv[j] = tile_b[kk][tx + 8u * j];
      for (uint i = 0u; i < 4u; ++i) {
        for (uint j = 0u; j < 4u; ++j) acc[i][j] += av[i] * bv[j];
      }
    }
    barrier();
  }

  const uint y_off = t * pc.m * pc.n;
  for (uint i = 0u; i < 4u; ++i) {
    const uint gi = row0 + ty + 8u * i;
    if (gi >= pc.m) continue;
    for (uint j = 0u; j < 4u; ++j) {
      const uint gj = col0 + tx + 8u * j;
      if (gj >= pc.n) continue;
      float v = pc.alpha * acc[i][j];
      if (pc.has_c != 0u) v += pc.beta * c[gi * pc.c_row + gj * pc.c_col];
      y[y_off + gi * pc.n + gj] = kiln_activation(v, pc.act, pc.act_alpha, pc.act_beta);
    }
  }
}
