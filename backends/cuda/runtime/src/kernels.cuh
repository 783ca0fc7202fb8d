// The CUDA backend's kernels, written once in CUDA C++. nvcc compiles them
// for the GPU (launch.cu); the host compiler compiles the same text under
// the host execution model (hostexec, test infrastructure: launch_hostexec.cc),
// which runs every block's threads as fibers, so barriers, shared memory
// and warp shuffles behave as on a GPU and the conformance suite checks
// these kernels for real on any machine.
//
// Conventions: every kernel is a template over its storage type T (float,
// or __half / __nv_bfloat16 for delegates planned with --precision
// fp16/bf16: launch.h's Storage): it loads T, computes and accumulates in
// float, and rounds to T once, on store (to_float, store). Under the host
// execution model the 16-bit types are hostexec's software ones, which
// round exactly as the GPU does. Every kernel takes one argument struct
// (launch.h) by value and walks its work with a grid-stride loop, so any
// grid size is correct (lower.cc picks it). Block sizes are multiples of
// 32 (whole warps) where a kernel shuffles.

#ifndef KILN_BACKENDS_CUDA_RUNTIME_SRC_KERNELS_CUH_
#define KILN_BACKENDS_CUDA_RUNTIME_SRC_KERNELS_CUH_

#include <math.h>
#include <stdint.h>

#if !KILN_CUDA_HOSTEXEC
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include "all_reduce.cuh"
#include "launch.h"

namespace kiln::backends::cuda::KILN_CUDA_FLAVOR {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ uint64_t global_thread() { return uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; }
__device__ __forceinline__ uint64_t grid_threads() { return uint64_t{gridDim.x} * blockDim.x; }

// Loads and stores of the storage types: float in registers, T in memory.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float& out, float v) { out = v; }
__device__ __forceinline__ void store(__half& out, float v) { out = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16& out, float v) { out = __float2bfloat16_rn(v); }

template <typename T>
__device__ __forceinline__ const T* typed(const float* p) {
  return reinterpret_cast<const T*>(p);
}
template <typename T>
__device__ __forceinline__ T* typed(float* p) {
  return reinterpret_cast<T*>(p);
}

__device__ __forceinline__ float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }
__device__ __forceinline__ float sigmoidf(float x) { return 1.f / (1.f + expf(-x)); }

__device__ __forceinline__ float apply_activation(const Activation& a, float x);

__device__ __forceinline__ float apply_unary(const UnaryArgs& p, float x) {
  const float alpha = p.alpha, beta = p.beta;
  switch (p.op) {
    case kActivation: return apply_activation(p.act, x);
    case kRelu: return x > 0.f ? x : 0.f;
    case kSigmoid: return sigmoidf(x);
    case kTanh: return tanhf(x);
    case kNeg: return -x;
    case kAbs: return fabsf(x);
    case kExp: return expf(x);
    case kLog: return logf(x);
    case kSqrt: return sqrtf(x);
    case kErf: return erff(x);
    case kFloor: return floorf(x);
    case kCeil: return ceilf(x);
    case kReciprocal: return 1.f / x;
    case kSoftplus: return x > 20.f ? x : log1pf(expf(x));
    case kLeakyRelu: return x >= 0.f ? x : alpha * x;
    case kElu: return x >= 0.f ? x : alpha * (expf(x) - 1.f);
    case kHardSigmoid: return clampf(alpha * x + beta, 0.f, 1.f);
    case kHardSwish: return x * clampf(x * (1.f / 6.f) + 0.5f, 0.f, 1.f);
    case kGelu: return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
    case kGeluTanh: return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case kClip: return x != x ? x : clampf(x, alpha, beta);
    default: return x;
  }
}

// fb::Activation: NONE, RELU, CLIP, SIGMOID, TANH, LEAKY_RELU, HARD_SIGMOID, HARD_SWISH, SILU, GELU.
__device__ __forceinline__ float apply_activation(const Activation& a, float x) {
  switch (a.kind) {
    case 1: return x > 0.f ? x : 0.f;
    case 2: return clampf(x, a.alpha, a.beta);
    case 3: return sigmoidf(x);
    case 4: return tanhf(x);
    case 5: return x >= 0.f ? x : a.alpha * x;
    case 6: return clampf(a.alpha * x + a.beta, 0.f, 1.f);
    case 7: return x * clampf(a.alpha * x + a.beta, 0.f, 1.f);
    case 8: return x * sigmoidf(x);
    case 9: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    default: return x;
  }
}

