// A delegate's work as the CUDA backend records it: each kernel call of
// the delegate's blob becomes one or more launches (a kernel and its
// argument struct, every device address resolved when the delegate is
// initialised), or a GEMM through cuBLASLt on the GPU. lower.cc makes them
// from kernel calls (the checks each kernel relies on: the backend's trust
// boundary, once at init); launch.cu enqueues them on a stream.
//
// The argument structs are passed by value to the kernels (kernels.cuh);
// they hold device pointers and sizes only, so the same bytes serve the GPU
// build and the host execution model. Their data pointers are typed float*
// but address elements of the launch's storage type (Launch::storage:
// float32, or float16/bfloat16 where the delegate was planned with
// --precision fp16/bf16); every kernel computes and accumulates in float
// whatever it loads and stores.

#ifndef KILN_BACKENDS_CUDA_RUNTIME_SRC_LAUNCH_H_
#define KILN_BACKENDS_CUDA_RUNTIME_SRC_LAUNCH_H_

#include <stdint.h>

#include "backends/cuda/cuda_abi.h"
#include "cuda_compat.h"

namespace kiln::backends::cuda::KILN_CUDA_FLAVOR {

// Unary ops (kernels.cuh apply_unary) and fused activations
// (fb::Activation). The first ones, through kClip, are the shared unary
// kernels in their order (kiln/backends/common/kernel_table.h); lower.cc
// checks.
enum UnaryOp : uint32_t {
  // clang-format off
  kRelu, kSigmoid, kTanh, kNeg, kAbs, kExp, kLog, kSqrt, kErf, kFloor, kCeil, kReciprocal, kSoftplus,
  kLeakyRelu, kElu, kHardSigmoid, kHardSwish, kGelu, kClip,
  kGeluTanh, kIdentity,
  // clang-format on
  kActivation,  // UnaryArgs::act (an activation cuBLASLt's epilogues lack)
};
// The shared binary and reduction kernels, in their order (no Pow).
enum BinaryOp : uint32_t { kAdd, kSub, kMul, kDiv, kMax, kMin };
enum ReduceKind : uint32_t {
  // clang-format off
  kReduceSum, kReduceMean, kReduceMax, kReduceMin, kReduceProd, kReduceL1, kReduceL2, kReduceLogSum,
  kReduceLogSumExp, kReduceSumSquare,
  // clang-format on
};

struct Activation {
  uint32_t kind = 0;  // fb::Activation
  float alpha = 0.f, beta = 0.f;
};

struct UnaryArgs {
  const float* x;
  float* y;
  uint64_t n;
  uint32_t op;
  float alpha, beta;
  Activation act;
};

// The reference GEMM's tile: 64 x 64 outputs per block of 256 threads (a
// 16 x 16 grid of threads, 4 x 4 outputs each), K staged 16 at a time.
constexpr uint32_t kTile = 64;
constexpr uint32_t kTileStep = 16;
constexpr uint32_t kTileThreads = 256;

// y[i] = act(a[ia] op b[ib]); dims collapsed, strides 0 where broadcast.
struct BinaryArgs {
  const float* a;
  const float* b;
  float* y;
  uint64_t n;
  uint32_t op, rank;
  Activation act;
  uint32_t dims[kMaxRank];
  uint32_t a_strides[kMaxRank], b_strides[kMaxRank];
};

// Y[b] = act(alpha * op(A[b]) op(B[b]) + beta * C), row-major Y;
// batch index b decomposed over batch_dims.
struct MatMulArgs {
  const float* a;
  const float* b;
  const float* c;
  float* y;
  uint32_t m, n, k, batch_rank;
  int64_t a_row, a_col, b_row, b_col, c_row, c_col;
  float alpha, beta;
  Activation act;
  uint32_t batch_dims[4];
  int64_t a_batch[4], b_batch[4];
  // The call's planned scratch (cuBLASLt's workspace), or nullptr and 0.
  void* workspace;
  uint64_t workspace_bytes;
};

struct ConvArgs {
  const float* x;
  const float* weight;
  const float* bias;
  float* y;
  uint64_t total;
  uint32_t c, h, w, m, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, groups;
  Activation act;
};

// The column buffer of a convolution run as a GEMM (ConvParams.algorithm
// IM2COL_GEMM): per image, row c * kh * kw + ky * kw + kx holds input
// channel c at window offset (ky, kx) for every output position, 0 in the
// padding:
//   columns[image][c][ky][kx][oy][ox] = x[image][c][oy * sh - pt + ky * dh][ox * sw - pl + kx * dw]
// `total` = images * c * kh * kw * oh * ow.
struct Im2ColArgs {
  const float* x;
  float* columns;
  uint64_t total;
  uint32_t c, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
};

struct PoolArgs {
  const float* x;
  float* y;
  uint64_t total;
  uint32_t h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, is_max, include_pad;
};

struct ReduceArgs {
  const float* x;
  float* y;
  uint32_t outputs, count, op, kept_rank, reduced_rank;
  uint32_t kept_dims[kMaxRank], kept_strides[kMaxRank];
  uint32_t reduced_dims[kMaxRank], reduced_strides[kMaxRank];
};

// Rows of n elements `inner` apart (softmax over one axis).
struct SoftmaxArgs {
  const float* x;
  float* y;
  uint32_t rows, n, inner, log;
};

struct LayerNormArgs {
  const float* x;
  const float* scale;
  const float* bias;
  float* y;
  float* mean;  // optional outputs
  float* inv_std;
  uint32_t rows, n;
  float epsilon;
};

struct BatchNormArgs {
  const float* x;
  const float* scale;
  const float* bias;
  const float* mean;
  const float* var;
  float* y;
  uint64_t total;
  uint32_t channels, inner;
  float epsilon;
};

// y[y_base + sum i_d * y_strides[d]] = x[x_base + sum i_d * x_strides[d]]
// over dims (elements of the launch's storage type).
struct StridedArgs {
  const float* x;
  float* y;
  uint64_t n;
  uint32_t rank;
  uint32_t dims[kMaxRank];
  int64_t x_base, y_base;
  int64_t x_strides[kMaxRank], y_strides[kMaxRank];
};

// An all-reduce over every rank's copy of a symmetric arena (all_reduce.cuh):
// `count` floats at `input_offset` of each copy, reduced with `op`
// (fb::ReduceOp) into `output`; signal counters (one per block) at
// `signal_offset` of each copy. A wait for a peer longer than `timeout_ns`
// traps, failing the launch.
struct PeerReduceArgs {
  uint8_t* peers[kAllReduceMaxRanks];
  float* output;
  uint64_t input_offset, signal_offset, count, timeout_ns;
  uint32_t rank, ranks, two_shot, op;
  // Fused into the write: output[i] = sum + addends[0][i mod periods[0]]
  // (+ addends[1][...]); num_addends of them (CollectiveCall.inputs).
  const float* addends[kAllReduceMaxAddends];
  uint64_t periods[kAllReduceMaxAddends];
  uint32_t num_addends;
  // Rank r + 1 once the communicator saw rank r exit (DevicePeers), or
  // nullptr: a wait then ends at once instead of at the timeout.
  const volatile uint32_t* peer_exited;
};

// y[i] = x[i] converted from one storage type to another (the planner's
// casts at the edges of 16-bit storage).
struct CastArgs {
  const void* x;
  void* y;
  uint64_t n;
  uint32_t from, to;  // Storage
};

// How a launch's tensors store their elements (its kernel's template
// argument); every float operand of a launch has the one storage type, but
// a cast's input and output.
enum Storage : uint8_t { kFloat32, kFloat16, kBFloat16 };

enum class LaunchKind : uint8_t {
  // clang-format off
  kUnary, kBinary, kMatMul, kGemmLt, kConv, kPool, kReduce, kSoftmax, kLayerNorm, kBatchNorm, kStrided,
  kAllReduce, kCast, kIm2Col,
  // clang-format on
};

struct GemmPlan;  // cuda_backend.cc (GPU build only)

struct Launch {
  LaunchKind kind = LaunchKind::kUnary;
  Storage storage = kFloat32;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block = 256;
  const char* node = "";
  GemmPlan* gemm = nullptr;  // kGemmLt
  union {
    UnaryArgs unary;
    BinaryArgs binary;
    MatMulArgs matmul;
    ConvArgs conv;
    Im2ColArgs im2col;
    PoolArgs pool;
    ReduceArgs reduce;
    SoftmaxArgs softmax;
    LayerNormArgs layer_norm;
    BatchNormArgs batch_norm;
    StridedArgs strided;
    PeerReduceArgs all_reduce;
    CastArgs cast;
  };
  Launch() : unary() {}
};
static_assert(sizeof(Launch) <= kLaunchBytes, "Launch outgrew the bytes the planner half reserves (cuda_abi.h)");

// Enqueues `launch` (not kGemmLt) on `stream`. Errors surface through
// cudaGetLastError().
void enqueue_kernel(const Launch& launch, cudaStream_t stream);

}  // namespace kiln::backends::cuda::KILN_CUDA_FLAVOR

#endif  // KILN_BACKENDS_CUDA_RUNTIME_SRC_LAUNCH_H_
