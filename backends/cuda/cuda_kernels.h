// The kernels the CUDA backend runs: the device kernels every device
// backend runs (kiln/backends/common/kernel_table.h), and Cast (below). One
// table, read by both halves: the planner half places outputs in place
// only through the inputs it declares (and takes an ONNX op when it runs
// the kernel the op lowers to: planner/cuda_planner.cc), and the runtime
// half refuses, at init, a kernel it does not list or an output sharing
// bytes with an input not declared here.
//
// Gemm and MatMul run on cuBLASLt on the GPU, on the reference GEMM kernel
// under the host execution model; so does a Conv the planner sends through
// a GEMM (ConvParams.algorithm, the rule in cuda_abi.h), after an im2col
// launch, the others run the direct convolution kernel; pooling and reductions take one warp per
// output; normalisation a block per row; data movement is one strided-copy
// kernel. Every kernel runs on float32, float16 or bfloat16 storage,
// accumulating in float32. No CUDA headers: the planner builds without the
// CUDA Toolkit.

#ifndef KILN_BACKENDS_CUDA_CUDA_KERNELS_H_
#define KILN_BACKENDS_CUDA_CUDA_KERNELS_H_

#include "kiln/backends/common/kernel_table.h"

namespace kiln::backends::cuda {

// Beside the device kernels: Cast between float32, float16 and bfloat16,
// which the planner places where 16-bit storage begins and ends (kiln plan
// --precision fp16/bf16); no ONNX op lowers to it on CUDA.
constexpr KernelInfo kOwnKernels[] = {{"Cast", 0}};

constexpr KernelTable kKernels = {true, kOwnKernels, 1};

}  // namespace kiln::backends::cuda

#endif  // KILN_BACKENDS_CUDA_CUDA_KERNELS_H_