__device__ __forceinline__ float apply_binary(uint32_t op, float a, float b) {
  switch (op) {
    case kAdd: return a + b;
    case kSub: return a - b;
    case kMul: return a * b;
    case kDiv: return a / b;
    case kMax: return (a != a || b != b) ? a + b : (a > b ? a : b);
    case kMin: return (a != a || b != b) ? a + b : (a < b ? a : b);
    default: return a;
  }
}

// Element-wise: in float32, float4 loads and stores where the whole tensor
// is whole float4s (arena offsets are 256-byte aligned), the rest one by
// one; 16-bit storage one by one.
template <typename T>
__global__ void unary_kernel(UnaryArgs p) {
  uint64_t first = 0;
  if constexpr (sizeof(T) == 4) {
    const uint64_t n4 = p.n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(p.x);
    float4* y4 = reinterpret_cast<float4*>(p.y);
    for (uint64_t i = global_thread(); i < n4; i += grid_threads()) {
      float4 v = x4[i];
      v.x = apply_unary(p, v.x);
      v.y = apply_unary(p, v.y);
      v.z = apply_unary(p, v.z);
      v.w = apply_unary(p, v.w);
      y4[i] = v;
    }
    first = n4 * 4;
  }
  const T* x = typed<T>(p.x);
  T* y = typed<T>(p.y);
  for (uint64_t i = first + global_thread(); i < p.n; i += grid_threads()) store(y[i], apply_unary(p, to_float(x[i])));
}

template <typename T>
__global__ void binary_kernel(BinaryArgs p) {
  const T* a = typed<T>(p.a);
  const T* b = typed<T>(p.b);
  T* y = typed<T>(p.y);
  if (sizeof(T) == 4 && p.rank == 1 && p.a_strides[0] == 1 && p.b_strides[0] == 1) {
    // Same shapes (after collapsing), float32: the vector path.
    const uint64_t n4 = p.n / 4;
    const float4* a4 = reinterpret_cast<const float4*>(p.a);
    const float4* b4 = reinterpret_cast<const float4*>(p.b);
    float4* y4 = reinterpret_cast<float4*>(p.y);
    for (uint64_t i = global_thread(); i < n4; i += grid_threads()) {
      const float4 va = a4[i], vb = b4[i];
      float4 v;
      v.x = apply_activation(p.act, apply_binary(p.op, va.x, vb.x));
      v.y = apply_activation(p.act, apply_binary(p.op, va.y, vb.y));
      v.z = apply_activation(p.act, apply_binary(p.op, va.z, vb.z));
      v.w = apply_activation(p.act, apply_binary(p.op, va.w, vb.w));
      y4[i] = v;
    }
    for (uint64_t i = n4 * 4 + global_thread(); i < p.n; i += grid_threads()) {
      store(y[i], apply_activation(p.act, apply_binary(p.op, to_float(a[i]), to_float(b[i]))));
    }
    return;
  }
  for (uint64_t i = global_thread(); i < p.n; i += grid_threads()) {
    uint64_t rest = i, ia = 0, ib = 0;
    for (int d = static_cast<int>(p.rank) - 1; d >= 0; --d) {
      const uint64_t c = rest % p.dims[d];
      rest /= p.dims[d];
      ia += c * p.a_strides[d];
      ib += c * p.b_strides[d];
    }
    store(y[i], apply_activation(p.act, apply_binary(p.op, to_float(a[ia]), to_float(b[ib]))));
  }
}

