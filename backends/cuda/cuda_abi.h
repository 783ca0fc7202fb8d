// What the two halves of the CUDA backend agree on: the planner half
// (backends/cuda/planner) writes these figures into programs, the runtime
// half (backends/cuda/runtime) static_asserts that its records fit them.
// No CUDA headers: the planner builds without the CUDA Toolkit.
//
// A delegate's host state (from the method's bookkeeping):
//
//   +--------+--------------------------------+-----------------------------+
//   | header | launches[kernels + operands]   | gemm plans[kernels]         |
//   | 256 B  | kLaunchBytes each              | kGemmPlanBytes each         |
//   +--------+--------------------------------+-----------------------------+
//
// A kernel call becomes one launch, or one per part (Concat, Split: at most
// one per operand) plus one for a separate activation or bias, or, for a
// Conv through a GEMM, an im2col, the GEMM and one for its bias or
// activation (three launches, four operands or more: input, weights,
// output, workspace), so kernels + operands launches always suffice. A Gemm/MatMul the GPU runs
// through cuBLASLt keeps its descriptors (cuBLASLt's opaque structs, which
// the backend initialises in place: nothing on the heap) in a plan.

#ifndef KILN_BACKENDS_CUDA_CUDA_ABI_H_
#define KILN_BACKENDS_CUDA_CUDA_ABI_H_

#include <stdint.h>

namespace kiln::backends::cuda {

constexpr uint64_t kDelegateHeaderBytes = 256;
constexpr uint64_t kLaunchBytes = 256;
constexpr uint64_t kGemmPlanBytes = 768;

constexpr uint64_t delegate_state_bytes(uint64_t kernels, uint64_t operands) {
  return kDelegateHeaderBytes + (kernels + operands) * kLaunchBytes + kernels * kGemmPlanBytes;
}

// The cuBLASLt workspace a Gemm/MatMul gets as planned scratch: 16 bytes
// per output element, from 1 MiB up to the 32 MiB NVIDIA suggests on Hopper
// (split-K reductions keep partial outputs there). Larger figures let
// cuBLASLt pick more algorithms; the GPU run is what tunes this.
constexpr uint64_t gemm_workspace_bytes(int64_t output_elements) {
  const uint64_t want = static_cast<uint64_t>(output_elements > 0 ? output_elements : 0) * 16;
  const uint64_t low = uint64_t{1} << 20, high = uint64_t{32} << 20;
  return want < low ? low : want > high ? high : want;
}

// A Conv runs as a GEMM (ConvParams.algorithm IM2COL_GEMM) when it has one
// group and its product, per image
//
//   Y[M][N] = W[M][K] x columns[K][N],  M output channels,
//                                       K = C * kH * kW, N = oH * oW,
//
// is at least kConvGemmMinDim in each of M, N and K: a tensor-core tile is
// 16 wide in each, and below that most of it would be padding, so the
// direct kernel (one pass over the output, no column buffer) keeps it, as
// it keeps depthwise and other grouped convolutions. The column buffer
// (planned scratch, the call's first, of the output's storage type) holds
// batch * K * N elements, none when the input already is the operand
// (conv_reads_input_as_columns); a convolution whose buffer would exceed
// kConvColumnsMaxBytes as float32 stays direct too, so one layer cannot
// claim a large share of the device's memory. The GEMM gets a cuBLASLt
// workspace like a Gemm's (gemm_workspace_bytes of its output), after it.
// The GPU run is what tunes these figures.
constexpr int64_t kConvGemmMinDim = 16;
constexpr uint64_t kConvColumnsMaxBytes = uint64_t{256} << 20;

// A 1x1 kernel with stride 1 and no padding reads each image [C][H][W] as
// the GEMM's [K][N] operand itself (dilation changes nothing then).
constexpr bool conv_reads_input_as_columns(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pad_sum) {
  return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pad_sum == 0;
}

// Offsets in CUDA arenas: what cudaMalloc guarantees and float4 loads want.
constexpr uint32_t kArenaAlignment = 256;

// The all-reduce kernels (CollectiveCall ONE_SHOT / TWO_SHOT, kernels in
// all_reduce.cuh): up to 8 ranks; a grid of one block per 64 KiB of the
// message, at most 32 blocks (few enough to be resident together on any
// GPU, which the per-block signals below need), 256 threads each. Every
// rank's copy of the symmetric arena holds one 8-byte signal counter per
// block at the call's signal offset, which the planner reserves after the
// planned tensors:
//
//   symmetric arena (each rank's copy)
//   +----------------------------------+---------------------------------+
//   | planned tensors (operands)       | signals: uint64 per block,      |
//   |                                  | written by its own rank only    |
//   +----------------------------------+---------------------------------+
//                                      ^ CollectiveCall.signal_offset
//
// A call keeps a Record and one launch as host state.
constexpr uint32_t kAllReduceMaxRanks = 8;
constexpr uint32_t kAllReduceMaxBlocks = 32;
constexpr uint32_t kAllReduceThreads = 256;
// Addends fused into the write (the schema's kMaxCollectiveAddends).
constexpr uint32_t kAllReduceMaxAddends = 2;
constexpr uint64_t kAllReduceBytesPerBlock = uint64_t{64} << 10;
constexpr uint64_t kAllReduceStateBytes = kDelegateHeaderBytes + kLaunchBytes;

constexpr uint32_t all_reduce_blocks(uint64_t bytes) {
  const uint64_t blocks = (bytes + kAllReduceBytesPerBlock - 1) / kAllReduceBytesPerBlock;
  return blocks < 1 ? 1 : blocks > kAllReduceMaxBlocks ? kAllReduceMaxBlocks : static_cast<uint32_t>(blocks);
}

constexpr uint64_t all_reduce_signal_bytes(uint32_t blocks) {
  return (uint64_t{blocks} * 8 + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

// Devices cuda:0 .. cuda:15 may be addressed.
constexpr int kMaxDevices = 16;

// Largest tensor rank the kernels index.
constexpr uint32_t kMaxRank = 8;

}  // namespace kiln::backends::cuda

#endif  // KILN_BACKENDS_CUDA_CUDA_ABI_H_