// The reference GEMM: 64 x 64 tiles of Y per block (256 threads, each
// 4 x 4 outputs 16 apart), slices of 16 of A's columns and B's rows staged
// through shared memory; blockIdx.z walks the batch. Each output sums its
// products in k order, as a dot product. Used under the host execution
// model for every Gemm/MatMul (and Conv through a GEMM), and on the GPU
// where cuBLASLt cannot take a product (broadcast batch layouts). With
// 4 x 4 outputs per thread a product takes a sixteenth of the barriers one
// output per thread would, and barriers are what the host execution model
// pays for (each switches every thread's fiber): resnet18 with its
// convolutions through the GEMM runs there in 23 s instead of 142 s.
template <typename T>
__global__ void matmul_kernel(MatMulArgs p) {
  constexpr uint32_t kSide = 16;              // threads along each side of the tile
  constexpr uint32_t kPer = kTile / kSide;    // outputs per thread along each side
  __shared__ float as[kTileStep][kTile + 1];  // as[kk][row]
  __shared__ float bs[kTileStep][kTile + 1];  // bs[kk][col]
  const uint32_t tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
  for (uint32_t batch = blockIdx.z; batch < p.batch_dims[0] * p.batch_dims[1] * p.batch_dims[2] * p.batch_dims[3];
       batch += gridDim.z) {
    int64_t a_off = 0, b_off = 0;
    uint32_t rest = batch;
    for (int d = 3; d >= 0; --d) {
      const uint32_t c = rest % p.batch_dims[d];
      rest /= p.batch_dims[d];
      a_off += c * p.a_batch[d];
      b_off += c * p.b_batch[d];
    }
    const T* a = typed<T>(p.a) + a_off;
    const T* b = typed<T>(p.b) + b_off;
    const T* c = typed<T>(p.c);
    T* y = typed<T>(p.y) + uint64_t{batch} * p.m * p.n;
    for (uint32_t row0 = blockIdx.y * kTile; row0 < p.m; row0 += gridDim.y * kTile) {
      for (uint32_t col0 = blockIdx.x * kTile; col0 < p.n; col0 += gridDim.x * kTile) {
        float acc[kPer][kPer] = {};
        for (uint32_t k0 = 0; k0 < p.k; k0 += kTileStep) {
          // kTile * kTileStep elements of each operand, 4 per thread; A
          // along k and B along n between neighbouring threads.
          for (uint32_t e = threadIdx.x; e < kTile * kTileStep; e += kTileThreads) {
            const uint32_t r = e / kTileStep, ka = e % kTileStep;
            const uint32_t row = row0 + r, k = k0 + ka;
            as[ka][r] = row < p.m && k < p.k ? to_float(a[row * p.a_row + k * p.a_col]) : 0.f;
            const uint32_t col = col0 + e % kTile, kb = k0 + e / kTile;
            bs[e / kTile][e % kTile] = kb < p.k && col < p.n ? to_float(b[kb * p.b_row + col * p.b_col]) : 0.f;
          }
          __syncthreads();
          for (uint32_t kk = 0; kk < kTileStep; ++kk) {
            float av[kPer], bv[kPer];
            for (uint32_t i = 0; i < kPer; ++i) av[i] = as[kk][ty + kSide * i];
            for (uint32_t j = 0; j < kPer; ++j) bv[j] = bs[kk][tx + kSide * j];
            for (uint32_t i = 0; i < kPer; ++i) {
              for (uint32_t j = 0; j < kPer; ++j) acc[i][j] += av[i] * bv[j];
            }
          }
          __syncthreads();
        }
        for (uint32_t i = 0; i < kPer; ++i) {
          for (uint32_t j = 0; j < kPer; ++j) {
            const uint32_t row = row0 + ty + kSide * i, col = col0 + tx + kSide * j;
            if (row >= p.m || col >= p.n) continue;
            float v = p.alpha * acc[i][j];
            if (c != nullptr) v += p.beta * to_float(c[row * p.c_row + col * p.c_col]);
            store(y[uint64_t{row} * p.n + col], apply_activation(p.act, v));
          }
        }
      }
    }
  }
}

// Direct convolution, one output element per thread (NCHW; groups and
// depthwise included).
template <typename T>
__global__ void conv_kernel(ConvArgs p) {
  const T* bias = typed<T>(p.bias);
  const uint32_t cg = p.c / p.groups, mg = p.m / p.groups;
  for (uint64_t i = global_thread(); i < p.total; i += grid_threads()) {
    const uint32_t ox = static_cast<uint32_t>(i % p.ow);
    const uint32_t oy = static_cast<uint32_t>(i / p.ow % p.oh);
    const uint32_t m = static_cast<uint32_t>(i / (uint64_t{p.ow} * p.oh) % p.m);
    const uint64_t image = i / (uint64_t{p.ow} * p.oh * p.m);
    const uint32_t g = m / mg;
    float acc = bias != nullptr ? to_float(bias[m]) : 0.f;
    const T* w = typed<T>(p.weight) + uint64_t{m} * cg * p.kh * p.kw;
    const T* x = typed<T>(p.x) + (image * p.c + uint64_t{g} * cg) * p.h * p.w;
    const int32_t y0 = static_cast<int32_t>(oy * p.sh) - static_cast<int32_t>(p.pt);
    const int32_t x0 = static_cast<int32_t>(ox * p.sw) - static_cast<int32_t>(p.pl);
    for (uint32_t c = 0; c < cg; ++c) {
      for (uint32_t ky = 0; ky < p.kh; ++ky) {
        const int32_t iy = y0 + static_cast<int32_t>(ky * p.dh);
        if (iy < 0 || iy >= static_cast<int32_t>(p.h)) continue;
        for (uint32_t kx = 0; kx < p.kw; ++kx) {
          const int32_t ix = x0 + static_cast<int32_t>(kx * p.dw);
          if (ix < 0 || ix >= static_cast<int32_t>(p.w)) continue;
          acc += to_float(x[(uint64_t{c} * p.h + iy) * p.w + ix]) * to_float(w[(c * p.kh + ky) * p.kw + kx]);
        }
      }
    }
    store(typed<T>(p.y)[i], apply_activation(p.act, acc));
  }
}

template <typename T>
__global__ void pool_kernel(PoolArgs p) {
  for (uint64_t i = global_thread(); i < p.total; i += grid_threads()) {
    const uint32_t ox = static_cast<uint32_t>(i % p.ow);
    const uint32_t oy = static_cast<uint32_t>(i / p.ow % p.oh);
    const uint64_t plane = i / (uint64_t{p.ow} * p.oh);
    const T* x = typed<T>(p.x) + plane * p.h * p.w;
    const int32_t y0 = static_cast<int32_t>(oy * p.sh) - static_cast<int32_t>(p.pt);
    const int32_t x0 = static_cast<int32_t>(ox * p.sw) - static_cast<int32_t>(p.pl);
    float acc = p.is_max ? -INFINITY : 0.f;
    uint32_t inside = 0, padded = 0;
    for (uint32_t ky = 0; ky < p.kh; ++ky) {
      const int32_t iy = y0 + static_cast<int32_t>(ky * p.dh);
      const bool row_padded = iy >= -static_cast<int32_t>(p.pt) && iy < static_cast<int32_t>(p.h + p.pb);
      for (uint32_t kx = 0; kx < p.kw; ++kx) {
        const int32_t ix = x0 + static_cast<int32_t>(kx * p.dw);
        if (row_padded && ix >= -static_cast<int32_t>(p.pl) && ix < static_cast<int32_t>(p.w + p.pr)) ++padded;
        if (iy < 0 || iy >= static_cast<int32_t>(p.h) || ix < 0 || ix >= static_cast<int32_t>(p.w)) continue;
        const float v = to_float(x[uint64_t{static_cast<uint32_t>(iy)} * p.w + ix]);
        ++inside;
        if (p.is_max) {
          if (v > acc || v != v) acc = v;
        } else {
          acc += v;
        }
      }
    }
    if (!p.is_max) {
      const uint32_t divisor = p.include_pad ? padded : inside;
      acc = divisor > 0 ? acc / static_cast<float>(divisor) : 0.f;
    }
    store(typed<T>(p.y)[i], acc);
  }
}

// Warp-wide reductions through shuffles (every lane gets the result).
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float o = __shfl_xor_sync(kFullMask, v, offset);
    v = o > v || o != o ? o : v;
  }
  return v;
}
__device__ __forceinline__ float warp_combine(uint32_t op, float v) {
  switch (op) {
    case kReduceMax: return warp_max(v);
    case kReduceMin: return -warp_max(-v);
    case kReduceProd:
      for (int offset = 16; offset > 0; offset /= 2) v *= __shfl_xor_sync(kFullMask, v, offset);
      return v;
    default: return warp_sum(v);
  }
}

// One warp per output; `count` reduced elements each.
template <typename T>
__global__ void reduce_kernel(ReduceArgs p) {
  const T* x = typed<T>(p.x);
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t warps = blockDim.x / 32;
  for (uint32_t o = blockIdx.x * warps + threadIdx.x / 32; o < p.outputs; o += gridDim.x * warps) {
    uint64_t base = 0;
    uint32_t rest = o;
    for (int d = static_cast<int>(p.kept_rank) - 1; d >= 0; --d) {
      base += uint64_t{rest % p.kept_dims[d]} * p.kept_strides[d];
      rest /= p.kept_dims[d];
    }
    float shift = 0.f;
    if (p.op == kReduceLogSumExp) {
      float m = -INFINITY;
      for (uint32_t j = lane; j < p.count; j += 32) {
        uint64_t off = base;
        uint32_t r = j;
        for (int d = static_cast<int>(p.reduced_rank) - 1; d >= 0; --d) {
          off += uint64_t{r % p.reduced_dims[d]} * p.reduced_strides[d];
          r /= p.reduced_dims[d];
        }
        const float v = to_float(x[off]);
        m = v > m || v != v ? v : m;
      }
      shift = warp_max(m);
      if (shift == -INFINITY || shift == INFINITY) shift = 0.f;
    }
    float acc = p.op == kReduceMax ? -INFINITY : p.op == kReduceMin ? INFINITY : p.op == kReduceProd ? 1.f : 0.f;
    for (uint32_t j = lane; j < p.count; j += 32) {
      uint64_t off = base;
      uint32_t r = j;
      for (int d = static_cast<int>(p.reduced_rank) - 1; d >= 0; --d) {
        off += uint64_t{r % p.reduced_dims[d]} * p.reduced_strides[d];
        r /= p.reduced_dims[d];
      }
      const float v = to_float(x[off]);
      switch (p.op) {
        case kReduceMax: acc = v > acc || v != v ? v : acc; break;
        case kReduceMin: acc = v < acc || v != v ? v : acc; break;
        case kReduceProd: acc *= v; break;
        case kReduceL1: acc += fabsf(v); break;
        case kReduceL2:
        case kReduceSumSquare: acc += v * v; break;
        case kReduceLogSumExp: acc += expf(v - shift); break;
        default: acc += v; break;
      }
    }
    acc = warp_combine(p.op, acc);
    if (lane == 0) {
      switch (p.op) {
        case kReduceMean: acc = acc / static_cast<float>(p.count); break;
        case kReduceL2: acc = sqrtf(acc); break;
        case kReduceLogSum: acc = logf(acc); break;
        case kReduceLogSumExp: acc = logf(acc) + shift; break;
        default: break;
      }
      store(typed<T>(p.y)[o], acc);
    }
  }
}

// A block-wide reduction: warps shuffle, warp results meet in shared memory.
// Every thread of the block must call it (it has barriers).
__device__ __forceinline__ float block_reduce(float v, bool is_max, float* scratch) {
  const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = is_max ? warp_max(v) : warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < warps ? scratch[lane] : (is_max ? -INFINITY : 0.f);
  if (warp == 0) {
    r = is_max ? warp_max(r) : warp_sum(r);
    if (lane == 0) scratch[32] = r;
  }
  __syncthreads();
  const float result = scratch[32];
  __syncthreads();  // scratch is reused by the next call
  return result;
}

// One block per row.
template <typename T>
__global__ void softmax_kernel(SoftmaxArgs p) {
  __shared__ float scratch[33];
  for (uint32_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const uint64_t base = uint64_t{row / p.inner} * p.n * p.inner + row % p.inner;
    const T* x = typed<T>(p.x) + base;
    T* y = typed<T>(p.y) + base;
    float m = -INFINITY;
    for (uint32_t j = threadIdx.x; j < p.n; j += blockDim.x) {
      const float v = to_float(x[uint64_t{j} * p.inner]);
      m = v > m || v != v ? v : m;
    }
    m = block_reduce(m, true, scratch);
    float s = 0.f;
    for (uint32_t j = threadIdx.x; j < p.n; j += blockDim.x) s += expf(to_float(x[uint64_t{j} * p.inner]) - m);
    s = block_reduce(s, false, scratch);
    const float log_s = logf(s), inv_s = 1.f / s;
    for (uint32_t j = threadIdx.x; j < p.n; j += blockDim.x) {
      const float v = to_float(x[uint64_t{j} * p.inner]) - m;
      store(y[uint64_t{j} * p.inner], p.log ? v - log_s : expf(v) * inv_s);
    }
  }
}

// One block per row: mean, then variance around it (two passes, as the
// CPU kernel), then the affine map.
template <typename T>
__global__ void layer_norm_kernel(LayerNormArgs p) {
  __shared__ float scratch[33];
  const T* scale = typed<T>(p.scale);
  const T* bias = typed<T>(p.bias);
  for (uint32_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* x = typed<T>(p.x) + uint64_t{row} * p.n;
    T* y = typed<T>(p.y) + uint64_t{row} * p.n;
    float s = 0.f;
    for (uint32_t j = threadIdx.x; j < p.n; j += blockDim.x) s += to_float(x[j]);
    const float mean = block_reduce(s, false, scratch) / static_cast<float>(p.n);
    float q = 0.f;
    for (uint32_t j = threadIdx.x; j < p.n; j += blockDim.x) q += (to_float(x[j]) - mean) * (to_float(x[j]) - mean);
    const float inv = 1.f / sqrtf(block_reduce(q, false, scratch) / static_cast<float>(p.n) + p.epsilon);
    for (uint32_t j = threadIdx.x; j < p.n; j += blockDim.x) {
      store(y[j], (to_float(x[j]) - mean) * inv * to_float(scale[j]) + (bias != nullptr ? to_float(bias[j]) : 0.f));
    }
    if (threadIdx.x == 0 && p.mean != nullptr) store(typed<T>(p.mean)[row], mean);
    if (threadIdx.x == 0 && p.inv_std != nullptr) store(typed<T>(p.inv_std)[row], inv);
  }
}

// A convolution's column buffer (launch.h Im2ColArgs), one element per
// thread, consecutive threads along the output row: reads of a row of x
// and writes of a row of columns both coalesce. Moves elements without
// converting them.
template <typename T>
__global__ void im2col_kernel(Im2ColArgs p) {
  const T* x = typed<T>(p.x);
  T* columns = typed<T>(p.columns);
  const uint64_t positions = uint64_t{p.oh} * p.ow;
  const uint32_t window = p.kh * p.kw;
  for (uint64_t i = global_thread(); i < p.total; i += grid_threads()) {
    const uint32_t ox = static_cast<uint32_t>(i % p.ow);
    const uint32_t oy = static_cast<uint32_t>(i / p.ow % p.oh);
    const uint64_t row = i / positions;  // image * c * window + c * window + ky * kw + kx
    const uint32_t tap = static_cast<uint32_t>(row % window);
    const uint64_t plane = row / window;  // image * c + c
    const int32_t iy = static_cast<int32_t>(oy * p.sh + (tap / p.kw) * p.dh) - static_cast<int32_t>(p.pt);
    const int32_t ix = static_cast<int32_t>(ox * p.sw + (tap % p.kw) * p.dw) - static_cast<int32_t>(p.pl);
    const bool inside = iy >= 0 && iy < static_cast<int32_t>(p.h) && ix >= 0 && ix < static_cast<int32_t>(p.w);
    if (inside) {
      columns[i] = x[(plane * p.h + static_cast<uint32_t>(iy)) * p.w + static_cast<uint32_t>(ix)];
    } else {
      store(columns[i], 0.f);
    }
  }
}

template <typename T>
__global__ void batch_norm_kernel(BatchNormArgs p) {
  const T *x = typed<T>(p.x), *scale = typed<T>(p.scale), *bias = typed<T>(p.bias);
  const T *mean = typed<T>(p.mean), *var = typed<T>(p.var);
  T* y = typed<T>(p.y);
  for (uint64_t i = global_thread(); i < p.total; i += grid_threads()) {
    const uint32_t c = static_cast<uint32_t>(i / p.inner % p.channels);
    const float inv = 1.f / sqrtf(to_float(var[c]) + p.epsilon);
    store(y[i], (to_float(x[i]) - to_float(mean[c])) * inv * to_float(scale[c]) + to_float(bias[c]));
  }
}

// Moves elements without converting them.
template <typename T>
__global__ void strided_kernel(StridedArgs p) {
  const T* x = typed<T>(p.x);
  T* y = typed<T>(p.y);
  for (uint64_t i = global_thread(); i < p.n; i += grid_threads()) {
    uint64_t rest = i;
    int64_t xo = p.x_base, yo = p.y_base;
    for (int d = static_cast<int>(p.rank) - 1; d >= 0; --d) {
      const int64_t c = static_cast<int64_t>(rest % p.dims[d]);
      rest /= p.dims[d];
      xo += c * p.x_strides[d];
      yo += c * p.y_strides[d];
    }
    y[yo] = x[xo];
  }
}

__device__ __forceinline__ float load_as(const void* p, uint32_t storage, uint64_t i) {
  switch (storage) {
    case kFloat16: return to_float(static_cast<const __half*>(p)[i]);
    case kBFloat16: return to_float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_as(void* p, uint32_t storage, uint64_t i, float v) {
  switch (storage) {
    case kFloat16: store(static_cast<__half*>(p)[i], v); break;
    case kBFloat16: store(static_cast<__nv_bfloat16*>(p)[i], v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

// A conversion between storage types (one rounding: float32 to 16 bits,
// or 16 bits to 16 bits through float32, which holds both exactly).
__global__ void cast_kernel(CastArgs p) {
  for (uint64_t i = global_thread(); i < p.n; i += grid_threads()) store_as(p.y, p.to, i, load_as(p.x, p.from, i));
}

// Enqueues the kernel of `l` for storage type T.
template <typename T>
inline void enqueue_typed(const Launch& l, dim3 grid, dim3 block, cudaStream_t stream) {
  switch (l.kind) {
    case LaunchKind::kUnary: KILN_CUDA_LAUNCH(unary_kernel<T>, grid, block, stream, l.unary); break;
    case LaunchKind::kBinary: KILN_CUDA_LAUNCH(binary_kernel<T>, grid, block, stream, l.binary); break;
    case LaunchKind::kMatMul: KILN_CUDA_LAUNCH(matmul_kernel<T>, grid, block, stream, l.matmul); break;
    case LaunchKind::kConv: KILN_CUDA_LAUNCH(conv_kernel<T>, grid, block, stream, l.conv); break;
    case LaunchKind::kIm2Col: KILN_CUDA_LAUNCH(im2col_kernel<T>, grid, block, stream, l.im2col); break;
    case LaunchKind::kPool: KILN_CUDA_LAUNCH(pool_kernel<T>, grid, block, stream, l.pool); break;
    case LaunchKind::kReduce: KILN_CUDA_LAUNCH(reduce_kernel<T>, grid, block, stream, l.reduce); break;
    case LaunchKind::kSoftmax: KILN_CUDA_LAUNCH(softmax_kernel<T>, grid, block, stream, l.softmax); break;
    case LaunchKind::kLayerNorm: KILN_CUDA_LAUNCH(layer_norm_kernel<T>, grid, block, stream, l.layer_norm); break;
    case LaunchKind::kBatchNorm: KILN_CUDA_LAUNCH(batch_norm_kernel<T>, grid, block, stream, l.batch_norm); break;
    case LaunchKind::kStrided: KILN_CUDA_LAUNCH(strided_kernel<T>, grid, block, stream, l.strided); break;
    default: break;
  }
}

// Enqueues the kernel of `l` (launch.h).
inline void enqueue_kernel_impl(const Launch& l, cudaStream_t stream) {
  const dim3 grid(l.grid[0], l.grid[1], l.grid[2]);
  const dim3 block(l.block);
  switch (l.kind) {
    case LaunchKind::kAllReduce: KILN_CUDA_LAUNCH(all_reduce_kernel, grid, block, stream, l.all_reduce); return;
    case LaunchKind::kCast: KILN_CUDA_LAUNCH(cast_kernel, grid, block, stream, l.cast); return;
    case LaunchKind::kGemmLt: return;  // cuda_backend.cc
    default: break;
  }
  switch (l.storage) {
    case kFloat16: enqueue_typed<__half>(l, grid, block, stream); break;
    case kBFloat16: enqueue_typed<__nv_bfloat16>(l, grid, block, stream); break;
    default: enqueue_typed<float>(l, grid, block, stream); break;
  }
}

}  // namespace kiln::backends::cuda::KILN_CUDA_FLAVOR

#endif  // KILN_BACKENDS_CUDA_RUNTIME_SRC_KERNELS_CUH_
